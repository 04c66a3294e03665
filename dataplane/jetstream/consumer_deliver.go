package jetstream

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// persistEvery bounds how often a durable consumer's state is written.
// A crash loses at most this much ack progress, which at-least-once
// delivery covers: those messages are delivered again.
const persistEvery = 100 * time.Millisecond

// fcThreshold is how many bytes a flow-controlled push consumer sends
// between flow control requests.
const fcThreshold = 256 << 10

// A delivery pass takes at most passMsgs messages or passBytes bytes
// (plus the one message that crosses the line) under c.mu before it lets
// go, sends them, and goes again: the stream's apply path, acks and API
// calls wait for c.mu at most one batch, and a backlog of large messages
// is never held in memory whole. Redelivery, max_ack_pending, flow
// control and pull request accounting are all kept under c.mu, so a
// pass may stop anywhere and the next one continues in order.
const (
	passMsgs  = 256
	passBytes = 1 << 20
)

// passReadBytes bounds the message bytes one pass reads from the store
// looking for matches (a filter that matches few of many large messages
// would otherwise read the whole backlog under c.mu); aheadBytes bounds
// what the read-ahead buffer holds.
const (
	passReadBytes = 4 * passBytes
	aheadBytes    = passBytes
)

// passBudget counts what one delivery pass has taken and read.
type passBudget struct {
	msgs, bytes int // delivered
	read        int // message bytes read by read-ahead scans
}

func (p *passBudget) full() bool {
	return p.msgs >= passMsgs || p.bytes >= passBytes || p.read >= passReadBytes
}

// outMsg is a message the delivery loop publishes once it drops c.mu:
// routed by to (a pull request's inbox, a deliver subject) and presented
// as subject; subject empty means to itself (status messages).
type outMsg struct {
	to, subject, reply string
	route              Route // to to, when the pass had one (nil: match to)
	hdr, data          []byte
}

// Status headers of pull replies and push control messages.
var (
	hdrNoMessages      = []byte("NATS/1.0 404 No Messages\r\n\r\n")
	hdrConsumerDeleted = []byte("NATS/1.0 409 Consumer Deleted\r\n\r\n")
	hdrMaxWaiting      = []byte("NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n")
	hdrFlowControl     = []byte("NATS/1.0 100 FlowControl Request\r\n\r\n")
)

func statusWithPending(status string, msgs, bytes int) []byte {
	return appendHeaderBlock(nil, status, api.HeaderPendingMessages, strconv.Itoa(msgs),
		api.HeaderPendingBytes, strconv.Itoa(bytes))
}

// run is the consumer's delivery loop.
func (c *consumer) run() {
	defer close(c.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := c.deliver()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(c.now()), 0))
		}
		select {
		case <-c.kick:
		case <-timer.C:
		case <-c.quit:
			return
		}
	}
}

// deliver does everything due now and returns when to look again.
func (c *consumer) deliver() time.Time {
	op := outPool.Get().(*[]outMsg)
	out := (*op)[:0]
	c.mu.Lock()
	now := c.now()
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	c.expireWaitingLocked(now, &out, consider)
	c.pinExpiryLocked(now, &out, consider)
	c.checkPendingLocked(now, consider)
	cfg := c.mu.cfg
	paused := cfg.PauseUntil != nil && cfg.PauseUntil.After(now)
	resumed := c.pauseEndedLocked(now)
	if paused {
		consider(*cfg.PauseUntil)
	} else {
		at, more := c.deliverLocked(now, &out)
		consider(at)
		if c.mu.nextDue > 0 {
			// What this pass delivered is due again after its ack wait
			// (or backoff step): the loop must wake then, whether or not
			// anything else happens meanwhile.
			consider(time.Unix(0, c.mu.nextDue))
		}
		if more {
			// The pass is full: send it, then come straight back.
			c.wake()
		}
		if c.awaitingInterestLocked() {
			consider(now.Add(interestPoll))
		}
	}
	c.heartbeatsLocked(now, &out, consider)
	remove := c.inactiveLocked(now, consider)
	persist := c.mu.dirty && !c.mu.persisting && c.s.keepsConsumer(c.mu.cfg)
	if persist && now.Sub(c.mu.persisted) < persistEvery {
		// Coalesce: a busy consumer writes its state a few times a
		// second, not once per batch.
		consider(c.mu.persisted.Add(persistEvery))
		persist = false
	}
	if persist {
		c.mu.persisting, c.mu.persisted = true, now
	}
	c.mu.Unlock()

	c.send(out)
	if clear(out); cap(out) <= 4*readAhead {
		*op = out[:0]
		outPool.Put(op)
	}
	if resumed != nil {
		c.a.consumerAdvisory("PAUSE", c, map[string]any{"type": "io.nats.jetstream.advisory.v1.consumer_pause",
			"paused": false, "pause_until": resumed.UTC()})
	}
	if persist {
		c.persist()
	}
	if remove {
		go c.a.deleteConsumer(c, "inactive")
	}
	return next
}

