package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster/mux"
)

// soak reports whether the long variants run.
func soak() bool { return os.Getenv("CONTRAIL_SOAK") == "1" }

// testLog is silent unless CONTRAIL_TEST_LOG=1: raft's election chatter
// would bury a failure, and goroutines may log after the test ends.
func testLog() *slog.Logger {
	if os.Getenv("CONTRAIL_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testFSM is a durable-looking FSM: it outlives its node, as a Pebble FSM
// outlives the process, and skips entries it has applied.
type testFSM struct {
	mu      sync.Mutex
	applied uint64
	entries []string
}

func (f *testFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Index <= f.applied {
		return nil
	}
	f.applied = l.Index
	f.entries = append(f.entries, string(l.Data))
	return l.Index
}

type fsmState struct {
	Applied uint64
	Entries []string
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmState{f.applied, append([]string(nil), f.entries...)}, nil
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var st fsmState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return err
	}
	f.mu.Lock()
	f.applied, f.entries = st.Applied, st.Entries
	f.mu.Unlock()
	return nil
}

func (s fsmState) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s fsmState) Release() {}

func (f *testFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.entries...)
}

// groupStores is one group's state on one node.
type groupStores struct {
	fsm   *testFSM
	logs  *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

func newGroupStores() *groupStores {
	return &groupStores{fsm: &testFSM{}, logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
}

type testNode struct {
	name   string
	addr   string
	m      *mux.Mux
	node   *Node
	stores []*groupStores
}

// testCluster is three (or more) nodes on loopback in one process.
type testCluster struct {
	t     *testing.T
	peers map[string]string
	nodes map[string]*testNode
	// tweak, if set, adjusts every node's config before it starts.
	tweak func(*Config)
}

const testPartitions = DefaultPartitions

func newTestCluster(t *testing.T, names ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, peers: map[string]string{}, nodes: map[string]*testNode{}}
	// The listeners stay open until every node has its port, so the
	// kernel cannot offer one port twice; the nodes bind them later.
	var picked []net.Listener
	defer func() {
		for _, ln := range picked {
			ln.Close()
		}
	}()
	for _, name := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		picked = append(picked, ln)
		addr := ln.Addr().String()
		c.peers[name] = addr
		tn := &testNode{name: name, addr: addr}
		for g := 0; g <= testPartitions; g++ {
			tn.stores = append(tn.stores, newGroupStores())
		}
		c.nodes[name] = tn
	}
	t.Cleanup(c.closeAll)
	return c
}

func (c *testCluster) start(name string) *Node {
	c.t.Helper()
	n := c.open(name)
	if err := n.Run(); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// open opens node name (Open) without running its groups.
func (c *testCluster) open(name string) *Node {
	c.t.Helper()
	tn := c.nodes[name]
	var ln net.Listener
	var err error
	// The port was just released by this test; on a busy machine the
	// bind may need a moment.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", tn.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	tn.m = mux.New(ln, testLog(), []byte("cluster-test"), nil)
	cfg := Config{
		Name:       name,
		Peers:      c.peers,
		Mux:        tn.m,
		Partitions: testPartitions,
		Log:        testLog(),
		Open: func(g uint16) (raft.FSM, raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
			s := tn.stores[g]
			return s.fsm, s.logs, s.logs, s.snaps, nil
		},
		Reset: func(g uint16) error {
			tn.stores[g] = newGroupStores()
			return nil
		},
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	n, err := Open(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	tn.node = n
	return n
}

// kill stops a node as a crash would: no leadership hand-over, every
// connection cut, the port closed.
func (c *testCluster) kill(name string) {
	tn := c.nodes[name]
	if tn.node == nil {
		return
	}
	tn.node.Close()
	tn.m.Close()
	tn.node, tn.m = nil, nil
}

// wipe replaces a stopped node's state with empty stores.
func (c *testCluster) wipe(name string) {
	tn := c.nodes[name]
	for g := range tn.stores {
		tn.stores[g] = newGroupStores()
	}
}

func (c *testCluster) closeAll() {
	for name := range c.nodes {
		c.kill(name)
	}
}

func (c *testCluster) node(name string) *Node { return c.nodes[name].node }

// running is the names of the running nodes, sorted.
func (c *testCluster) running() []string {
	var names []string
	for name, tn := range c.nodes {
		if tn.node != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// leader is the name of the running node that leads group g and that
// every running node agrees on, or "".
func (c *testCluster) leader(g uint16) string {
	var leader string
	for _, name := range c.running() {
		grp := c.node(name).Group(g)
		if grp.IsLeader() {
			if leader != "" {
				return ""
			}
			leader = name
		}
	}
	if leader == "" {
		return ""
	}
	for _, name := range c.running() {
		if c.node(name).Group(g).Leader() != leader {
			return ""
		}
	}
	return leader
}

// waitFor polls cond, an observable state, until it holds.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLeaders waits until every group has a leader all running nodes agree on.
func (c *testCluster) waitLeaders(timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "a leader in every group", func() bool {
		for g := 0; g <= testPartitions; g++ {
			if c.leader(uint16(g)) == "" {
				return false
			}
		}
		return true
	})
}

// apply proposes data in group g on its current leader, retrying across
// elections, and returns once it is committed.
func (c *testCluster) apply(g uint16, data string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range c.running() {
			grp := c.node(name).Group(g)
			if !grp.IsLeader() {
				continue
			}
			if err := grp.Apply([]byte(data), time.Second).Error(); err == nil {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("group %d: could not commit %q", g, data)
}

// waitEntries waits until node name's FSM for group g holds want.
func (c *testCluster) waitEntries(name string, g uint16, want []string) {
	c.t.Helper()
	fsm := c.nodes[name].stores[g].fsm
	waitFor(c.t, 10*time.Second, fmt.Sprintf("%s group %d to apply %d entries", name, g, len(want)), func() bool {
		return equal(fsm.list(), want)
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
