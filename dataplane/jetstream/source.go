package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/subject"
)

// Mirrors and sources. While a stream is attached on the node that holds
// it (its R1 owner, or its partition's leader), each mirror or source has
// a sourcer: it creates an ephemeral, flow-controlled, heartbeating push
// consumer on the origin through the JS API (so imports carry it across
// accounts, and routes across nodes), and submits every message it
// delivers to the stream's applier as an ordinary propMsg carrying where it
// came from (sourcedMsg). The apply step stores it with the
// Nats-Stream-Source header and records the origin sequence as the
// source's progress in the same batch; a message at or below the progress
// is dropped there. On a gap in the consumer's delivery sequence, a stall
// (no heartbeat) or an error, the sourcer makes a new consumer starting
// after the progress. See docs/architecture.md, "Mirrors and sources".

const (
	// sourceHeartbeat is the origin consumer's idle heartbeat, and
	// sourceStall the silence after which the consumer is replaced.
	sourceHeartbeat = time.Second
	sourceStall     = 3 * sourceHeartbeat
	// sourceInactive lets an abandoned origin consumer go.
	sourceInactive = 10 * time.Second
	// sourceRetry is the least time between two consumer creates, and
	// sourceTimeout how long a create may take to be answered.
	sourceRetry   = 2 * time.Second
	sourceTimeout = 5 * time.Second
	// sourceRetryMax bounds the wait after failed creates: an origin
	// that stays missing costs one create per source every 2 minutes,
	// nats-server's bound, however many sources name it.
	sourceRetryMax = 2 * time.Minute
)

// sourceBackoff is the least time before the next consumer create after
// fails creates in a row failed: sourceRetry for the first two (a
// leader change on the origin heals within them), then doubling up to
// sourceRetryMax, with up to a tenth more at random so that many sources
// of one missing origin spread out.
func sourceBackoff(fails int) time.Duration {
	d := sourceRetry
	for i := 2; i < fails && d < sourceRetryMax; i++ {
		d *= 2
	}
	d = min(d, sourceRetryMax)
	if fails > 2 {
		d += rand.N(d/10 + 1)
	}
	return d
}

// sourceProgress is the last origin sequence a stream took from one
// source, and the identity of that origin (a hash of its creation time,
// as nats-server's; empty for mirrors, which do not track it).
type sourceProgress struct {
	seq   uint64
	ident string
}

// sourcedMsg is where a mirrored or sourced message came from.
type sourcedMsg struct {
	key    string // the source's index name: its progress record
	ident  string // the origin's identity
	oseq   uint64 // the origin's sequence
	ts     int64  // the origin's time (unix nanos), which a mirror keeps
	mirror bool
}

// sourcer reads one mirror or source of a stream.
type sourcer struct {
	s      *stream
	a      *jsAccount
	cfg    *api.StreamSource
	mirror bool
	key    string
	trs    []*subject.Transform // per filter, nil entries keep the subject
	filter []string
	hdrPfx string // "<origin> " of the Nats-Stream-Source header
	hdrSfx string // " <filters> <destinations> " before the subject
	stopCh chan struct{}
	kickCh chan struct{}
	done   sync.WaitGroup

	mu struct {
		sync.Mutex
		cname string // the consumer being read, "" while none
		ident string // the origin's identity, for sources
		dseq  uint64 // its last delivery sequence taken
		sseq  uint64 // the origin sequence of that delivery
		lag   uint64
		last  int64 // unix nanos of the last word from the origin, 0 if none
		err   *api.Error
		// ready is false between a consumer's create and its answer,
		// which carries the origin's identity the messages need: what
		// arrives meanwhile waits in early.
		ready    bool
		early    []earlyMsg
		inflight int    // submitted proposals not yet done
		fcReply  string // flow control to answer once inflight is 0
	}
}

