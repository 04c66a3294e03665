package server

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/subject"
)

// Imports carry messages across accounts. Each import in force is one
// subscription whose fwd is set, in the account where its messages are
// published:
//
//   - a stream import subscribes in the exporting account to the imported
//     subject; a match is mapped to the importer's local subject and
//     delivered to the importer's subscribers (never to its own imports:
//     stream imports do not chain, as nats-server's shadow subscriptions
//     do not);
//   - a service import subscribes in the importing account to its local
//     subject; a request is mapped to the exporter's subject and delivered
//     there with its reply rewritten to a fresh _R_ subject of the exporter
//     (responses.go), which routes the response back. Requests and
//     responses may chain through further service imports, up to
//     maxLinkDepth crossings; they never reach stream imports.
//
// Accounts without imports or exports have no such subscriptions: their
// publishes pay one nil check per delivery (sender.deliver).

// maxLinkDepth bounds how many accounts one message may cross through
// service imports and responses: a cycle of imports stops there.
const maxLinkDepth = 8

// jsAckPrefix marks JetStream ack replies, which pass through service
// imports unchanged (nats-server does the same): the importer acks
// through its own import of $JS.ACK.
var jsAckPrefix = []byte("$JS.ACK.")

// requestInfoHdr is the header nats-server adds to a request crossing a
// service import, naming the requesting account; a client cannot forge
// it, since any copy it sent is replaced.
const requestInfoHdr = "Nats-Request-Info"

// forwarder is a subscription that moves messages to another account
// (its fwd field). forward runs where deliveries run: on the publisher's
// goroutine, with the publisher's sender, so it must not block.
type forwarder interface {
	interested
	forward(s *sender, subj, reply []byte, hdrLen int, msg []byte)
	// stream reports whether this is a stream import, which messages that
	// crossed as service requests or responses never reach.
	stream() bool
}

// linkCtx is what a sender keeps while a message crosses accounts.
type linkCtx struct {
	// depth counts the service crossings of the message being routed.
	depth uint8
	// deliverTo is the subject a server publish is routed by when it is
	// presented with another (Account.Deliver: a consumer's deliver
	// subject); nil when they are the same.
	deliverTo []byte
}

// subjectMap maps subjects from one account's space to another's: to a
// constant, unchanged, or by a transform.
type subjectMap struct {
	constant []byte             // every subject maps to this
	tr       *subject.Transform // nil with constant nil: unchanged
}

// apply maps a literal subject; nil when it does not map.
func (m *subjectMap) apply(subj []byte) []byte {
	switch {
	case m.constant != nil:
		return m.constant
	case m.tr == nil:
		return subj
	}
	out, ok := m.tr.Apply(string(subj))
	if !ok {
		return nil
	}
	return []byte(out)
}

// newStreamMap maps the exporter's subjects matching from to the
// importer's template to, as nats-server does: '*' tokens of to take the
// wildcards of from in order, $N tokens the N-th one.
func newStreamMap(from, to string) (subjectMap, error) {
	switch {
	case subject.IsLiteral(from):
		return subjectMap{constant: []byte(to)}, nil
	case to == from:
		return subjectMap{}, nil
	}
	tr, err := subject.NewTransform(from, numberWildcards(to))
	if err != nil {
		return subjectMap{}, fmt.Errorf("stream import %q to %q: %w", from, to, err)
	}
	return subjectMap{tr: tr}, nil
}

// numberWildcards turns the '*' tokens of a template into $1, $2, … in
// order, leaving $N tokens as they are.
func numberWildcards(tmpl string) string {
	toks := strings.Split(tmpl, ".")
	n := 0
	for i, t := range toks {
		if t == "*" {
			n++
			toks[i] = "$" + strconv.Itoa(n)
		}
	}
	return strings.Join(toks, ".")
}

// wildcardRef reads a $N token.
func wildcardRef(tok string) (int, bool) {
	if len(tok) < 2 || tok[0] != '$' {
		return 0, false
	}
	n, err := strconv.Atoi(tok[1:])
	return n, err == nil && n > 0
}

