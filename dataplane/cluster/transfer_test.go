package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestTransferTargets: a transfer's target is chosen before the group's
// hand-over hooks run. Naming this node, or a server that is no member,
// is refused with nothing paused; naming a member that stopped
// answering hands over to a live one instead (nats-server passes over an
// unhealthy preferred server the same way); and two transfers asked at
// once run one after the other, the second finding the leadership gone
// rather than pausing the group a second time.
func TestTransferTargets(t *testing.T) {
	c := newTestCluster(t, three...)
	c.tweak = func(cfg *Config) { cfg.BalanceInterval = -1 } // only these transfers move group g
	for _, name := range three {
		c.start(name)
	}
	c.waitLeaders(20 * time.Second)
	const g = 1
	var handOvers atomic.Int32
	for _, name := range three {
		c.node(name).Group(g).OnHandOver(func(time.Duration) func(error) {
			handOvers.Add(1)
			return func(error) {}
		})
	}
	leader := c.leader(g)
	grp := c.node(leader).Group(g)

	if err := grp.TransferLeadership(leader); !errors.Is(err, ErrSelfTransfer) {
		t.Fatalf("transfer to itself: %v", err)
	}
	if err := grp.TransferLeadership("n9"); err == nil {
		t.Fatal("transfer to a non-member went ahead")
	}
	if n := handOvers.Load(); n != 0 {
		t.Fatalf("refused transfers ran %d hand-overs", n)
	}

	var dead, live string
	for _, name := range three {
		switch {
		case name == leader:
		case dead == "":
			dead = name
		default:
			live = name
		}
	}
	c.kill(dead)
	// The leader passes the dead member over once it has not answered
	// for CurrentWithin.
	deadID := func() (id string) {
		for _, s := range grp.raft().GetConfiguration().Configuration().Servers {
			if nodeName(s.ID) == dead {
				id = string(s.ID)
			}
		}
		return id
	}()
	waitFor(t, 20*time.Second, dead+" silent to the leader", func() bool {
		return !grp.trans().progress.answered(raft.ServerID(deadID), CurrentWithin*grp.n.mult, time.Now())
	})
	if err := grp.TransferLeadership(dead); err != nil {
		t.Fatalf("transfer preferring the dead %s: %v", dead, err)
	}
	if l := c.leader(g); l != live {
		t.Fatalf("leader %q after a transfer preferring the dead %s, want the live %s", l, dead, live)
	}
	if n := handOvers.Swap(0); n != 1 {
		t.Fatalf("%d hand-overs for one transfer", n)
	}

	// Two at once on the new leader: one moves the leadership, the other
	// waits for it and finds this node no longer leads. With the dead
	// node out, the only place to go is back.
	grp = c.node(live).Group(g)
	waitFor(t, 20*time.Second, leader+" answering "+live, func() bool {
		for _, s := range grp.raft().GetConfiguration().Configuration().Servers {
			if nodeName(s.ID) == leader {
				return grp.trans().progress.answered(s.ID, CurrentWithin*grp.n.mult, time.Now())
			}
		}
		return false
	})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = grp.TransferLeadership("")
		}()
	}
	wg.Wait()
	ok, notLeader := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrNotLeader):
			notLeader++
		default:
			t.Fatalf("concurrent transfer: %v", err)
		}
	}
	if ok != 1 || notLeader != 1 {
		t.Fatalf("concurrent transfers: %v", errs)
	}
	if n := handOvers.Load(); n != 1 {
		t.Fatalf("%d hand-overs for two concurrent transfers, one of which moved nothing", n)
	}
	if l := c.leader(g); l != leader {
		t.Fatalf("leader %q, want %s back", l, leader)
	}
}