// pauseEndedLocked watches the pause deadline: while paused it notes the
// deadline, and once the deadline passes it returns it (once), for the
// "not paused" advisory nats-server sends then. A pause lifted through
// the API, or one whose deadline had passed before this consumer saw
// it, is not announced here.
func (c *consumer) pauseEndedLocked(now time.Time) *time.Time {
	p := c.mu.cfg.PauseUntil
	switch {
	case p == nil:
		c.mu.pauseWatch = time.Time{}
	case p.After(now):
		c.mu.pauseWatch = *p
	case !c.mu.pauseWatch.IsZero() && c.mu.pauseWatch.Equal(*p):
		c.mu.pauseWatch = time.Time{}
		return p
	}
	return nil
}

// interestPoll is how often a push consumer with messages to deliver but
// nobody subscribed to its deliver subject looks again. Client
// subscriptions wake it at once (WatchInterest); this only covers interest
// that arrives another way.
const interestPoll = time.Second

// awaitingInterestLocked reports whether a push consumer has work but no
// subscriber to hand it to.
func (c *consumer) awaitingInterestLocked() bool {
	cfg := c.mu.cfg
	if cfg.DeliverSubject == "" || c.mu.fcPending != "" {
		return false
	}
	if c.numPending() == 0 && len(c.mu.rdq) == 0 && len(c.mu.lps) == 0 {
		return false
	}
	return !c.a.acc.HasInterest(cfg.DeliverSubject)
}

// target is where the next message goes: the deliver subject of a push
// consumer with interest, or the first waiting pull request; with the
// route that delivers there.
func (c *consumer) targetLocked() (string, Route, *pullRequest) {
	cfg := c.mu.cfg
	if cfg.DeliverSubject != "" {
		rt := c.pushRouteLocked(cfg.DeliverSubject)
		if c.mu.fcPending != "" || !rt.HasInterest() {
			return "", nil, nil
		}
		return cfg.DeliverSubject, rt, nil
	}
	if len(c.mu.waiting) == 0 {
		return "", nil, nil
	}
	r := c.pickRequestLocked(c.now())
	if r == nil {
		return "", nil, nil
	}
	return r.reply, c.requestRouteLocked(r), r
}

// pushRouteLocked is the route to a push consumer's deliver subject,
// made again when the subject changes.
func (c *consumer) pushRouteLocked(subj string) Route {
	if c.mu.push.route == nil || c.mu.push.subject != subj {
		c.mu.push.subject, c.mu.push.route = subj, c.a.acc.Route(subj)
	}
	return c.mu.push.route
}

// requestRouteLocked is the route to a pull request's reply subject,
// made when the request first gets a message.
func (c *consumer) requestRouteLocked(r *pullRequest) Route {
	if r.route == nil {
		r.route = c.a.acc.Route(r.reply)
	}
	return r.route
}