// newServiceMap maps the importer's local subjects to the exporter's
// subject to. local is a template: its '*' and $N tokens stand for the
// wildcards of to ('*' in order, $N the N-th). It returns the filter the
// importer's requests are matched by.
func newServiceMap(local, to string) (filter string, m subjectMap, err error) {
	ltoks := strings.Split(local, ".")
	refs := make([]int, 0, 4) // for each wildcard of the filter, which wildcard of to it carries
	plain := 0
	for i, t := range ltoks {
		if n, ok := wildcardRef(t); ok {
			refs = append(refs, n)
			ltoks[i] = "*"
		} else if t == "*" {
			plain++
			refs = append(refs, plain)
		}
	}
	filter = strings.Join(ltoks, ".")
	switch {
	case !subject.ValidFilterString(filter):
		return "", subjectMap{}, fmt.Errorf("service import local subject %q: %w", local, subject.ErrInvalidSubject)
	case subject.IsLiteral(to):
		return filter, subjectMap{constant: []byte(to)}, nil
	case filter == to:
		return filter, subjectMap{}, nil
	}
	dtoks := strings.Split(to, ".")
	wc := 0
	for i, t := range dtoks {
		if t != "*" {
			continue
		}
		wc++
		k := -1
		for j, r := range refs {
			if r == wc {
				k = j
				break
			}
		}
		if k < 0 {
			return "", subjectMap{}, fmt.Errorf("service import %q to %q: wildcard %d of the exported subject is not in the local subject: %w",
				local, to, wc, subject.ErrBadTransform)
		}
		dtoks[i] = "$" + strconv.Itoa(k+1)
	}
	tr, err := subject.NewTransform(filter, strings.Join(dtoks, "."))
	if err != nil {
		return "", subjectMap{}, fmt.Errorf("service import %q to %q: %w", local, to, err)
	}
	return filter, subjectMap{tr: tr}, nil
}

// streamLink is a stream import in force: a subscription in the exporter
// that delivers into the importer.
type streamLink struct {
	importer, exporter *Account
	from               string // the imported filter, in the exporter's space
	to                 string // the local subject (template), for logs
	m                  subjectMap
	sub                *subscription
}

func (l *streamLink) stream() bool { return true }

func (l *streamLink) forward(s *sender, subj, reply []byte, hdrLen int, msg []byte) {
	routeBy, present := subj, []byte(nil)
	if dt := s.links.deliverTo; dt != nil {
		// A consumer's delivery: route by the (mapped) deliver subject,
		// present the subject the message was stored under.
		routeBy, present = dt, subj
	}
	local := l.m.apply(routeBy)
	if local == nil {
		return
	}
	var r *subject.Result[*subscription]
	if oneShot(local) {
		r = l.importer.subs.MatchOnce(local)
	} else {
		r = l.importer.subs.Match(local)
	}
	if r.Empty() {
		return
	}
	if present == nil {
		present = local
	}
	saved := s.links
	s.links = linkCtx{depth: saved.depth}
	s.deliverLinked(r, false, present, reply, hdrLen, msg)
	s.links = saved
}

// serviceLink is a service import in force: a subscription in the
// importer that delivers requests into the exporter.
type serviceLink struct {
	importer, exporter *Account
	local              string // the filter requests are published on, in the importer
	to                 string // the exported subject
	m                  subjectMap
	respType           string        // jwt.ResponseType*
	ttl                time.Duration // how long a response route lives without a response
	sub                *subscription
}

func (l *serviceLink) stream() bool { return false }

func (l *serviceLink) forward(s *sender, subj, reply []byte, hdrLen int, msg []byte) {
	if s.links.depth >= maxLinkDepth {
		l.importer.srv.log.Debug("service import chain too deep, dropping request",
			"account", l.importer.name, "subject", string(subj), "exporter", l.exporter.name)
		return
	}
	routeBy := subj
	if dt := s.links.deliverTo; dt != nil {
		routeBy = dt
	}
	to := l.m.apply(routeBy)
	if to == nil {
		return
	}
	var nreply []byte
	var table *respTable
	var key string
	if len(reply) > 0 {
		if bytes.HasPrefix(reply, jsAckPrefix) {
			nreply = reply
		} else {
			table = l.exporter.responses()
			var ok bool
			if key, ok = table.add(l.importer, reply, l.respType, l.ttl, time.Now()); !ok {
				return // table full; add logged it
			}
			nreply = []byte(key)
		}
	}
	hdrLen, msg = withRequestInfo(s, l.importer, hdrLen, msg)

	var r *subject.Result[*subscription]
	if oneShot(to) {
		r = l.exporter.subs.MatchOnce(to)
	} else {
		r = l.exporter.subs.Match(to)
	}
	saved := s.links
	s.links = linkCtx{depth: saved.depth + 1}
	delivered := !r.Empty() && s.deliverLinked(r, true, to, nreply, hdrLen, msg)
	s.links = saved
	if delivered {
		return
	}
	if table != nil {
		table.remove(key)
	}
	if saved.depth == 0 && len(reply) > 0 {
		l.noResponders(s, subj, reply)
	}
}