// startSourcing starts the stream's sourcers and arranges for detach to
// stop them.
func (s *stream) startSourcing(a *jsAccount) {
	cfg := s.config()
	var list []*api.StreamSource
	mirror := cfg.Mirror != nil
	if mirror {
		list = []*api.StreamSource{cfg.Mirror}
	} else {
		list = cfg.Sources
	}
	if len(list) == 0 {
		return
	}
	srcs := make([]*sourcer, 0, len(list))
	for _, src := range list {
		srcs = append(srcs, newSourcer(s, a, src, mirror))
	}
	s.mu.Lock()
	s.mu.sourcers = srcs
	s.mu.Unlock()
	for _, sr := range srcs {
		sr.done.Add(1)
		go sr.run()
	}
	direct := mirror && cfg.MirrorDirect && cfg.Mirror.External == nil
	if direct {
		a.addDirectMirror(cfg.Mirror.Name, s)
	}
	s.unsubs = append(s.unsubs, func() {
		if direct {
			a.removeDirectMirror(cfg.Mirror.Name, s)
		}
		s.mu.Lock()
		s.mu.sourcers = nil
		s.mu.Unlock()
		for _, sr := range srcs {
			close(sr.stopCh)
		}
		for _, sr := range srcs {
			sr.done.Wait()
		}
	})
}

// addDirectMirror lets m answer direct gets on its origin's name while
// the origin is not here (removeDirectMirror ends it).
func (a *jsAccount) addDirectMirror(origin string, m *stream) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.directMirrors == nil {
		a.mu.directMirrors = map[string][]*stream{}
	}
	a.mu.directMirrors[origin] = append(a.mu.directMirrors[origin], m)
}

func (a *jsAccount) removeDirectMirror(origin string, m *stream) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.mu.directMirrors[origin]
	for i, s := range list {
		if s == m {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.mu.directMirrors, origin)
	} else {
		a.mu.directMirrors[origin] = list
	}
}

// directMirror is a mirror_direct mirror of origin, nil if none.
func (a *jsAccount) directMirror(origin string) *stream {
	a.mu.Lock()
	defer a.mu.Unlock()
	if list := a.mu.directMirrors[origin]; len(list) > 0 {
		return list[0]
	}
	return nil
}

func newSourcer(s *stream, a *jsAccount, src *api.StreamSource, mirror bool) *sourcer {
	sr := &sourcer{s: s, a: a, cfg: src, mirror: mirror, key: src.IndexName(),
		stopCh: make(chan struct{}), kickCh: make(chan struct{}, 1)}
	if src.FilterSubject != "" {
		sr.filter = []string{src.FilterSubject}
		sr.trs = []*subject.Transform{nil}
	}
	for _, tr := range src.SubjectTransforms {
		sr.filter = append(sr.filter, tr.Source)
		var t *subject.Transform
		if tr.Destination != "" {
			from := tr.Source
			if from == "" {
				from = ">"
			}
			t, _ = subject.NewTransform(from, tr.Destination)
		}
		sr.trs = append(sr.trs, t)
	}
	parts := strings.SplitN(sr.key, " ", 3)
	sr.hdrPfx = parts[0] + " "
	sr.hdrSfx = " " + parts[1] + " " + parts[2] + " "
	return sr
}

// run keeps a consumer on the origin until stopped.
func (sr *sourcer) run() {
	defer sr.done.Done()
	var lastTry time.Time
	fails := 0
	for {
		if wait := sourceBackoff(fails) - time.Since(lastTry); !lastTry.IsZero() && wait > 0 {
			select {
			case <-sr.stopCh:
				return
			case <-time.After(wait):
			}
		}
		lastTry = time.Now()
		unsub, cname := sr.connect()
		if unsub == nil {
			fails++
			select {
			case <-sr.stopCh:
				return
			default:
				continue
			}
		}
		fails = 0
		sr.watch()
		unsub()
		sr.deleteConsumer(cname)
		select {
		case <-sr.stopCh:
			return
		default:
		}
	}
}