// deliverLocked hands out messages while a target and the limits allow;
// it returns when pacing (replay original, rate limit) wants it back, and
// more once the pass holds passMsgs messages or passBytes bytes.
func (c *consumer) deliverLocked(now time.Time, out *[]outMsg) (at time.Time, more bool) {
	cfg := c.mu.cfg
	var pass passBudget
	for {
		if pass.full() {
			return time.Time{}, true
		}
		target, route, req := c.targetLocked()
		if target == "" {
			return time.Time{}, false
		}
		// At max_ack_pending only redeliveries go out: they do not add
		// to what is pending.
		atMax := cfg.AckPolicy != api.AckNone && cfg.MaxAckPending > 0 && len(c.mu.pending) >= cfg.MaxAckPending
		if atMax && len(c.mu.rdq) == 0 {
			return time.Time{}, false
		}
		m, redelivery, ok, paused := c.peekLocked(&pass)
		if paused {
			// Read as much as a pass may without finding a match: the
			// next pass goes on (a no_wait request has not seen the end).
			return time.Time{}, true
		}
		if !ok {
			c.endNoWaitLocked(out)
			return time.Time{}, false
		}
		if atMax && !redelivery {
			return time.Time{}, false
		}
		if req != nil && !route.HasInterest() {
			// The requester went away (nobody subscribes to its reply
			// any more): the request is dropped, not fed, as on
			// nats-server; only now, with a message for it, so one
			// whose client is reconnecting survives passes that owe it
			// nothing.
			c.dropRequestLocked(req)
			continue
		}
		if m.Cold {
			if h := c.mu.coldMsg; h.Seq == m.Seq && !h.Cold {
				m = h
			} else {
				if !c.fetchColdLocked(m) {
					return now.Add(coldRetry), false
				}
				continue // the state may have moved while mu was released
			}
		}
		dc := uint64(1)
		if p := c.mu.pending[m.Seq]; p != nil {
			dc = p.dc + 1
		}
		// num_pending in the ack subject counts this message as taken.
		left := c.numPending()
		if !redelivery && left > 0 {
			left--
		}
		reply := c.ackSubject(dc, m.Seq, c.mu.dseq+1, m.Time, left)
		hdr, data := m.Header, m.Data
		if req != nil && c.mu.pinID != "" {
			hdr = addHeader(hdr, api.HeaderPinID, c.mu.pinID)
			c.mu.pinnedAt = now
		}
		if cfg.HeadersOnly {
			hdr = addHeader(hdr, api.HeaderMsgSize, strconv.Itoa(len(m.Data)))
			data = nil
		}
		// A delivery's size counts subject, ack reply, headers and data,
		// as nats-server and nats.go count it against max_bytes.
		size := len(m.Subject) + len(reply) + len(hdr) + len(data)
		if at := c.paceLocked(now, m.Time, size); !at.IsZero() {
			return at, false
		}
		if req != nil && req.maxBytes > 0 && req.b+size > req.maxBytes {
			// The message does not fit what is left of this request.
			*out = append(*out, outMsg{to: req.reply,
				hdr: statusWithPending("409 Message Size Exceeds MaxBytes", req.batch-req.n, req.maxBytes-req.b)})
			c.dropRequestLocked(req)
			continue
		}
		c.takeLocked(m.Seq, redelivery)
		c.mu.replayTs, c.mu.replayAt = m.Time, now
		c.mu.rateBytes += size
		c.mu.dseq++
		if cfg.AckPolicy == api.AckNone {
			c.mu.ackC, c.mu.ackS = c.mu.dseq, max(c.mu.ackS, m.Seq)
		} else {
			c.addPendingLocked(m.Seq, &pendingMsg{cseq: c.mu.dseq, ts: now.UnixNano(), dc: dc,
				due: unixNanos(now.Add(c.ackWaitLocked(dc)))})
		}
		c.mu.delivered = max(c.mu.delivered, m.Seq)
		c.mu.lastDel = now
		c.mu.dirty = true
		*out = append(*out, outMsg{to: target, route: route, subject: m.Subject, reply: reply, hdr: hdr, data: data})
		pass.msgs++
		pass.bytes += size
		if req != nil {
			req.n++
			req.b += size
			req.lastHB = now // a delivery is a sign of life: the next heartbeat waits
			switch {
			case req.n >= req.batch:
				if req.maxBytes > 0 && req.b < req.maxBytes {
					// Done by count with bytes to spare: nats-server says so.
					*out = append(*out, outMsg{to: req.reply, hdr: statusWithPending("409 Batch Completed", 0, req.maxBytes-req.b)})
				}
				c.dropRequestLocked(req)
			case req.maxBytes > 0 && req.b >= req.maxBytes:
				c.dropRequestLocked(req)
			}
		} else if cfg.FlowControl {
			c.mu.fcBytes += size
			// A flow_control consumer also asks once it reaches
			// max_ack_pending: only the answer can acknowledge, so
			// without it delivery would stop for good.
			fcAtMax := cfg.AckPolicy == api.AckFlowControl && cfg.MaxAckPending > 0 && len(c.mu.pending) >= cfg.MaxAckPending
			if c.mu.fcBytes >= fcThreshold || fcAtMax {
				c.requestFlowControlLocked(out)
			}
		}
	}
}

