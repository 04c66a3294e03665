package server

import (
	"bytes"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/protocol"
	"github.com/contrail/contrail/dataplane/subject"
)

// noRespondersHdr is the status-only header block of a 503 reply.
const noRespondersHdr = "NATS/1.0 503\r\n\r\n"

// sender is the publishing side of routing: a client's read loop, or an
// internal publisher. It remembers which connections it queued data for so
// their flushers are woken once per batch, not once per message.
//
// A sender is used by one goroutine at a time.
type sender struct {
	srv   *Server
	from  *client         // the publishing client; nil for internal publishes
	pcd   []*client       // clients to wake after this batch
	stall <-chan struct{} // a backlog to wait on after this batch
	// drain: stall is a PacedHandler's queued work, which always drains,
	// so the wait lasts until it has (or the connection ends) rather
	// than briefly.
	drain bool
	// paced: the message came over a route whose peer pauses its
	// publishers when asked (see route.pause).
	paced bool
	links linkCtx // a message crossing accounts (imports.go)
	// noRoute: the message came from a route and goes to no other
	// (one hop). rt are the routes the message being routed goes to
	// (cluster_route.go).
	noRoute bool
	rt      []routeTarget
	// scratch holds the byte forms of what the server itself delivers
	// (Account.deliver), valid for one message.
	scratch []byte
	// match holds what a one-off subject matched (subject.MatchOnceInto),
	// valid for one message: acknowledgements and replies match nothing
	// cached, and would otherwise allocate a result each.
	match subject.Result[*subscription]
}

// route delivers a published message to every interested subscriber of
// the client's account. hdrLen < 0 means the message has no headers.
func (c *client) route(subj, reply []byte, hdrLen int, msg []byte) {
	if c.userInfoRequest(subj, reply) {
		return
	}
	var r *subject.Result[*subscription]
	if oneShot(subj) {
		r = c.acc.subs.MatchOnceInto(subj, &c.match)
		defer c.match.Reset() // holds no subscription past the message
	} else {
		r = c.acc.subs.Match(subj)
	}
	if tell := len(reply) > 0 && c.wantsNoResponders(); r.Empty() || (tell && !anyInterest(r, subj, 0)) {
		// Nobody would get it, not even through an import: say so to a
		// requester that asked to be told.
		if tell {
			c.sendNoResponders(reply)
		}
		return
	}
	c.deliverAll(r, c.echo.Load(), subj, reply, hdrLen, msg)
}

// oneShot reports whether a subject is one clients use once (JetStream
// acks carry sequence numbers, replies go to unique inbox tokens): caching
// its match would only evict the hot subjects.
func oneShot(subj []byte) bool {
	return bytes.HasPrefix(subj, []byte("$JS.ACK.")) || bytes.HasPrefix(subj, []byte("_INBOX."))
}

// deliverAll hands the message to each plain subscriber and to one member
// of each queue group. Without echo, the sender's own subscriptions are
// skipped.
func (s *sender) deliverAll(r *subject.Result[*subscription], echo bool, subj, reply []byte, hdrLen int, msg []byte) {
	mark := len(s.rt)
	for _, sub := range r.Plain {
		if !echo && sub.client != nil && sub.client == s.from {
			continue
		}
		s.deliver(sub, subj, reply, hdrLen, msg)
	}
	for _, members := range r.Queues {
		sub := pickQueueMember(members)
		if !echo && sub.client != nil && sub.client == s.from {
			if sub = otherMember(members, s.from); sub == nil {
				continue
			}
		}
		s.deliver(sub, subj, reply, hdrLen, msg)
	}
	if len(s.rt) > mark {
		s.flushRoutes(mark, subj, reply, hdrLen, msg)
	}
}

// otherMember finds a queue member not owned by c.
func otherMember(members []*subscription, c *client) *subscription {
	for _, m := range members {
		if m.client != c {
			return m
		}
	}
	return nil
}

// wantsNoResponders reports whether the client asked to be told, with a
// 503 status message, that a request found nobody.
func (c *client) wantsNoResponders() bool { return c.opts.NoResponders && c.opts.Headers }

// sendNoResponders tells a requester nobody is listening, on its own
// subscription that matches the reply subject.
func (c *client) sendNoResponders(reply []byte) {
	r := c.acc.subs.Match(reply)
	for _, sub := range r.Plain {
		if sub.client == c {
			c.deliver(sub, reply, nil, len(noRespondersHdr), []byte(noRespondersHdr))
			return
		}
	}
}