// watch returns when the consumer must be replaced or the sourcer stops.
func (sr *sourcer) watch() {
	tick := time.NewTicker(sourceHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-sr.stopCh:
			return
		case <-sr.kickCh:
			return
		case <-tick.C:
			sr.mu.Lock()
			stalled := time.Since(time.Unix(0, sr.mu.last)) > sourceStall
			sr.mu.Unlock()
			if stalled {
				return
			}
		}
	}
}

func (sr *sourcer) kick() {
	select {
	case sr.kickCh <- struct{}{}:
	default:
	}
}

func (sr *sourcer) setErr(err *api.Error) {
	sr.mu.Lock()
	sr.mu.err = err
	sr.mu.Unlock()
}

// setupErr is the error a failed consumer setup leaves in stream info.
func (sr *sourcer) setupErr(err error) *api.Error {
	if sr.mirror {
		return api.NewMirrorConsumerSetupFailedError(err)
	}
	return api.NewSourceConsumerSetupFailedError(err)
}

// apiSubject is the origin's JS API subject for the request rest.
func (sr *sourcer) apiSubject(rest string) string {
	pfx := "$JS.API"
	if ext := sr.cfg.External; ext != nil && ext.APIPrefix != "" {
		pfx = strings.TrimSuffix(ext.APIPrefix, ".")
	}
	return pfx + "." + rest
}

// request sends one JS API request and waits for its answer's header
// and body.
func (sr *sourcer) request(subj string, hdr, body []byte) ([]byte, []byte, error) {
	reply := newInbox()
	ch := make(chan [2][]byte, 1)
	unsub, err := sr.a.acc.SubscribeInternal(reply, func(_, _, hdr, msg []byte) {
		select {
		case ch <- [2][]byte{bytes.Clone(hdr), bytes.Clone(msg)}:
		default:
		}
	})
	if err != nil {
		return nil, nil, err
	}
	defer unsub()
	sr.a.acc.Publish(subj, reply, hdr, body)
	t := time.NewTimer(sourceTimeout)
	defer t.Stop()
	select {
	case m := <-ch:
		return m[0], m[1], nil
	case <-t.C:
		return nil, nil, errors.New("timeout waiting for consumer create response")
	case <-sr.stopCh:
		return nil, nil, errors.New("stopped")
	}
}

// startPoint is where a new consumer starts: after the progress, or at
// the configured start the first time.
//
// It returns the origin identity the progress was made with ("" for none,
// or after the origin was found made again: reset).
func (sr *sourcer) startPoint(cc *api.ConsumerConfig, reset bool) string {
	s := sr.s
	s.mu.Lock()
	cur := s.mu.progress[sr.key]
	seq := cur.seq
	if sr.mirror {
		seq = max(seq, s.mu.state.LastSeq)
	}
	s.mu.Unlock()
	if reset {
		seq, cur.ident = 0, "" // the origin was made again: start over on the new one
	}
	switch {
	case seq > 0:
		cc.DeliverPolicy, cc.OptStartSeq = api.DeliverByStartSequence, seq+1
	case sr.cfg.OptStartSeq > 0:
		cc.DeliverPolicy, cc.OptStartSeq = api.DeliverByStartSequence, sr.cfg.OptStartSeq
	case sr.cfg.OptStartTime != nil:
		t := *sr.cfg.OptStartTime
		cc.DeliverPolicy, cc.OptStartTime = api.DeliverByStartTime, &t
	default:
		cc.DeliverPolicy = api.DeliverAll
	}
	return cur.ident
}