// requestFlowControlLocked sends a flow control request to the deliver
// subject; delivery waits for its answer.
func (c *consumer) requestFlowControlLocked(out *[]outMsg) {
	c.mu.fcBytes = 0
	c.mu.fcPending = c.fcPrefix + strconv.FormatUint(c.mu.dseq, 10)
	*out = append(*out, outMsg{to: c.mu.cfg.DeliverSubject, reply: c.mu.fcPending, hdr: hdrFlowControl})
}

// peekLocked finds the next message to deliver without taking it:
// redeliveries first, then last-per-subject ones owed, then new ones.
// paused says the pass read all it may before finding one.
func (c *consumer) peekLocked(pass *passBudget) (m store.Message, redelivery, ok, paused bool) {
	for len(c.mu.rdq) > 0 {
		seq := c.mu.rdq[0]
		m, err := c.s.ap.st.LoadMsg(c.s.id, seq)
		if err == nil {
			return m, true, true, false
		}
		// Gone (limits, purge): nothing left to redeliver.
		c.mu.rdq = c.mu.rdq[1:]
		c.delPendingLocked(seq)
		c.mu.dirty = true
		c.advanceAckFloorLocked()
	}
	for len(c.mu.lps) > 0 {
		// The sequences came from the subject index when the consumer
		// was made; one that no longer holds a message on the
		// consumer's subjects is owed nothing.
		m, err := c.s.ap.st.LoadMsg(c.s.id, c.mu.lps[0])
		if err == nil && c.matches(m.Subject) {
			return m, false, true, false
		}
		c.mu.lps = c.mu.lps[1:]
		c.npend.Add(-1)
	}
	durable := c.s.durable.Load()
	if c.mu.sseq > durable {
		return store.Message{}, false, false, false
	}
	if f := c.mu.filters; len(f) == 1 && subject.IsLiteral(f[0]) {
		// One literal subject: the subject index finds it directly.
		m, err := c.s.ap.st.NextMsg(c.s.id, c.mu.sseq, f[0])
		if err != nil || m.Seq > durable {
			c.setSSeqLocked(durable + 1)
			return store.Message{}, false, false, false
		}
		return m, false, true, false
	}
	m, ok, paused = c.readAheadLocked(durable, pass)
	return m, false, ok, paused
}

// coldRetry is how soon a consumer tries again after a cold read failed
// (the object store is slow or down).
const coldRetry = 500 * time.Millisecond