// deliver queues one MSG/HMSG on the subscriber's connection, or calls an
// internal subscriber's handler. The waking of a connection's flusher is
// deferred to the end of the sender's batch, so many messages share one
// write.
func (s *sender) deliver(sub *subscription, subj, reply []byte, hdrLen int, msg []byte) {
	if sub.fwd != nil { // an import carrying the message to another account
		sub.fwd.forward(s, subj, reply, hdrLen, msg)
		return
	}
	if sub.client != nil && sub.client.perms != nil {
		p := sub.client.perms
		if p.hasSubDeny() && p.deliverDenied(string(subj)) {
			return
		}
		if len(reply) > 0 && p.resp != nil {
			p.openReply(string(reply), time.Now())
		}
	}
	if max := sub.max.Load(); max > 0 {
		n := sub.delivered.Add(1)
		if n > max {
			return
		}
		if n == max {
			defer sub.unsubscribe()
		}
	} else {
		sub.delivered.Add(1)
	}
	if sub.handler != nil {
		var hdr []byte
		if hdrLen >= 0 {
			hdr, msg = msg[:hdrLen], msg[hdrLen:]
		}
		if wait := sub.handler(subj, reply, hdr, msg, s.paced); wait != nil {
			s.stall, s.drain = wait, true
		}
		return
	}
	dst := sub.client
	if hdrLen >= 0 && !dst.headers.Load() {
		// The subscriber cannot parse headers: it gets the payload alone.
		msg = msg[hdrLen:]
		hdrLen = -1
	}
	mpend := dst.mpend.Load()
	o := dst.out
	o.mu.Lock()
	if o.mu.stop {
		o.mu.Unlock()
		return
	}
	// Room for the control line's numbers and separators, then the body:
	// appending in place cannot reallocate the chunk.
	q := &o.mu.q
	q.room(len(subj) + len(sub.sid) + len(reply) + 40 + len(msg))
	before := len(q.cur)
	q.cur = protocol.AppendMsgLine(q.cur, subj, sub.sid, reply, hdrLen, len(msg))
	q.cur = append(q.cur, msg...)
	q.cur = append(q.cur, '\r', '\n')
	o.mu.pending += int64(len(q.cur) - before)
	slow := o.mu.pending > mpend
	wake := !o.mu.queued
	o.mu.queued = true
	stall := o.stallLocked(mpend)
	o.mu.Unlock()
	if stall != nil && !s.drain {
		// A stream's queued work outranks a subscriber's brief stall:
		// the sender keeps waiting for it to drain.
		s.stall = stall
	}

	if dst.trace {
		dst.traceMsg(subj, sub.sid, reply, hdrLen, len(msg))
	}
	dst.outMsgs.Add(1)
	dst.outBytes.Add(uint64(len(msg)))
	s.srv.stats.outMsgs.Add(1)
	s.srv.stats.outBytes.Add(uint64(len(msg)))
	if slow {
		dst.slowConsumer(reasonSlowConsumer)
		return
	}
	if wake {
		s.pcd = append(s.pcd, dst)
	}
}

// queue appends raw protocol bytes to the client's own outbound queue.
// Callers arrange for the flusher to be woken.
func (c *client) queue(b []byte) {
	if c.trace {
		c.traceOut(b)
	}
	o := c.out
	o.mu.Lock()
	if !o.mu.stop {
		o.appendLocked(b)
	}
	o.mu.Unlock()
}

// wakePending wakes the flushers of every client this batch queued data
// for. If a subscriber's backlog is near its limit, the sender then pauses
// briefly (as nats-server does) so a publisher's TCP window does the
// throttling; a subscriber that stays stuck is cut off at max_pending.
// If an internal subscriber's queued work is (see PacedHandler), the
// sender waits for that work to drain: it always does, and reading on
// would only queue more.
func (s *sender) wakePending() {
	for i, dst := range s.pcd {
		dst.out.wake()
		s.pcd[i] = nil
	}
	s.pcd = s.pcd[:0]
	switch {
	case s.stall == nil:
	case s.drain && s.from != nil:
		select {
		case <-s.stall:
		case <-s.from.flushDone:
		}
	default:
		t := time.NewTimer(stallWait)
		select {
		case <-s.stall:
		case <-t.C:
		}
		t.Stop()
	}
	s.stall, s.drain = nil, false
}

// stallWait bounds how long one read batch waits for a backlogged
// subscriber to drain.
const stallWait = 5 * time.Millisecond

// sendErr queues -ERR and wakes the flusher at once.
func (c *client) sendErr(text string) {
	c.queue(protocol.AppendErr(nil, text))
	c.out.wake()
}

var senderPool = sync.Pool{New: func() any { return &sender{} }}