// noResponders tells a requesting client nobody serves the import, when
// it asked for no-responders notices and the import was the only thing its
// request reached.
func (l *serviceLink) noResponders(s *sender, subj, reply []byte) {
	c := s.from
	if c == nil || c.acc != l.importer || !c.wantsNoResponders() {
		return
	}
	r := l.importer.subs.Match(subj)
	if len(r.Queues) > 0 || len(r.Plain) != 1 || r.Plain[0] != l.sub {
		return
	}
	c.sendNoResponders(reply)
}

// deliverLinked delivers a message that crossed into r's account: to
// every plain subscriber and one member of each queue group, ignoring
// echo (the publisher is in another account). Forwarders are skipped,
// except service imports and response routes when follow is set. It
// reports whether anything took the message.
func (s *sender) deliverLinked(r *subject.Result[*subscription], follow bool, subj, reply []byte, hdrLen int, msg []byte) bool {
	delivered := false
	mark := len(s.rt)
	for _, sub := range r.Plain {
		if sub.fwd != nil && (!follow || sub.fwd.stream()) {
			continue
		}
		s.deliver(sub, subj, reply, hdrLen, msg)
		delivered = true
	}
	for _, members := range r.Queues {
		m := pickQueueMember(members)
		if !follow && s.srv.cluster != nil {
			// Every node applies a stream import itself: only this
			// node's members are its to choose from.
			if m = pickLocalMember(members); m == nil {
				continue
			}
		}
		s.deliver(m, subj, reply, hdrLen, msg)
		delivered = true
	}
	if len(s.rt) > mark {
		s.flushRoutes(mark, subj, reply, hdrLen, msg)
	}
	return delivered
}

// withRequestInfo adds Nats-Request-Info (the requesting account and the
// client's round-trip time) to a request entering a service import,
// replacing any the publisher sent. A request that already crossed an
// import keeps the first account's.
func withRequestInfo(s *sender, importer *Account, hdrLen int, msg []byte) (int, []byte) {
	var hdr, body []byte
	if hdrLen >= 0 {
		hdr, body = msg[:hdrLen], msg[hdrLen:]
		if s.links.depth > 0 && headerLine(hdr, requestInfoHdr) >= 0 {
			return hdrLen, msg
		}
	} else {
		body = msg
	}
	var rtt time.Duration
	if c := s.from; c != nil && c.acc == importer {
		c.mu.Lock()
		rtt = c.mu.rtt
		c.mu.Unlock()
	}

	out := make([]byte, 0, len(hdr)+len(body)+len(requestInfoHdr)+len(importer.name)+48)
	if hdr == nil {
		out = append(out, "NATS/1.0\r\n"...)
	} else {
		for i, line := range bytes.Split(hdr, []byte("\r\n")) {
			if i > 0 && (len(line) == 0 || isHeaderLine(line, requestInfoHdr)) {
				continue
			}
			out = append(append(out, line...), '\r', '\n')
		}
	}
	out = append(out, requestInfoHdr+`: {"acc":"`...)
	out = append(out, importer.name...)
	out = append(out, '"')
	if rtt > 0 {
		out = strconv.AppendInt(append(out, `,"rtt":`...), int64(rtt), 10)
	}
	out = append(out, "}\r\n\r\n"...)
	n := len(out)
	return n, append(out, body...)
}

// headerLine finds the header line carrying key; -1 if there is none.
func headerLine(hdr []byte, key string) int {
	for i, line := range bytes.Split(hdr, []byte("\r\n")) {
		if i > 0 && isHeaderLine(line, key) {
			return i
		}
	}
	return -1
}

// isHeaderLine reports whether a header line is "key: …" (keys compare
// case-insensitively, as MIME headers do).
func isHeaderLine(line []byte, key string) bool {
	k, _, ok := bytes.Cut(line, []byte(":"))
	return ok && strings.EqualFold(string(bytes.TrimSpace(k)), key)
}

// respTTL is how long a response route waits for its next response: the
// export's response_threshold, or nats-server's default of two minutes.
func respTTL(e *jwt.Export) time.Duration {
	if e != nil && e.ResponseThreshold > 0 {
		return e.ResponseThreshold
	}
	return defaultRespTTL
}

// defaultRespTTL is nats-server's default service response threshold.
const defaultRespTTL = 2 * time.Minute