// fetchColdLocked reads a cold message's body, with c.mu released while
// it waits: the apply path takes consumer locks under its stream's lock,
// and must never wait on the object store. A message at the head of the
// read-ahead buffer brings the cold run behind it (up to passBytes of
// bodies) in the same round, so a replay takes the lock twice per run,
// not per message; any other lands in c.mu.coldMsg.
func (c *consumer) fetchColdLocked(m store.Message) bool {
	var run []store.Message
	if len(c.mu.ahead) > 0 && c.mu.ahead[0].Seq == m.Seq {
		run = coldRun(c.mu.ahead, passBytes)
	} else {
		run = []store.Message{m}
	}
	c.mu.Unlock()
	n, err := c.s.hydrateRun(context.Background(), run)
	c.mu.Lock()
	if n > 0 {
		c.mu.ahead = fillColdRun(c.mu.ahead, run[:n])
		c.mu.coldMsg = run[0]
	}
	if err != nil && n == 0 {
		c.s.e.log.Warn("jetstream: cold read for delivery failed; retrying", "consumer", c.name, "seq", m.Seq, "err", err)
		return false
	}
	return true
}

// aheadPool holds read-ahead lists, emptied, the same way as outPool.
var aheadPool = sync.Pool{New: func() any { return new([]store.Message) }}

// newAhead returns an empty read-ahead list with room for size.
func newAhead(size int) []store.Message {
	p := aheadPool.Get().(*[]store.Message)
	if cap(*p) >= size {
		return (*p)[:0]
	}
	return make([]store.Message, 0, size)
}

// recycleAheadLocked empties the read-ahead buffer, returning its list
// to the pool; the list holds no message once it is there.
func (c *consumer) recycleAheadLocked() {
	if a := c.mu.aheadArr; a != nil {
		a = a[:cap(a)]
		clear(a)
		a = a[:0]
		aheadPool.Put(&a)
	}
	c.mu.ahead, c.mu.aheadArr = nil, nil
}

// outPool holds delivery passes' lists, emptied: shared by every
// consumer, so a busy one fills a list it had before without regrowing
// it, and an idle one holds none.
var outPool = sync.Pool{New: func() any { return new([]outMsg) }}

// readAhead is how many stream sequences one scan covers.
const readAhead = 512

// aheadChunk is the allocation read-ahead copies bodies into, several
// to a chunk: one allocation per message was most of what a busy
// consumer of small messages gave the collector. A chunk lives until
// the last message in it is delivered, so it stays small.
const aheadChunk = 16 << 10

// errAheadFull ends a read-ahead scan that holds aheadBytes or read
// passReadBytes.
var errAheadFull = errors.New("read-ahead full")