// connect creates a consumer on the origin and subscribes its deliveries;
// nil if that failed (the error is kept for stream info).
func (sr *sourcer) connect() (func(), string) {
	if sr.cfg.Consumer != nil {
		return sr.connectDurable()
	}
	kind := "S"
	if sr.mirror {
		kind = "M"
	}
	deliver := "$JS." + kind + "." + randomName() + randomName()
	if ext := sr.cfg.External; ext != nil && ext.DeliverPrefix != "" {
		deliver = strings.TrimSuffix(ext.DeliverPrefix, ".") + "." + kind + "." + randomName() + randomName()
	}
	cname := randomName()
	cc := api.ConsumerConfig{
		Name:              cname,
		DeliverSubject:    deliver,
		AckPolicy:         api.AckNone,
		AckWait:           22 * time.Hour,
		MaxDeliver:        1,
		Heartbeat:         sourceHeartbeat,
		FlowControl:       true,
		InactiveThreshold: sourceInactive,
		Direct:            true,
		Metadata:          map[string]string{},
	}
	if sr.mirror {
		cc.Metadata["_nats.mirror.stream"] = sr.s.name()
	} else {
		cc.Metadata["_nats.source.stream"] = sr.s.name()
	}
	cc.Metadata["_nats.source.acc"] = sr.a.acc.Name()
	switch {
	case len(sr.filter) == 1:
		cc.FilterSubject = sr.filter[0]
	case len(sr.filter) > 1:
		cc.FilterSubjects = sr.filter
	}
	for reset := false; ; reset = true {
		c := cc
		want := sr.startPoint(&c, reset)
		sr.begin(cname)
		var hdr []byte
		if want != "" && !sr.mirror {
			hdr = appendHeaderBlock(nil, "", api.HeaderStreamIdentity, want)
		}
		unsub, err := sr.a.acc.SubscribeInternal(deliver, sr.onMsg)
		if err != nil {
			sr.setErr(sr.setupErr(err))
			return nil, ""
		}
		body, _ := json.Marshal(api.ConsumerCreateRequest{Stream: sr.cfg.Name, Config: c})
		rhdr, msg, err := sr.request(sr.apiSubject("CONSUMER.CREATE."+sr.cfg.Name), hdr, body)
		var resp api.ConsumerInfoResponse
		if err == nil {
			err = json.Unmarshal(msg, &resp)
		}
		switch {
		case err != nil:
			unsub()
			sr.setErr(sr.setupErr(err))
			return nil, ""
		case resp.Error != nil && resp.Error.ErrCode == api.CodeConsumerStreamIdentityMismatch && !reset:
			unsub()
			continue
		case resp.Error != nil:
			unsub()
			sr.setErr(resp.Error)
			return nil, ""
		}
		sr.connected(rhdr)
		return unsub, cname
	}
}

// connectDurable reads through the durable consumer the configuration
// names (mirror.consumer / sources[].consumer), as nats-server does: the
// consumer is the user's, made on the origin beforehand with ack_policy
// flow_control; the sourcer only resets it, so it delivers again from
// just above its ack floor, and subscribes its deliver subject. The ack
// floor only moves when a flow control answer reports what is stored
// (answerFC), so it is never above the stored progress: after a restart
// nothing is missed, and what the reset delivers again up to the progress
// is dropped by the apply step, as after any reconnect. The consumer is
// never deleted here (the returned name is empty).
//
// The deliver subject is subscribed only once the reset is answered, so
// no delivery from before the reset (with the old delivery sequences)
// reaches this connection.
func (sr *sourcer) connectDurable() (func(), string) {
	d := sr.cfg.Consumer
	sr.begin(d.Name)
	sr.s.mu.Lock()
	want := sr.s.mu.progress[sr.key].ident
	sr.s.mu.Unlock()
	var hdr []byte
	if !sr.mirror {
		hdr = appendHeaderBlock(nil, "", api.HeaderStreamIdentity, want)
	}
	rhdr, msg, err := sr.request(sr.apiSubject("CONSUMER.RESET."+sr.cfg.Name+"."+d.Name), hdr, nil)
	var resp api.ConsumerResetResponse
	if err == nil {
		err = json.Unmarshal(msg, &resp)
	}
	switch {
	case err != nil:
		sr.setErr(sr.setupErr(fmt.Errorf("resetting durable consumer %q: %w", d.Name, err)))
		return nil, ""
	case resp.Error != nil:
		sr.setErr(resp.Error)
		return nil, ""
	case resp.ConsumerInfo == nil || resp.Config == nil:
		sr.setErr(sr.setupErr(fmt.Errorf("resetting durable consumer %q: invalid consumer reset response", d.Name)))
		return nil, ""
	case resp.Config.AckPolicy != api.AckFlowControl:
		if sr.mirror {
			sr.setErr(api.NewMirrorConsumerRequiresAckFlowControlError())
		} else {
			sr.setErr(api.NewSourceConsumerRequiresAckFlowControlError())
		}
		return nil, ""
	}
	unsub, err := sr.a.acc.SubscribeInternal(d.DeliverSubject, sr.onMsg)
	if err != nil {
		sr.setErr(sr.setupErr(fmt.Errorf("subscribing %q: %w", d.DeliverSubject, err)))
		return nil, ""
	}
	sr.connected(rhdr)
	return unsub, ""
}

