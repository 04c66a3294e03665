package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var three = []string{"n1", "n2", "n3"}

// startThree starts three nodes and waits for every group's leader. The
// balancer is off unless balance is set: the other tests pick a leader
// and expect it to stay.
func startThree(t *testing.T, balance ...bool) *testCluster {
	c := newTestCluster(t, three...)
	if len(balance) == 0 {
		c.tweak = func(cfg *Config) { cfg.BalanceInterval = -1 }
	}
	for _, name := range three {
		c.start(name)
	}
	c.waitLeaders(20 * time.Second)
	return c
}

// Every group elects a leader, and entries proposed on it reach every
// node's FSM; the leader then sees both followers current.
func TestGroupsElectAndReplicate(t *testing.T) {
	c := startThree(t)
	want := map[uint16][]string{}
	for g := uint16(0); g <= testPartitions; g++ {
		for i := 0; i < 5; i++ {
			e := fmt.Sprintf("g%d-e%d", g, i)
			c.apply(g, e)
			want[g] = append(want[g], e)
		}
	}
	for _, name := range three {
		for g := uint16(0); g <= testPartitions; g++ {
			c.waitEntries(name, g, want[g])
		}
	}
	for g := uint16(0); g <= testPartitions; g++ {
		leader := c.node(c.leader(g)).Group(g)
		waitFor(t, 5*time.Second, "both followers current", func() bool {
			reps := leader.Replicas()
			if len(reps) != 2 {
				return false
			}
			for _, r := range reps {
				if !r.Current || r.Offline || r.Lag != 0 || !r.Voter {
					return false
				}
			}
			return true
		})
		if id := leader.ServerID(); strings.Contains(id, "#") {
			t.Errorf("group %d: bootstrapped leader runs as %q, want a plain name", g, id)
		}
	}
}

// A leader that dies (no hand-over, connections cut) is replaced, and
// the new leader commits, well under a second later. The dead node comes
// back with its stores and catches up.
func TestFailoverUnplanned(t *testing.T) {
	runs := 3
	if soak() {
		runs = 10
	}
	c := startThree(t)
	const g = 1
	var want []string
	var took []time.Duration
	for run := 0; run < runs; run++ {
		e := fmt.Sprintf("before-%d", run)
		c.apply(g, e)
		want = append(want, e)
		old := c.leader(g)
		if old == "" {
			t.Fatal("no leader")
		}
		start := time.Now()
		c.kill(old)
		e = fmt.Sprintf("after-%d", run)
		c.apply(g, e)
		took = append(took, time.Since(start))
		want = append(want, e)
		c.start(old)
		for _, name := range three {
			c.waitEntries(name, g, want)
		}
		c.waitLeaders(10 * time.Second)
	}
	m := median(took)
	t.Logf("unplanned failover, kill to next commit: median %v over %d runs %v", m, runs, took)
	if m > time.Second {
		t.Errorf("median failover %v, want under 1s", m)
	}
}

// A planned transfer moves leadership to the named node, or to any.
func TestLeadershipTransfer(t *testing.T) {
	c := startThree(t)
	const g = 2
	from := c.leader(g)
	var to string
	for _, name := range three {
		if name != from {
			to = name
			break
		}
	}
	gained := make(chan bool, 8)
	c.node(to).Group(g).OnLeader(func(isLeader bool) { gained <- isLeader })
	start := time.Now()
	if err := c.node(from).Group(g).TransferLeadership(to); err != nil {
		t.Fatal(err)
	}
	// Done means the old leader knows its successor: what a hand-over
	// sends on then must find it.
	if l := c.node(from).Group(g).Leader(); l != to {
		t.Fatalf("the old leader knows %q as leader once the transfer returned, want %s", l, to)
	}
	if !<-gained {
		t.Fatal("the new leader was told it lost leadership")
	}
	if err := c.node(to).Group(g).Barrier(time.Second); err != nil {
		t.Fatal(err)
	}
	c.apply(g, "after-named")
	t.Logf("planned transfer to a named node, to next commit: %v", time.Since(start))
	if l := c.node(to).Group(g).Leader(); l != to {
		t.Fatalf("leader after transfer to %s: %q", to, l)
	}
	start = time.Now()
	if err := c.node(to).Group(g).TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	c.apply(g, "after-any")
	t.Logf("planned transfer to any node, to next commit: %v", time.Since(start))
	if c.node(to).Group(g).IsLeader() {
		t.Fatal("still leader after transfer")
	}
	if err := c.node(to).Group(g).TransferLeadership(""); err == nil {
		t.Fatal("a follower's transfer succeeded")
	}
	for _, name := range three {
		c.waitEntries(name, g, []string{"after-named", "after-any"})
	}
}