// readAheadLocked returns the next matching message from a buffer filled
// by sequential scans, so a busy consumer reads the store in runs instead
// of one lookup per message; paused says a long run without a match used
// up what the pass may read. A message deleted after it was read ahead
// may still be delivered once; that is within at-least-once delivery.
func (c *consumer) readAheadLocked(durable uint64, pass *passBudget) (m store.Message, ok, paused bool) {
	for len(c.mu.ahead) > 0 && c.mu.ahead[0].Seq < c.mu.sseq {
		c.mu.ahead[0] = store.Message{}
		c.mu.ahead = c.mu.ahead[1:]
	}
	for scans := 0; len(c.mu.ahead) == 0; scans++ {
		// Drained: the list goes back to the pool now, so a consumer
		// waiting for new messages holds none.
		c.recycleAheadLocked()
		from := max(c.mu.sseq, c.mu.aheadTo)
		if from > durable {
			return store.Message{}, false, false
		}
		if scans == 16 || pass.read >= passReadBytes {
			return store.Message{}, false, true
		}
		end := min(durable+1, from+readAhead)
		// One list per run, sized for the run when every message may
		// match, so filling it never regrows it; bodies share chunks
		// (see aheadChunk).
		size := int(end - from)
		if len(c.mu.filters) > 0 {
			size = min(size, 32)
		}
		var chunk []byte
		held := 0
		err := c.s.ap.st.ScanMsgs(c.s.id, from, end, func(m *store.Message) error {
			pass.read += len(m.Header) + len(m.Data)
			if !c.matches(m.Subject) {
				if pass.read >= passReadBytes {
					end = m.Seq + 1
					return errAheadFull
				}
				return nil
			}
			// The scan's slices are reused: copy headers and data out.
			need := len(m.Header) + len(m.Data)
			if cap(chunk)-len(chunk) < need {
				// Room for as many more of this size as the run may
				// hold, up to a chunk: a consumer at the stream's tail
				// reading one message at a time allocates just that.
				chunk = make([]byte, 0, max(need, min(aheadChunk, need*int(end-m.Seq))))
			}
			at := len(chunk)
			chunk = append(append(chunk, m.Header...), m.Data...)
			buf := chunk[at:len(chunk):len(chunk)]
			n := len(m.Header)
			cp := store.Message{Seq: m.Seq, Subject: m.Subject, Data: buf[n:], Time: m.Time, TTL: m.TTL,
				Cold: m.Cold, HdrLen: m.HdrLen, DataLen: m.DataLen}
			if n > 0 {
				cp.Header = buf[:n:n]
			}
			if c.mu.ahead == nil {
				c.mu.ahead = newAhead(size)
				c.mu.aheadArr = c.mu.ahead
			}
			c.mu.ahead = append(c.mu.ahead, cp)
			if held += len(buf); held >= aheadBytes {
				// Large messages: the run ends here, the rest is read
				// when these are gone.
				end = m.Seq + 1
				return errAheadFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errAheadFull) {
			return store.Message{}, false, false
		}
		c.mu.aheadTo = end
		if len(c.mu.ahead) == 0 {
			c.setSSeqLocked(end)
		}
	}
	return c.mu.ahead[0], true, false
}

// takeLocked consumes what peekLocked returned.
func (c *consumer) takeLocked(seq uint64, redelivery bool) {
	switch {
	case redelivery:
		c.mu.rdq = c.mu.rdq[1:]
	case len(c.mu.lps) > 0 && c.mu.lps[0] == seq:
		c.mu.lps = c.mu.lps[1:]
		c.npend.Add(-1)
	default:
		c.setSSeqLocked(seq + 1)
		c.npend.Add(-1)
	}
}

// dropRequestLocked removes a waiting request.
func (c *consumer) dropRequestLocked(r *pullRequest) {
	if i := slices.Index(c.mu.waiting, r); i >= 0 {
		c.dropWaitingLocked(i)
	}
}

// dropWaitingLocked removes waiting request i.
func (c *consumer) dropWaitingLocked(i int) {
	copy(c.mu.waiting[i:], c.mu.waiting[i+1:])
	c.mu.waiting[len(c.mu.waiting)-1] = nil
	c.mu.waiting = c.mu.waiting[:len(c.mu.waiting)-1]
}

// endNoWaitLocked ends no_wait requests once nothing more is available.
func (c *consumer) endNoWaitLocked(out *[]outMsg) {
	kept := c.mu.waiting[:0]
	for _, r := range c.mu.waiting {
		// With an expiry, no_wait waits for a first message, then ends
		// at the end of the stream like a plain no_wait.
		if r.noWait && (r.expires.IsZero() || r.n > 0) {
			*out = append(*out, outMsg{to: r.reply, hdr: hdrNoMessages})
			continue
		}
		kept = append(kept, r)
	}
	clear(c.mu.waiting[len(kept):])
	c.mu.waiting = kept
}

// expireWaitingLocked answers pull requests whose time is up with 408.
//
// A request whose requester is gone (nobody subscribes to its reply) is
// dropped only when something is owed to it: a message (targetLocked),
// or a heartbeat. Passes made for other reasons leave it waiting, so a
// request outlives its client's reconnect, as on nats-server: the client
// subscribes to the same reply subject again on its new connection.
func (c *consumer) expireWaitingLocked(now time.Time, out *[]outMsg, consider func(time.Time)) {
	kept := c.mu.waiting[:0]
	for _, r := range c.mu.waiting {
		if !r.expires.IsZero() && !now.Before(r.expires) {
			*out = append(*out, outMsg{to: r.reply, hdr: statusWithPending("408 Request Timeout", r.batch-r.n, max(r.maxBytes-r.b, 0))})
			continue
		}
		if r.heartbeat > 0 && now.Sub(r.lastHB) >= r.heartbeat && !c.a.acc.HasInterest(r.reply) {
			continue // the requester went away
		}
		consider(r.expires)
		kept = append(kept, r)
	}
	clear(c.mu.waiting[len(kept):])
	c.mu.waiting = kept
}

// checkPendingLocked queues deliveries whose ack wait passed for
// redelivery, and gives up on those at max_deliver.
func (c *consumer) checkPendingLocked(now time.Time, consider func(time.Time)) {
	if len(c.mu.pending) == 0 {
		return
	}
	nowNs := now.UnixNano()
	if c.mu.nextDue > nowNs {
		consider(time.Unix(0, c.mu.nextDue))
		return
	}
	c.mu.nextDue = 0
	inRdq := make(map[uint64]bool, len(c.mu.rdq))
	for _, seq := range c.mu.rdq {
		inRdq[seq] = true
	}
	var due []uint64
	for seq, p := range c.mu.pending {
		if inRdq[seq] {
			continue
		}
		if p.due > nowNs {
			consider(time.Unix(0, p.due))
			c.noteDueLocked(p.due)
			continue
		}
		if md := c.mu.cfg.MaxDeliver; md > 0 && p.dc >= uint64(md) {
			c.delPendingLocked(seq)
			c.mu.maxed = append(c.mu.maxed, seq)
			c.mu.dirty = true
			c.maxDeliveriesAdvisory(seq, p.dc)
			continue
		}
		due = append(due, seq)
	}
	if len(due) > 0 {
		sortSeqs(due)
		c.mu.rdq = append(c.mu.rdq, due...)
	}
	c.advanceAckFloorLocked()
}

// heartbeatsLocked sends idle heartbeats to push consumers and to pull
// requests that asked for them.
func (c *consumer) heartbeatsLocked(now time.Time, out *[]outMsg, consider func(time.Time)) {
	hbHdr := func() []byte {
		h := appendHeaderBlock(nil, "100 Idle Heartbeat",
			api.HeaderLastConsumer, strconv.FormatUint(c.mu.dseq, 10),
			api.HeaderLastStream, strconv.FormatUint(max(c.mu.sseq, 1)-1, 10)) // the scan cursor, as nats-server reports it
		if c.mu.fcPending != "" {
			h = append(h[:len(h)-2], api.HeaderConsumerStalled+": "+c.mu.fcPending+"\r\n\r\n"...)
		}
		return h
	}
	cfg := c.mu.cfg
	if hb := cfg.Heartbeat; hb > 0 && cfg.DeliverSubject != "" {
		last := c.mu.lastDel
		if c.mu.lastHB.After(last) {
			last = c.mu.lastHB
		}
		if now.Sub(last) >= hb && c.a.acc.HasInterest(cfg.DeliverSubject) {
			*out = append(*out, outMsg{to: cfg.DeliverSubject, reply: c.mu.fcPending, hdr: hbHdr()})
			c.mu.lastHB, last = now, now
			if cfg.AckPolicy == api.AckFlowControl && len(c.mu.pending) > 0 && c.mu.fcPending == "" {
				// Idle with deliveries unacknowledged: ask, so the
				// answer acknowledges them (nats-server does the same
				// at each heartbeat).
				c.requestFlowControlLocked(out)
			}
		}
		consider(last.Add(hb))
	}
	for _, r := range c.mu.waiting {
		if r.heartbeat <= 0 {
			continue
		}
		if now.Sub(r.lastHB) >= r.heartbeat {
			*out = append(*out, outMsg{to: r.reply, hdr: hbHdr()})
			r.lastHB = now
		}
		consider(r.lastHB.Add(r.heartbeat))
	}
}

// inactiveLocked reports whether the consumer has been without clients for
// its inactive threshold and should be removed.
func (c *consumer) inactiveLocked(now time.Time, consider func(time.Time)) bool {
	cfg := c.mu.cfg
	if cfg.InactiveThreshold <= 0 {
		return false
	}
	if len(c.mu.waiting) > 0 || (cfg.DeliverSubject != "" && c.a.acc.HasInterest(cfg.DeliverSubject)) {
		c.mu.active = now
	}
	deadline := c.mu.active.Add(cfg.InactiveThreshold)
	if !now.Before(deadline) {
		return true
	}
	consider(deadline)
	return false
}

// maxDeliveriesAdvisory tells the account a message hit max_deliver.
func (c *consumer) maxDeliveriesAdvisory(seq, dc uint64) {
	adv := map[string]any{
		"type":       "io.nats.jetstream.advisory.v1.max_deliver",
		"id":         strconv.FormatUint(seq, 36) + strconv.FormatInt(time.Now().UnixNano(), 36),
		"timestamp":  time.Now().UTC(),
		"stream":     c.stream,
		"consumer":   c.name,
		"stream_seq": seq,
		"deliveries": dc,
	}
	go c.a.advise("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+c.stream+"."+c.name, adv)
}

// persist writes the consumer's state through the apply path.
func (c *consumer) persist() {
	c.s.ap.submit(&proposal{s: c.s, acct: c.a, kind: propConsumerState, cons: c, done: func(*proposal, result) {}})
}

// persistThen writes the consumer's state and runs then once it is
// durable (see thenIfDurable).
func (c *consumer) persistThen(then func()) {
	c.s.ap.submit(&proposal{s: c.s, acct: c.a, kind: propConsumerState, cons: c, done: thenIfDurable(then)})
}

// thenIfDurable is the completion of a write that answers a double ack:
// then runs only if the write is durable. A write that failed, was never
// appended, or whose fate is unknown (a partition's leadership ended
// under it) runs nothing: an ack answered then is one a restart or the
// next leader may not have, and the client's wait for the answer times
// out instead, so it acks again.
func thenIfDurable(then func()) func(*proposal, result) {
	return func(_ *proposal, r result) {
		if r.err == nil {
			then()
		}
	}
}

// paceLocked returns when the next message (stored at ts, of size bytes)
// may go out, or the zero time if now: replay_policy original keeps the
// original gaps between messages, rate_limit_bps caps the bit rate.
func (c *consumer) paceLocked(now time.Time, ts int64, size int) time.Time {
	cfg := c.mu.cfg
	if cfg.ReplayPolicy == api.ReplayOriginal && c.mu.replayTs != 0 && ts > c.mu.replayTs {
		if due := c.mu.replayAt.Add(time.Duration(ts - c.mu.replayTs)); now.Before(due) {
			return due
		}
	}
	if bps := cfg.RateLimit; bps > 0 {
		if c.mu.rateStart.IsZero() || now.Sub(c.mu.rateStart) >= time.Second {
			c.mu.rateStart, c.mu.rateBytes = now, 0
		}
		if uint64(c.mu.rateBytes+size)*8 > bps && c.mu.rateBytes > 0 {
			return c.mu.rateStart.Add(time.Second)
		}
	}
	return time.Time{}
}

// send publishes what the loop gathered under c.mu, after releasing it.
func (c *consumer) send(out []outMsg) {
	for _, m := range out {
		subj := m.subject
		if subj == "" {
			subj = m.to
		}
		if m.route != nil {
			m.route.Deliver(subj, m.reply, m.hdr, m.data)
			continue
		}
		c.a.acc.Deliver(m.to, subj, m.reply, m.hdr, m.data)
	}
}