// begin starts reading consumer cname: from its first delivery, holding
// deliveries until its setup is answered (connected), with no flow
// control answer owed from an earlier consumer.
func (sr *sourcer) begin(cname string) {
	sr.mu.Lock()
	sr.mu.cname, sr.mu.dseq, sr.mu.sseq, sr.mu.ready, sr.mu.early, sr.mu.fcReply = cname, 0, 0, false, nil, ""
	sr.mu.Unlock()
}

// connected records a consumer set up: the origin's identity from the
// answer's headers (sources track it), no error, heard from now; then
// it takes the deliveries that came before the answer.
func (sr *sourcer) connected(rhdr []byte) {
	sr.mu.Lock()
	if !sr.mirror {
		sr.mu.ident = string(headerValue(rhdr, api.HeaderStreamIdentity))
	}
	sr.mu.err = nil
	sr.mu.last = time.Now().UnixNano()
	sr.mu.Unlock()
	sr.drainEarly()
}

// answerFC answers a flow control request with the last delivery taken
// (Nats-Last-Consumer / Nats-Last-Stream), as nats-server's sources do;
// it is called only once everything delivered before the request is
// stored, so a flow_control consumer acknowledges exactly what is stored.
// With nothing taken yet the answer is bare.
func (sr *sourcer) answerFC(reply string) {
	sr.mu.Lock()
	dseq, sseq := sr.mu.dseq, sr.mu.sseq
	sr.mu.Unlock()
	var hdr []byte
	if sseq > 0 {
		hdr = appendHeaderBlock(nil, "", api.HeaderLastConsumer, strconv.FormatUint(dseq, 10),
			api.HeaderLastStream, strconv.FormatUint(sseq, 10))
	}
	sr.a.acc.Publish(reply, "", hdr, nil)
}

// deleteConsumer removes a replaced consumer from the origin, best effort
// (its inactivity threshold removes it otherwise).
func (sr *sourcer) deleteConsumer(cname string) {
	if cname == "" {
		return
	}
	sr.a.acc.Publish(sr.apiSubject("CONSUMER.DELETE."+sr.cfg.Name+"."+cname), "", nil, nil)
}

// earlyMsg is a delivery that came before its consumer's create answer.
type earlyMsg struct{ subj, reply, hdr, msg []byte }

// isStatus reports a status message (heartbeat, flow control).
func isStatus(hdr []byte) bool {
	return bytes.HasPrefix(hdr, []byte("NATS/1.0 100"))
}

// drainEarly handles, in order, what arrived before the create answer,
// then lets deliveries through.
func (sr *sourcer) drainEarly() {
	for {
		sr.mu.Lock()
		early := sr.mu.early
		sr.mu.early = nil
		if len(early) == 0 {
			sr.mu.ready = true
			sr.mu.Unlock()
			return
		}
		sr.mu.Unlock()
		for _, m := range early {
			sr.handle(m.subj, m.reply, m.hdr, m.msg)
		}
	}
}