// A follower restarted with its stores rejoins under its old id and
// catches up on what it missed, and the leader sees it current again.
func TestRestartCatchesUp(t *testing.T) {
	c := startThree(t)
	const g = 3
	leader := c.leader(g)
	var follower string
	for _, name := range three {
		if name != leader {
			follower = name
		}
	}
	c.apply(g, "e0")
	c.kill(follower)
	want := []string{"e0"}
	for i := 1; i < 200; i++ {
		e := fmt.Sprintf("e%d", i)
		c.apply(g, e)
		want = append(want, e)
	}
	// The balancer may move the group's leadership meanwhile: ask
	// whoever leads it now.
	replica := func() (Replica, bool) {
		l := c.leader(g)
		if l == "" {
			return Replica{}, false
		}
		for _, r := range c.node(l).Group(g).Replicas() {
			if r.Name == follower {
				return r, true
			}
		}
		return Replica{}, false
	}
	waitFor(t, 10*time.Second, "the stopped follower offline", func() bool {
		r, ok := replica()
		return ok && r.Offline && !r.Current && r.Lag > 0
	})
	c.start(follower)
	c.waitEntries(follower, g, want)
	waitFor(t, 5*time.Second, "the restarted follower current", func() bool {
		r, ok := replica()
		return ok && r.Current && !r.Offline && r.Lag == 0
	})
	fg := c.node(follower).Group(g)
	if fg.ServerID() != follower || fg.Repairing() {
		t.Fatalf("restarted follower runs as %q, repairing %v", fg.ServerID(), fg.Repairing())
	}
}

// Open runs no raft: a restarted node's state machines apply nothing and
// its groups report no leadership until Run, so whoever wires them to
// the node (the engine) has it before the first entry arrives. A fresh
// state machine on a node with a log shows it: empty after Open, caught
// up after Run.
func TestOpenRunsNothingUntilRun(t *testing.T) {
	c := startThree(t)
	const g = 2
	c.apply(g, "e0")
	c.apply(0, "m0")
	c.waitEntries("n3", g, []string{"e0"})
	c.kill("n3")
	for _, s := range c.nodes["n3"].stores {
		s.fsm = &testFSM{} // the log stays: the entries are replayed into it
	}
	n := c.open("n3")
	for _, grp := range n.Groups() {
		if grp.Raft() != nil || grp.IsLeader() || grp.Leader() != "" {
			t.Fatalf("group %d runs before Run: raft %v, leader %q", grp.ID(), grp.Raft() != nil, grp.Leader())
		}
		if got := c.nodes["n3"].stores[grp.ID()].fsm.list(); len(got) != 0 {
			t.Fatalf("group %d applied %q before Run", grp.ID(), got)
		}
	}
	if err := n.Run(); err != nil {
		t.Fatal(err)
	}
	c.waitEntries("n3", g, []string{"e0"})
	c.waitEntries("n3", 0, []string{"m0"})
}

// The cluster forms once a majority is up: one node alone never
// bootstraps; a second makes a quorum and the groups elect leaders; the
// third, started later, finds the others' state and joins as a new
// incarnation that becomes a voter once caught up.
func TestClusterFormsWithMajority(t *testing.T) {
	c := newTestCluster(t, three...)
	c.start("n1")
	waitFor(t, 10*time.Second, "three discovery rounds alone", func() bool {
		return c.node("n1").rounds.Load() >= 3
	})
	for _, g := range c.node("n1").Groups() {
		select {
		case <-g.Ready():
			t.Fatalf("group %d started on one node of three", g.ID())
		default:
		}
	}
	c.start("n2")
	c.waitLeaders(20 * time.Second)
	c.apply(1, "before-n3")
	c.start("n3")
	waitFor(t, 20*time.Second, "n3 a voter in every group", func() bool {
		for _, g := range c.node("n3").Groups() {
			select {
			case <-g.Ready():
			default:
				return false
			}
			if g.Repairing() {
				return false
			}
		}
		return true
	})
	c.apply(1, "after-n3")
}

