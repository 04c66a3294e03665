package cluster

import (
	"errors"
	"fmt"
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
//
// The wait is bounded by timeout whatever the round does: raft bounds
// only a barrier's enqueueing, and a caller (an API worker) must never
// wait on a group that cannot commit.
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
	return g.fenceAnswer(ch, timeout)
}

// fenceAnswer is what ch says within timeout, else ErrFenceTimeout.
func (g *Group) fenceAnswer(ch <-chan error, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return fmt.Errorf("group %d: %w after %v", g.id, ErrFenceTimeout, timeout)
	}
}

// fenceRounds runs barrier rounds until no caller waits. Invariant: a
// round's barrier is proposed after every caller it answers had joined
// (they are taken from waiting before the barrier starts). A caller that
// gave up is answered into its buffered channel all the same. Each round
// ends within timeout (barrierWithin), so a barrier raft never answers
// cannot hold the rounds, and the callers joining behind it, forever.
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
		err := g.barrierWithin(timeout)
		for _, ch := range batch {
			ch <- err
		}
	}
}

// barrierWithin is Barrier bounded by timeout: raft bounds only a
// barrier's enqueueing. A barrier still pending at the timeout is left
// to end on its own goroutine (raft answers it once it commits, or when
// the leadership or the instance ends) and logged: the group is not
// committing.
func (g *Group) barrierWithin(timeout time.Duration) error {
	ch := make(chan error, 1)
	go func() { ch <- g.Barrier(timeout) }()
	err := g.fenceAnswer(ch, timeout)
	if errors.Is(err, ErrFenceTimeout) {
		g.log.Warn("read fence: barrier not answered in time", "timeout", timeout)
	}
	return err
}