// onMsg handles one delivery of the origin consumer. It runs on the
// delivering goroutine and must not block.
func (sr *sourcer) onMsg(subj, reply, hdr, msg []byte) {
	sr.mu.Lock()
	if !sr.mu.ready {
		sr.mu.early = append(sr.mu.early, earlyMsg{bytes.Clone(subj), bytes.Clone(reply), bytes.Clone(hdr), bytes.Clone(msg)})
		sr.mu.Unlock()
		return
	}
	sr.mu.Unlock()
	sr.handle(subj, reply, hdr, msg)
}

func (sr *sourcer) handle(subj, reply, hdr, msg []byte) {
	if isStatus(hdr) {
		sr.onStatus(reply, hdr)
		return
	}
	cname, dseq, sseq, ts, pending, ok := parseAckReply(string(reply))
	if !ok {
		return
	}
	sr.mu.Lock()
	if cname != sr.mu.cname {
		sr.mu.Unlock()
		return // an earlier consumer's
	}
	if dseq != sr.mu.dseq+1 {
		// A delivery went missing: start again after the progress.
		sr.mu.cname = ""
		sr.mu.Unlock()
		sr.kick()
		return
	}
	sr.mu.dseq, sr.mu.sseq = dseq, sseq
	ident := sr.mu.ident
	sr.mu.lag = pending
	sr.mu.last = time.Now().UnixNano()
	sr.mu.inflight++
	sr.mu.Unlock()

	p := &proposal{s: sr.s, kind: propMsg, acct: sr.a}
	p.src = &sourcedMsg{key: sr.key, ident: ident, oseq: sseq, ts: ts, mirror: sr.mirror}
	p.subject = sr.mapSubject(string(subj))
	h := hdr
	if !sr.mirror {
		h = dropHeaders(h, func(k string) bool {
			return k == api.HeaderStreamSource || strings.HasPrefix(k, "Nats-Expected-") || strings.HasPrefix(k, "Nats-Batch-")
		})
		v := sr.hdrPfx + strconv.FormatUint(sseq, 10) + sr.hdrSfx + string(subj)
		if ident != "" {
			v += " " + ident
		}
		h = setHeader(h, api.HeaderStreamSource, v)
	} else {
		h = bytes.Clone(h)
	}
	if len(h) > 0 {
		p.hdr = h
	}
	p.data = bytes.Clone(msg)
	p.done = sr.applied
	if !sr.s.ap.submit(p) {
		sr.applied(p, sr.s.ap.closedResult())
	}
}

// applied runs once a submitted message is durable or failed.
//
// A message is taken once it is durable, or refused by the apply step
// (a limit: skipped), which moves the source's progress past it in the
// same batch. Any other outcome (never appended because the partition's
// leadership moved, fate unknown, a failed commit) leaves it to be read
// again, even where the apply step already moved the progress in memory
// (a partition's entry applied on its leader, then lost): the consumer
// is replaced, and until then no flow control answer is given, because
// it would name this message. Invariant: a flow control answer names
// only deliveries the stream took, so a flow_control durable's ack floor
// never passes a message the stream does not hold, and the reset that
// replaces the consumer delivers it again.
func (sr *sourcer) applied(_ *proposal, r result) {
	failed := r.err != nil && !r.skipped
	sr.mu.Lock()
	sr.mu.inflight--
	if failed {
		sr.mu.cname = ""
	}
	var fc string
	if sr.mu.inflight == 0 && sr.mu.cname != "" {
		fc, sr.mu.fcReply = sr.mu.fcReply, ""
	}
	sr.mu.Unlock()
	if fc != "" {
		sr.answerFC(fc)
	}
	if failed {
		sr.kick()
	}
}

