package cluster

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// readFence proves a group's leadership to reads: see ReadFence. Calls
// made while a round is in flight share the next round, so a burst of
// reads costs one barrier entry per round trip, not one each.
type readFence struct {
	mu      sync.Mutex
	waiting []chan error // guarded by mu: callers the next round answers
	running bool         // guarded by mu: a goroutine runs rounds
	// passed is the raft instance and term in which a barrier round last
	// passed here: from then on this node's state holds every entry
	// committed before its leadership, and that instance's rounds in that
	// term probe instead (see ReadFence). The instance is part of it
	// because a repair starts a new one, with a term of its own.
	passed atomic.Pointer[fencedTerm]
	// barriers and probes count the rounds of each kind that passed.
	barriers, probes atomic.Uint64
}

// fencedTerm is a raft instance's term in which a barrier round passed.
type fencedTerm struct {
	r    *raft.Raft
	term uint64
}

// ReadFence returns nil once this node is shown to have led the group at
// some moment after the call began. A read of the leader's state made
// before the call is then as current as a read at that moment
// (linearizable): no other leader can have committed anything before it.
// A leader that was stopped (paused, starved) while another was elected
// still believes it leads until raft hears of the new term; its reads
// fail here instead of answering from stale state.
//
// A round proves it one of two ways:
//
//   - The first round of a leadership appends a barrier entry and waits
//     for a quorum to commit it in this node's term. Once it is applied,
//     so is every entry committed before the leadership (raft applies a
//     new leader's inherited entries only once it commits one of its own).
//   - Later rounds of the same term probe: a heartbeat at this term, sent
//     to every other voter after the round began, and answered as
//     accepted by enough of them to make a quorum with this node, which
//     still leads in that term afterwards. A node accepts a heartbeat only
//     while its term is at most the heartbeat's, so a quorum held no
//     higher term when it answered, and no later leader had been elected
//     (a vote raises the voter's term). This costs a round trip, not a
//     log entry and two fsyncs.
//
// raft's VerifyLeader is not enough: it counts a response to a heartbeat
// or append sent before the call, which may come from before the pause,
// and the transport answers some heartbeats itself (heartbeatThin).
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

// fenceRounds runs rounds until no caller waits. Invariant: a round's
// barrier or probe is sent after every caller it answers had joined
// (they are taken from waiting before the round starts). A caller that
// gave up is answered into its buffered channel all the same. Each round
// ends within timeout, so a barrier raft never answers or a probe no
// follower answers cannot hold the rounds, and the callers joining behind
// them, forever.
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
		err := g.fenceRound(timeout)
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

// fenceRound proves the leadership once, by barrier or by probe (see
// ReadFence).
func (g *Group) fenceRound(timeout time.Duration) error {
	r := g.raft()
	if r == nil {
		return ErrNotStarted
	}
	term := r.CurrentTerm()
	if r.State() != raft.Leader {
		return fmt.Errorf("group %d: read fence: %w", g.id, ErrNotLeader)
	}
	f := &g.fence
	if p := f.passed.Load(); p == nil || p.r != r || p.term != term {
		if err := g.barrierWithin(timeout); err != nil {
			return err
		}
		// The barrier committed in the term it was appended in; record
		// it only if that is still the term read before it.
		if r.CurrentTerm() == term {
			f.passed.Store(&fencedTerm{r: r, term: term})
		}
		f.barriers.Add(1)
		return nil
	}
	if err := g.probe(r, term, timeout); err != nil {
		return err
	}
	f.probes.Add(1)
	return nil
}

// probe sends a heartbeat of term to every other voter and returns nil
// once enough of them accepted it to make a quorum with this node, and
// this node still leads in term. A voter that answers with a higher term
// or not at all counts against; the wait ends within timeout.
func (g *Group) probe(r *raft.Raft, term uint64, timeout time.Duration) error {
	self := g.selfID()
	var others []raft.Server
	voter := false
	for _, s := range r.GetConfiguration().Configuration().Servers {
		switch {
		case s.Suffrage != raft.Voter:
		case s.ID == self:
			voter = true
		default:
			others = append(others, s)
		}
	}
	if !voter {
		// A leader being removed leads without a vote of its own: the
		// quorum arithmetic below does not hold for it.
		return g.barrierWithin(timeout)
	}
	need := (len(others) + 1) / 2 // a quorum of the voters (half of them, plus one), less this node
	answers := make(chan bool, len(others))
	t := g.trans()
	for _, s := range others {
		go func() { answers <- t.probe(s.ID, s.Address, self, term) }()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for accepted, refused := 0, 0; accepted < need; {
		select {
		case ok := <-answers:
			if ok {
				accepted++
				continue
			}
			if refused++; len(others)-refused < need {
				return fmt.Errorf("group %d: read fence: %w (a quorum did not accept term %d)", g.id, ErrNotLeader, term)
			}
		case <-timer.C:
			return fmt.Errorf("group %d: %w after %v (probe of term %d)", g.id, ErrFenceTimeout, timeout, term)
		}
	}
	if r.State() != raft.Leader || r.CurrentTerm() != term {
		return fmt.Errorf("group %d: read fence: %w (left term %d during the probe)", g.id, ErrNotLeader, term)
	}
	return nil
}
