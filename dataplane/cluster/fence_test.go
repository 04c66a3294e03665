package cluster

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// ReadFence passes on the leader, for many readers at once (they share
// rounds), and fails on a follower; a leader cut off from both followers
// fails it too, instead of vouching for its state.
func TestReadFence(t *testing.T) {
	c := startThree(t)
	const g = 1
	leader := c.leader(g)
	grp := c.node(leader).Group(g)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- grp.ReadFence(5 * time.Second)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("fence on the leader: %v", err)
		}
	}
	for _, name := range c.running() {
		if name == leader {
			continue
		}
		if err := c.node(name).Group(g).ReadFence(time.Second); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("fence on follower %s: %v, want ErrNotLeader", name, err)
		}
	}
	for _, name := range c.running() {
		if name != leader {
			c.kill(name)
		}
	}
	if err := grp.ReadFence(5 * time.Second); err == nil {
		t.Fatal("a leader without followers passed the fence")
	}
}

// A leadership's first fence is a barrier entry; the fences after it in
// the same term probe the followers and append nothing to the log. A
// probe at a term the followers have left is refused, and a new leader
// starts again with a barrier.
func TestReadFenceProbes(t *testing.T) {
	c := startThree(t)
	const g = 1
	leader := c.leader(g)
	grp := c.node(leader).Group(g)
	if err := grp.ReadFence(5 * time.Second); err != nil {
		t.Fatalf("first fence: %v", err)
	}
	if n := grp.fence.barriers.Load(); n != 1 {
		t.Fatalf("first fence of the term: %d barrier rounds, want 1", n)
	}
	last := grp.LastIndex()
	for i := range 20 {
		if err := grp.ReadFence(5 * time.Second); err != nil {
			t.Fatalf("fence %d: %v", i, err)
		}
	}
	if b, p := grp.fence.barriers.Load(), grp.fence.probes.Load(); b != 1 || p != 20 {
		t.Fatalf("after 21 fences: %d barrier and %d probe rounds, want 1 and 20", b, p)
	}
	if now := grp.LastIndex(); now != last {
		t.Fatalf("probes appended to the log: last index %d, was %d", now, last)
	}

	r := grp.raft()
	term := r.CurrentTerm()
	if err := grp.probe(r, term-1, 5*time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("probe of the previous term %d: %v, want ErrNotLeader", term-1, err)
	}

	var to string
	for _, name := range c.running() {
		if name != leader {
			to = name
			break
		}
	}
	if err := grp.TransferLeadership(to); err != nil {
		t.Fatal(err)
	}
	if err := grp.ReadFence(time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fence on the deposed leader: %v, want ErrNotLeader", err)
	}
	next := c.node(to).Group(g)
	waitFor(t, 10*time.Second, to+" leading", next.IsLeader)
	for range 2 {
		if err := next.ReadFence(5 * time.Second); err != nil {
			t.Fatalf("fence on the new leader: %v", err)
		}
	}
	if b, p := next.fence.barriers.Load(), next.fence.probes.Load(); b != 1 || p != 1 {
		t.Fatalf("new leader: %d barrier and %d probe rounds, want 1 and 1", b, p)
	}
}