// onStatus answers flow control once what came before it is stored, and
// checks each heartbeat against what was taken.
func (sr *sourcer) onStatus(reply, hdr []byte) {
	sr.mu.Lock()
	sr.mu.last = time.Now().UnixNano()
	if sr.mu.cname == "" {
		// Being replaced after a gap or a failed take: no answer (see
		// applied).
		sr.mu.Unlock()
		return
	}
	if len(reply) > 0 {
		if sr.mu.inflight > 0 {
			sr.mu.fcReply = string(reply)
			sr.mu.Unlock()
			return
		}
		sr.mu.Unlock()
		sr.answerFC(string(reply))
		return
	}
	gap := false
	if v := headerValue(hdr, api.HeaderLastConsumer); len(v) > 0 {
		if n, err := strconv.ParseUint(string(v), 10, 64); err == nil && n != sr.mu.dseq {
			gap = true
			sr.mu.cname = ""
		}
	}
	stalled := string(headerValue(hdr, api.HeaderConsumerStalled))
	if stalled != "" && sr.mu.inflight > 0 {
		sr.mu.fcReply, stalled = stalled, ""
	}
	sr.mu.Unlock()
	if gap {
		sr.kick()
	}
	if stalled != "" {
		sr.answerFC(stalled)
	}
}

// mapSubject applies the source's subject transforms.
func (sr *sourcer) mapSubject(subj string) string {
	for i, f := range sr.filter {
		if f != "" && f != ">" && !subject.Matches(f, subj) {
			continue
		}
		if t := sr.trs[i]; t != nil {
			if out, ok := t.Apply(subj); ok {
				return out
			}
		}
		return subj
	}
	return subj
}

// parseAckReply reads $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
// (and the longer form with domain and account hash).
func parseAckReply(reply string) (cname string, dseq, sseq uint64, ts int64, pending uint64, ok bool) {
	toks := strings.Split(reply, ".")
	if len(toks) < 9 || toks[0] != "$JS" || toks[1] != "ACK" {
		return "", 0, 0, 0, 0, false
	}
	off := 2
	if len(toks) >= 11 {
		off = 4
	}
	if len(toks) < off+7 {
		return "", 0, 0, 0, 0, false
	}
	cname = toks[off+1]
	var e1, e2, e3, e4 error
	sseq, e1 = strconv.ParseUint(toks[off+3], 10, 64)
	dseq, e2 = strconv.ParseUint(toks[off+4], 10, 64)
	ts, e3 = strconv.ParseInt(toks[off+5], 10, 64)
	pending, e4 = strconv.ParseUint(toks[off+6], 10, 64)
	return cname, dseq, sseq, ts, pending, errors.Join(e1, e2, e3, e4) == nil
}

// sourceInfos are the stream info's mirror or sources entries.
func (s *stream) sourceInfos() []*api.StreamSourceInfo {
	s.mu.Lock()
	srcs := s.mu.sourcers
	s.mu.Unlock()
	out := make([]*api.StreamSourceInfo, 0, len(srcs))
	for _, sr := range srcs {
		out = append(out, sr.info())
	}
	return out
}

func (sr *sourcer) info() *api.StreamSourceInfo {
	si := &api.StreamSourceInfo{Name: sr.cfg.Name, FilterSubject: sr.cfg.FilterSubject, Active: -1}
	si.SubjectTransforms = append(si.SubjectTransforms, sr.cfg.SubjectTransforms...)
	if ext := sr.cfg.External; ext != nil {
		e := *ext
		si.External = &e
	}
	sr.mu.Lock()
	si.Lag, si.Error = sr.mu.lag, sr.mu.err
	if sr.mu.last != 0 {
		si.Active = time.Since(time.Unix(0, sr.mu.last))
	}
	ident := sr.mu.ident
	sr.mu.Unlock()
	if !sr.mirror {
		// A source reports the origin sequence its stored progress
		// reached, for the origin it reads now.
		sr.s.mu.Lock()
		p := sr.s.mu.progress[sr.key]
		sr.s.mu.Unlock()
		if p.ident == "" || p.ident == ident {
			si.Seq = p.seq
		}
	}
	return si
}