// A planned shutdown hands the node's leaderships over before it stops,
// so its groups have new leaders at once; the meta leader then spreads
// partition leadership again when the node is back, four each.
func TestBalanceAndPlannedShutdown(t *testing.T) {
	c := startThree(t, true)
	balanced := func() bool {
		count := map[string]int{}
		for g := uint16(1); g <= testPartitions; g++ {
			l := c.leader(g)
			if l == "" {
				return false
			}
			count[l]++
		}
		for _, name := range c.running() {
			if count[name] != testPartitions/len(c.running()) {
				return false
			}
		}
		return true
	}
	waitFor(t, 20*time.Second, "partition leadership 4/4/4", balanced)
	const gone = "n2"
	var led []uint16
	for g := uint16(0); g <= testPartitions; g++ {
		if c.leader(g) == gone {
			led = append(led, g)
		}
	}
	start := time.Now()
	if err := c.node(gone).Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.nodes[gone].m.Close()
	c.nodes[gone].node = nil
	handover := time.Since(start)
	// An election after a silent leader cannot finish within one
	// heartbeat timeout (250 ms): new leaders sooner were handed over.
	waitFor(t, 200*time.Millisecond, "new leaders for the groups the stopped node led", func() bool {
		for _, g := range led {
			if l := c.leader(g); l == "" || l == gone {
				return false
			}
		}
		return true
	})
	t.Logf("planned shutdown handed %d groups over in %v; all had new leaders %v after it began", len(led), handover, time.Since(start))
	c.start(gone)
	waitFor(t, 30*time.Second, "partition leadership 4/4/4 after the restart", balanced)
}

// A node whose stores were wiped does not bootstrap or reuse its id: it
// rejoins as a new incarnation and gets every committed entry back.
func TestWipedNodeRejoins(t *testing.T) {
	c := startThree(t)
	want := map[uint16][]string{}
	for g := uint16(0); g <= testPartitions; g++ {
		e := fmt.Sprintf("g%d", g)
		c.apply(g, e)
		want[g] = []string{e}
	}
	c.kill("n3")
	c.wipe("n3")
	c.start("n3")
	for g := uint16(0); g <= testPartitions; g++ {
		c.waitEntries("n3", g, want[g])
		grp := c.node("n3").Group(g)
		waitFor(t, 10*time.Second, "n3 out of repair", func() bool { return !grp.Repairing() })
		id := grp.ServerID()
		if !strings.HasPrefix(id, "n3#") {
			t.Fatalf("group %d: wiped n3 runs as %q, want a new incarnation", g, id)
		}
		servers := grp.Raft().GetConfiguration().Configuration().Servers
		if len(servers) != 3 {
			t.Fatalf("group %d: configuration %v, want three servers", g, servers)
		}
		for _, s := range servers {
			if s.Suffrage != raft.Voter || s.ID == "n3" {
				t.Fatalf("group %d: configuration %v", g, servers)
			}
		}
	}
	c.apply(1, "after")
	c.waitEntries("n3", 1, append(want[1], "after"))
}

// The hazard of a wiped node (T5): entries committed by the leader and
// one follower while the other follower was down; then the follower that
// holds them is wiped and the leader dies. The stale follower and the
// wiped node are a majority, and without the vote gate the wiped node
// would elect the stale one and the entries would be lost. With it the
// group stays leaderless until the old leader returns, and then every
// node gets every entry back.
func TestWipedNodeNeverVotes(t *testing.T) {
	c := startThree(t)
	const g = 1
	leader := c.leader(g)
	var others []string
	for _, name := range three {
		if name != leader {
			others = append(others, name)
		}
	}
	wiped, stale := others[0], others[1]
	c.apply(g, "seen-by-all")
	c.waitEntries(stale, g, []string{"seen-by-all"})
	c.kill(stale)
	want := []string{"seen-by-all"}
	for i := 0; i < 20; i++ {
		e := fmt.Sprintf("missed-by-%s-%d", stale, i)
		c.apply(g, e)
		want = append(want, e)
	}
	c.waitEntries(wiped, g, want)
	c.kill(wiped)
	c.wipe(wiped)
	c.kill(leader)

	c.start(stale)
	c.start(wiped)
	wg := c.node(wiped).Group(g)
	waitFor(t, 10*time.Second, "the wiped node to rejoin in repair", func() bool {
		select {
		case <-wg.Ready():
			return wg.Repairing()
		default:
			return false
		}
	})
	// The stale node asks the wiped node's old id for votes; the node,
	// now a new incarnation, turns those connections away (and would
	// refuse the requests themselves while in repair: TestRepairGate).
	waitFor(t, 10*time.Second, "the stale node's election requests refused", func() bool {
		return wg.trans().sl.misdirected.Load()+wg.trans().refused.Load() >= 3
	})
	for _, name := range []string{stale, wiped} {
		if l := c.node(name).Group(g).Leader(); l != "" {
			t.Fatalf("%s sees leader %q with only the stale and the wiped node up", name, l)
		}
	}
	incarnation := wg.ServerID()
	if !strings.HasPrefix(incarnation, wiped+"#") {
		t.Fatalf("wiped node runs as %q", incarnation)
	}
	// A restart in the middle of the repair resumes it under the same
	// incarnation.
	c.kill(wiped)
	c.start(wiped)
	wg = c.node(wiped).Group(g)
	<-wg.Ready()
	if wg.ServerID() != incarnation || !wg.Repairing() {
		t.Fatalf("restarted in repair: runs as %q (was %q), repairing %v", wg.ServerID(), incarnation, wg.Repairing())
	}

	c.start(leader)
	waitFor(t, 20*time.Second, "the wiped node repaired", func() bool { return !wg.Repairing() })
	c.waitLeaders(10 * time.Second)
	c.apply(g, "after")
	want = append(want, "after")
	for _, name := range three {
		c.waitEntries(name, g, want)
	}
}

