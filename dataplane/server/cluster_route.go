package server

// Forwarding published messages to routes. Interest a peer announced is a
// subscription in the account's index whose forwarder is a routeSub, so
// matching, queue group choice, no-responders and HasInterest see remote
// interest with no extra step, and a node without routes pays nothing:
// its indexes hold no routeSub.

// routeSub is the forwarder of one interest a peer announced.
type routeSub struct {
	r     *route
	acct  string
	queue []byte // the queue group, when the interest is a member of one
	// weight is how many copies of the subscription are in the index
	// (a queue group's announced member count; 1 otherwise). Guarded by
	// the cluster's mu.
	weight int
}

func (*routeSub) stream() bool { return false }

// interest: the peer said it has a subscriber.
func (*routeSub) interest([]byte, int) bool { return true }

// routeTarget is one route a message being routed goes to, with the queue
// groups it is for there.
type routeTarget struct {
	r      *route
	acct   string
	queues [][]byte
}

// forward notes the route as a target of the message; deliverAll sends
// one frame per route once every subscription has been seen, so a
// message reaches each peer at most once however many of its
// subscriptions match. A message that came from a route goes no further.
func (f *routeSub) forward(s *sender, _, _ []byte, _ int, _ []byte) {
	if s.noRoute {
		return
	}
	for i := range s.rt {
		t := &s.rt[i]
		if t.r == f.r && t.acct == f.acct {
			if len(f.queue) > 0 && !named(t.queues, f.queue) {
				t.queues = append(t.queues, f.queue)
			}
			return
		}
	}
	t := routeTarget{r: f.r, acct: f.acct}
	if len(f.queue) > 0 {
		t.queues = append(t.queues, f.queue)
	}
	s.rt = append(s.rt, t)
}

// flushRoutes sends the message to the routes noted since mark.
func (s *sender) flushRoutes(mark int, subj, reply []byte, hdrLen int, msg []byte) {
	for i := mark; i < len(s.rt); i++ {
		t := &s.rt[i]
		switch st, paused := t.r.sendMsg(t.acct, s.links.deliverTo, subj, reply, t.queues, hdrLen, msg); {
		case st == nil:
		case paused:
			// The peer's apply path is backlogged: wait until it has
			// drained, as for a stream on this node.
			s.stall, s.drain = st, true
		case !s.drain:
			s.stall = st
		}
		t.r, t.queues = nil, nil
	}
	s.rt = s.rt[:mark]
}

// sendMsg queues one message frame in its account's part of the queue.
// A backlog of the account past its stall threshold makes the publishing
// client pause (as a slow subscriber does), so TCP slows the publisher to
// the peer's pace; past its share the message is dropped (core NATS
// delivers at most once) and the publisher pauses all the same; past the
// route's bound the route is cut. While
// the peer has paused the account, stall is returned with paused set:
// the publisher waits until the peer resumes it.
func (r *route) sendMsg(acct string, to, subj, reply []byte, queues [][]byte, hdrLen int, msg []byte) (stall <-chan struct{}, paused bool) {
	o := r.out
	max := r.maxPending()
	o.mu.Lock()
	if o.mu.stop {
		o.mu.Unlock()
		return nil, false
	}
	frame := len(acct) + len(to) + len(subj) + len(reply) + 48 + len(msg)
	need := frame
	for rest := queues; len(rest) > 0; {
		n := frameQueues(rest)
		for _, q := range rest[:n] {
			need += len(q) + 1
		}
		if rest = rest[n:]; len(rest) > 0 {
			need += frame
		}
	}
	if q, first := o.overShareLocked(acct, need, max); q != nil {
		stall, paused = q.stall, q.paused
		o.mu.Unlock()
		r.dropped.Add(1)
		if first {
			r.log.Warn("route: one account's backlog to the peer is over its share; dropping its messages to the peer until it drains",
				"account", acct, "share", acctShare(max))
		}
		return stall, paused
	}
	q := o.acctLocked(acct, need)
	before := len(q.chunks.cur)
	for first := true; first || len(queues) > 0; first = false {
		n := 0
		if len(queues) > 0 {
			n = frameQueues(queues)
		}
		q.chunks.cur = appendRouteMsgLine(q.chunks.cur, acct, to, subj, reply, queues[:n], !first, hdrLen, len(msg))
		q.chunks.cur = append(q.chunks.cur, msg...)
		q.chunks.cur = append(q.chunks.cur, '\r', '\n')
		queues = queues[n:]
	}
	if st := o.addedLocked(q, len(q.chunks.cur)-before, max); st != nil {
		stall, paused = st, q.paused
	}
	slow := o.mu.pending > max
	o.mu.Unlock()
	r.outMsgs.Add(1)
	r.outBytes.Add(uint64(len(msg)))
	if slow {
		r.slow()
		return nil, false
	}
	o.wake()
	return stall, paused
}
