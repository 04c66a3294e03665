package server

import (
	"net"
	"sync"
)

// routeOut is a route's outbound queue. Every account's messages to the
// peer share the route, so one queue for all would let one account's
// flood put seconds of backlog in front of every other account's next
// message. Instead each account has its own queue, and the writer takes
// a turn of at most routeQuantum bytes from each account with messages
// waiting, after the route's own protocol operations. An account whose
// queue passes its stall threshold pauses its own publishers (as a slow
// subscriber does), not the others'; one whose queue passes its share
// of the route's bound loses its further messages to this peer until it
// drains, as a slow subscriber does, rather than the route being cut
// for every account. Only when the queues together pass the bound (many
// accounts at once, or a peer that reads nothing) is the route cut.
//
// Invariant: pending == len(ctl) + the sum of every account queue's
// pending; an account queue with bytes waiting is in ready exactly once.
type routeOut struct {
	mu struct {
		sync.Mutex
		ctl     outChunks             // protocol operations, sent first; guarded by mu
		accts   map[string]*acctQueue // guarded by mu
		ready   []*acctQueue          // accounts with bytes waiting, in turn order; guarded by mu
		pending int64                 // guarded by mu
		stop    bool                  // no more appends; guarded by mu
	}
	signal chan struct{} // wakes the writer; capacity 1
}

// routeQuantum is how much of one account's backlog one turn of the
// writer sends: what another account's message may wait behind, per
// account with a backlog.
const routeQuantum = 64 << 10

// acctQueue is one account's part of a route's queue.
type acctQueue struct {
	name   string
	chunks outChunks
	// pending is the bytes queued in chunks.
	pending int64
	inReady bool
	// stall is closed when the queue drains below its stall threshold;
	// the account's publishers wait on it briefly.
	stall chan struct{}
	// dropping is set while the account's messages are being dropped,
	// from the first drop until the queue is below its stall threshold.
	dropping bool
	// paused is set between the peer's PAUSE and RESUME for the
	// account: a stream there has a backlog of the account's publishes
	// past its stall threshold, and the route's reader never waits, so
	// the account's publishers wait here instead (stall stays open) and
	// what they queued before they noticed stays here too (the writer
	// skips the account): once the PAUSE has arrived, only what the
	// sockets held still reaches the peer.
	paused bool
}

func newRouteOut() *routeOut {
	o := &routeOut{signal: make(chan struct{}, 1)}
	o.mu.accts = map[string]*acctQueue{}
	return o
}

// wake makes the writer run soon; it never blocks.
func (o *routeOut) wake() {
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

// acctStall is the backlog past which an account's publishers pause:
// an eighth of the route's bound.
func acctStall(max int64) int64 { return max / 8 }

// acctShare is the backlog past which an account's messages are
// dropped: a quarter of the route's bound, so that the route is cut only
// when more than four accounts are past theirs.
func acctShare(max int64) int64 { return max / 4 }

// appendCtlLocked queues a protocol operation.
func (o *routeOut) appendCtlLocked(b []byte) {
	o.mu.ctl.add(b)
	o.mu.pending += int64(len(b))
}

// acctLocked is account's queue, made ready for n more bytes, which the
// caller appends to its cur and then reports with addedLocked.
func (o *routeOut) acctLocked(account string, n int) *acctQueue {
	q := o.mu.accts[account]
	if q == nil {
		q = &acctQueue{name: account}
		o.mu.accts[account] = q
	}
	q.chunks.room(n)
	if !q.inReady {
		q.inReady = true
		o.mu.ready = append(o.mu.ready, q)
	}
	return q
}

// addedLocked records n bytes appended to q and returns the channel its
// publisher may wait on if q is past its stall threshold or paused by
// the peer (nil if neither).
func (o *routeOut) addedLocked(q *acctQueue, n int, max int64) chan struct{} {
	q.pending += int64(n)
	o.mu.pending += int64(n)
	if q.pending <= acctStall(max) && !q.paused {
		return nil
	}
	return q.stallChan()
}

// stallChan is the channel q's publishers wait on, made when the first
// of them needs it; unstallLocked closes it and clears it.
func (q *acctQueue) stallChan() chan struct{} {
	if q.stall == nil {
		q.stall = make(chan struct{})
	}
	return q.stall
}

// overShareLocked reports whether n more bytes would take account's
// queue past its share of the route's bound max. If so it returns the
// queue: the message is to be dropped, and its publisher waits on the
// queue's stall channel (until the peer resumes the account, if it has
// paused it) as it would below the share. Without that wait a publisher
// whose messages are being dropped reads and drops them as fast as its
// client sends, and the CPU that takes is what the peer's backlog needs
// to drain (measured: one node of three read 38,000 500 KB messages in
// 20 s and passed 205 of them on). first is set for the first drop since
// the queue was last under its stall threshold.
func (o *routeOut) overShareLocked(account string, n int, max int64) (q *acctQueue, first bool) {
	q = o.mu.accts[account]
	if q == nil || q.pending+int64(n) <= acctShare(max) {
		return nil, false
	}
	first = !q.dropping
	q.dropping = true
	q.stallChan()
	return q, first
}

// pauseLocked handles the peer's PAUSE (on) or RESUME of account. On a
// RESUME the caller wakes the writer for what the account has queued;
// its publishers are released here if that is below the stall threshold,
// else once the writer has sent enough.
func (o *routeOut) pauseLocked(account string, on bool, max int64) {
	q := o.mu.accts[account]
	switch {
	case on && q == nil:
		q = &acctQueue{name: account}
		o.mu.accts[account] = q
	case !on && q == nil:
		return
	}
	q.paused = on
	if on {
		q.stallChan()
	} else {
		o.unstallLocked(max)
	}
}

// takeTurnLocked moves to dst the protocol operations, then up to
// routeQuantum bytes of each account waiting, in turn.
func (o *routeOut) takeTurnLocked(dst net.Buffers) net.Buffers {
	var n int
	dst, n = o.mu.ctl.take(dst, -1)
	o.mu.pending -= int64(n)
	turn := o.mu.ready
	o.mu.ready = nil
	for _, q := range turn {
		if q.paused {
			o.mu.ready = append(o.mu.ready, q)
			continue
		}
		dst, n = q.chunks.take(dst, routeQuantum)
		q.pending -= int64(n)
		o.mu.pending -= int64(n)
		if q.pending > 0 {
			o.mu.ready = append(o.mu.ready, q)
		} else {
			q.inReady = false
		}
	}
	return dst
}

// unstallLocked releases the publishers of accounts back below their
// stall threshold and not paused by the peer (all of them once the route
// stops), and forgets idle accounts.
func (o *routeOut) unstallLocked(max int64) {
	for name, q := range o.mu.accts {
		if (q.pending <= acctStall(max) && !q.paused) || o.mu.stop {
			if q.stall != nil {
				close(q.stall)
				q.stall = nil
			}
			q.dropping = false
		}
		if !q.inReady && q.stall == nil && !q.dropping {
			delete(o.mu.accts, name)
		}
	}
}

// dropLocked discards everything queued (the route is closing).
func (o *routeOut) dropLocked() {
	bufs, _ := o.mu.ctl.take(nil, -1)
	release(bufs)
	for _, q := range o.mu.accts {
		bufs, _ = q.chunks.take(bufs[:0], -1)
		release(bufs)
		q.pending = 0
		q.inReady = false
	}
	o.mu.ready = nil
	o.mu.pending = 0
}
