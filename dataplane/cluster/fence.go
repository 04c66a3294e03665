package cluster

import (
	"sync"
	"time"
)

// readFence proves a group's leadership to reads: see ReadFence. Calls
// made while a round is in flight share the next round, so a burst of
// reads costs one barrier entry per round trip, not one each.
type readFence struct {
	mu      sync.Mutex
	waiting []chan error // guarded by mu: callers the next round answers
	running bool         // guarded by mu: a goroutine runs rounds
}

// ReadFence returns nil once this node is shown to have led the group at
// some moment after the call began: a barrier entry appended after the
// call was committed by a quorum in this node's term. A read of the
// leader's state made before the call is then as current as a read at
// that moment (linearizable): no other leader can have committed
// anything before it. A leader that was stopped (paused, starved) while
// another was elected still believes it leads until raft hears of the
// new term; its reads fail here instead of answering from stale state.
//
// A heartbeat round (raft's VerifyLeader) would be cheaper but is not
// enough: raft counts a response to a heartbeat or append sent before
// the call, which may come from before the pause.
func (g *Group) ReadFence(timeout time.Duration) error {
	ch := make(chan error, 1)
	f := &g.fence
	f.mu.Lock()
	f.waiting = append(f.waiting, ch)
	if !f.running {
		f.running = true
		go g.fenceRounds(timeout)
	}
	f.mu.Unlock()
	return <-ch
}

// fenceRounds runs barrier rounds until no caller waits. Invariant: a
// round's barrier is proposed after every caller it answers had joined
// (they are taken from waiting before the barrier starts).
func (g *Group) fenceRounds(timeout time.Duration) {
	f := &g.fence
	for {
		f.mu.Lock()
		batch := f.waiting
		f.waiting = nil
		if len(batch) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		err := g.Barrier(timeout)
		for _, ch := range batch {
			ch <- err
		}
	}
}