// A node wiped while the others compacted their logs catches up by
// snapshot (raft's InstallSnapshot over the group's channel) and then by
// the log, and is promoted.
func TestWipedNodeCatchesUpBySnapshot(t *testing.T) {
	c := newTestCluster(t, three...)
	c.tweak = func(cfg *Config) {
		cfg.BalanceInterval = -1
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.SnapshotThreshold = 32
		cfg.TrailingLogs = 16
	}
	for _, name := range three {
		c.start(name)
	}
	c.waitLeaders(20 * time.Second)
	const g = testPartitions
	leader := c.leader(g)
	var victim string
	for _, name := range three {
		if name != leader {
			victim = name
			break
		}
	}
	c.kill(victim)
	c.wipe(victim)
	var want []string
	for i := 0; i < 300; i++ {
		e := fmt.Sprintf("e%d", i)
		c.apply(g, e)
		want = append(want, e)
	}
	waitFor(t, 10*time.Second, "the leader to compact its log", func() bool {
		first, err := c.nodes[leader].stores[g].logs.FirstIndex()
		return err == nil && first > 1
	})
	c.start(victim)
	c.waitEntries(victim, g, want)
	vg := c.node(victim).Group(g)
	waitFor(t, 10*time.Second, "the wiped node repaired", func() bool { return !vg.Repairing() })
	snaps, err := c.nodes[victim].stores[g].snaps.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("the wiped node holds no snapshot (%v): it did not catch up by one", err)
	}
	c.apply(g, "after")
	c.waitEntries(victim, g, append(want, "after"))
}

// A node that Admit refuses stays out: it never becomes a member, and so
// stays in repair, not voting.
func TestAdmitRefuses(t *testing.T) {
	c := newTestCluster(t, three...)
	refuse := false
	var mu sync.Mutex
	c.tweak = func(cfg *Config) {
		cfg.BalanceInterval = -1
		cfg.Admit = func(group uint16, name string) error {
			mu.Lock()
			defer mu.Unlock()
			if refuse && name == "n3" {
				return errors.New("removed")
			}
			return nil
		}
	}
	for _, name := range three {
		c.start(name)
	}
	c.waitLeaders(20 * time.Second)
	mu.Lock()
	refuse = true
	mu.Unlock()
	c.kill("n3")
	c.wipe("n3")
	c.start("n3")
	grp := c.node("n3").Group(1)
	<-grp.Ready()
	waitFor(t, 10*time.Second, "three join attempts", func() bool { return grp.joins.Load() >= 3 })
	if !grp.Repairing() {
		t.Fatal("a refused node left repair")
	}
	// n3's new incarnation hears from no leader: ask n1 who leads.
	var leader *Group
	waitFor(t, 10*time.Second, "a leader among n1 and n2", func() bool {
		l := c.node("n1").Group(1).Leader()
		if l != "n1" && l != "n2" {
			return false
		}
		leader = c.node(l).Group(1)
		return leader.IsLeader()
	})
	for _, s := range leader.Raft().GetConfiguration().Configuration().Servers {
		if string(s.ID) == grp.ServerID() {
			t.Fatalf("refused incarnation %s is in the configuration", s.ID)
		}
	}
}

// A config's problems are reported together.
func TestConfigValidate(t *testing.T) {
	_, err := Start(Config{Name: "a#1", Peers: map[string]string{"b": ""}})
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"name:", "not listed", `"b" has no address`, "mux: missing", "open: missing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
