package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster"
	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// testNode is one member of an in-process cluster: an engine on its own
// Pebble store, and real hashicorp/raft groups over raft's in-memory
// transport. Every node's subscriptions live in one shared fakeAccount,
// which stands in for routes: a request reaches every node, as on a real
// cluster.
type testNode struct {
	name   string
	e      *Engine
	st     *store.Store
	groups []*raft.Raft
	trans  []*raft.InmemTransport
	quit   chan struct{}
	wg     sync.WaitGroup
	// wired closes once the engine holds the node's groups
	// (StartCluster): the groups' state machines wait for it, as a
	// cluster.Node runs no raft until Run.
	wired     chan struct{}
	wiredOnce sync.Once
	// peers are every node of the test cluster, by name, for Call.
	peers map[string]*testNode
	// gate, while set, holds back raft's leadership notifications to
	// the engine until it closes: the engine then acts on a change
	// late, as a busy node does.
	gate atomic.Pointer[chan struct{}]
	// failApply, while set, fails the node's next raft Apply with the
	// error it holds (once), as raft refusing an entry does.
	failApply atomic.Pointer[error]

	mu struct {
		sync.Mutex
		handlers map[string]func(from string, group uint16, body []byte) ([]byte, error)
		repairs  map[uint16]int // Repair calls by group
	}
}

// repairs is how many times group g was asked to repair on the node.
func (nd *testNode) repairs(g uint16) int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.mu.repairs[g]
}

// testRepl is the Replication of a testNode.
type testRepl struct {
	n     *testNode
	peers []string
}

func (r *testRepl) Call(node, op string, group uint16, body []byte) ([]byte, error) {
	to := r.n.peers[node]
	if to == nil {
		return nil, fmt.Errorf("no node %q", node)
	}
	to.mu.Lock()
	fn := to.mu.handlers[op]
	to.mu.Unlock()
	if fn == nil {
		return nil, fmt.Errorf("unknown op %q", op)
	}
	return fn(r.n.name, group, body)
}

func (r *testRepl) Handle(op string, fn func(from string, group uint16, body []byte) ([]byte, error)) {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	if r.n.mu.handlers == nil {
		r.n.mu.handlers = map[string]func(string, uint16, []byte) ([]byte, error){}
	}
	r.n.mu.handlers[op] = fn
}

func (r *testRepl) NodeID() string              { return r.n.name }
func (r *testRepl) ClusterName() string         { return "test" }
func (r *testRepl) Peers() []string             { return r.peers }
func (r *testRepl) Partitions() int             { return len(r.n.groups) - 1 }
func (r *testRepl) Group(g uint16) ReplicaGroup { return r.n.group(g) }

// group is the node's raft group g, as its engine sees it.
func (nd *testNode) group(g uint16) testGroup { return testGroup{nd.groups[g], nd, g} }

// testGroup is one raft group of a testNode. Its Repair only counts the
// call: the in-process raft groups cannot rejoin (the cluster package
// tests that part, and the e2e tests the whole). Its futures end when
// the node stops (quit closes after its groups shut down), as a
// cluster.Group's do: one raft left queued is never answered, and a
// take waiting on it would hold the engine's Close.
type testGroup struct {
	r  *raft.Raft
	n  *testNode
	id uint16
}

func (g testGroup) ApplyMarker(ext []byte, timeout time.Duration) raft.ApplyFuture {
	return cluster.Stoppable(g.r.ApplyLog(raft.Log{Extensions: ext}, timeout), g.n.quit)
}
func (g testGroup) Members() []string {
	var names []string
	for _, s := range g.r.GetConfiguration().Configuration().Servers {
		names = append(names, string(s.ID))
	}
	return names
}
func (g testGroup) Repair() error {
	g.n.mu.Lock()
	defer g.n.mu.Unlock()
	if g.n.mu.repairs == nil {
		g.n.mu.repairs = map[uint16]int{}
	}
	g.n.mu.repairs[g.id]++
	return nil
}

func (g testGroup) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	if err := g.n.failApply.Swap(nil); err != nil {
		return failedFuture{*err}
	}
	return cluster.Stoppable(g.r.Apply(data, timeout), g.n.quit)
}

// failedFuture is an entry raft refused.
type failedFuture struct{ err error }

func (f failedFuture) Error() error  { return f.err }
func (f failedFuture) Index() uint64 { return 0 }
func (f failedFuture) Response() any { return nil }

func (g testGroup) IsLeader() bool { return g.r.State() == raft.Leader }
func (g testGroup) Leader() string {
	_, id := g.r.LeaderWithID()
	return string(id)
}
func (g testGroup) Barrier(timeout time.Duration) error {
	return cluster.Stoppable(g.r.Barrier(timeout), g.n.quit).Error()
}
func (g testGroup) ReadFence(timeout time.Duration) error { return g.Barrier(timeout) }
func (g testGroup) TransferLeadership(to string) (err error) {
	// As cluster.Group does with the hook the server registers.
	if g.IsLeader() {
		after := g.n.e.HandOver(g.id, time.Second)
		defer func() { after(err) }()
	}
	var f raft.Future
	if to == "" {
		f = g.r.LeadershipTransfer()
	} else {
		f = g.r.LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(to))
	}
	if err := f.Error(); err != nil {
		return err
	}
	g.AwaitOtherLeader(time.Second)
	return nil
}

// AwaitOtherLeader is cluster.Group's, on the in-process raft.
func (g testGroup) AwaitOtherLeader(timeout time.Duration) string {
	obs := make(chan raft.Observation, 4)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	g.r.RegisterObserver(o)
	defer g.r.DeregisterObserver(o)
	bound := time.NewTimer(timeout)
	defer bound.Stop()
	for {
		if l := g.Leader(); l != "" && l != g.n.name {
			return l
		}
		select {
		case <-obs:
		case <-bound.C:
			return ""
		case <-g.n.quit:
			return ""
		}
	}
}
func (g testGroup) Replicas() []Replica { return nil }

// wire releases the node's state machines (see wired).
func (nd *testNode) wire() { nd.wiredOnce.Do(func() { close(nd.wired) }) }

// gatedFSM is an engine FSM that applies nothing before its node is
// wired.
type gatedFSM struct {
	raft.BatchingFSM
	wired <-chan struct{}
}

func (f gatedFSM) Apply(l *raft.Log) any {
	<-f.wired
	return f.BatchingFSM.Apply(l)
}
func (f gatedFSM) ApplyBatch(logs []*raft.Log) []any {
	<-f.wired
	return f.BatchingFSM.ApplyBatch(logs)
}
func (f gatedFSM) Restore(rc io.ReadCloser) error {
	<-f.wired
	return f.BatchingFSM.Restore(rc)
}

// startTestCluster starts n nodes with parts partitions, all sharing acc.
func startTestCluster(t *testing.T, n, parts int, acc *fakeAccount) []*testNode {
	t.Helper()
	fss := make([]vfs.FS, n)
	for i := range fss {
		fss[i] = vfs.NewMem()
	}
	return startTestClusterOn(t, fss, parts, acc, nil)
}

// startTestClusterOn starts one node on each of fss (whatever their
// stores already hold: a restart bootstraps nothing), with parts
// partitions, all sharing acc; tweak, if set, adjusts every engine's
// Options (before the engines start) and every group's raft.Config.
func startTestClusterOn(t *testing.T, fss []vfs.FS, parts int, acc *fakeAccount, tweak func(*Options, *raft.Config)) []*testNode {
	t.Helper()
	n := len(fss)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	nodes := make([]*testNode, n)
	for i := range nodes {
		st, err := store.Open(store.Options{Dir: "js", FS: fss[i]})
		if err != nil {
			t.Fatal(err)
		}
		mem := store.NewMem()
		o := Options{Store: st, Memory: mem, ServerVersion: "test", Log: quietLog(), Clustered: true}
		if tweak != nil {
			tweak(&o, nil)
		}
		e, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &testNode{name: names[i], e: e, st: st, quit: make(chan struct{}), wired: make(chan struct{})}
		t.Cleanup(func() { mem.Close() })
	}
	// Transports of each group, connected all to all.
	for g := 0; g <= parts; g++ {
		for _, nd := range nodes {
			_, tr := raft.NewInmemTransport(raft.ServerAddress(nd.name))
			nd.trans = append(nd.trans, tr)
		}
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					a.trans[g].Connect(raft.ServerAddress(b.name), b.trans[g])
				}
			}
		}
	}
	var servers []raft.Server
	for _, name := range names {
		servers = append(servers, raft.Server{ID: raft.ServerID(name), Address: raft.ServerAddress(name)})
	}
	for _, nd := range nodes {
		for g := 0; g <= parts; g++ {
			fsm, err := nd.e.FSM(uint16(g))
			if err != nil {
				t.Fatal(err)
			}
			conf := raft.DefaultConfig()
			conf.LocalID = raft.ServerID(nd.name)
			conf.HeartbeatTimeout, conf.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
			conf.LeaderLeaseTimeout, conf.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
			conf.SnapshotThreshold = 1 << 30
			conf.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
			notify := make(chan bool, 16)
			conf.NotifyCh = notify
			conf.NoSnapshotRestoreOnStart, conf.RestoreCommittedLogs, conf.BatchApplyCh = true, true, true
			if tweak != nil {
				tweak(nil, conf)
			}
			rl, err := nd.st.RaftLog(uint16(g))
			if err != nil {
				t.Fatal(err)
			}
			logs, err := rl.Cached(store.LogCacheEntries, store.LogCacheBytes)
			if err != nil {
				t.Fatal(err)
			}
			r, err := raft.NewRaft(conf, gatedFSM{fsm, nd.wired}, logs, rl, nd.st.SnapshotStore(uint16(g)), nd.trans[g])
			if err != nil {
				t.Fatal(err)
			}
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				t.Fatal(err)
			}
			nd.groups = append(nd.groups, r)
			nd.wg.Add(1)
			go func(g uint16, e *Engine) {
				defer nd.wg.Done()
				for {
					select {
					case v := <-notify:
						if gate := nd.gate.Load(); gate != nil {
							select {
							case <-*gate:
							case <-nd.quit:
								return
							}
						}
						e.LeaderChanged(g, v)
					case <-nd.quit:
						return
					}
				}
			}(uint16(g), nd.e)
		}
	}
	byName := map[string]*testNode{}
	for _, nd := range nodes {
		byName[nd.name] = nd
	}
	for _, nd := range nodes {
		nd.peers = byName
		if err := nd.e.StartCluster(&testRepl{n: nd, peers: names}); err != nil {
			t.Fatal(err)
		}
		nd.wire()
		if err := nd.e.EnableAccount(acc); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.stop()
		}
	})
	return nodes
}

// stop shuts the node down as a crash would look to the others.
func (nd *testNode) stop() {
	select {
	case <-nd.quit:
		return
	default:
	}
	nd.wire() // a node stopped before it was wired must not hold raft's shutdown
	for _, r := range nd.groups {
		_ = r.Shutdown().Error()
	}
	close(nd.quit)
	nd.wg.Wait()
	nd.e.Close()
	nd.st.Close()
}

// waitFor polls cond until it holds or the deadline passes.
func waitForCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// streamDigest is every record of stream id in st, keys and values, in
// order: equal digests mean byte-identical replicas. A store that does not
// hold the stream (yet: a follower that has not applied its create) has
// the digest "absent", which no store holding it has.
func streamDigest(t *testing.T, st *store.Store, id uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := st.LoadStream(id); errors.Is(err, store.ErrNotFound) {
		return []byte("absent")
	}
	err := st.ScanMsgs(id, 0, ^uint64(0), func(m *store.Message) error {
		fmt.Fprintf(&buf, "%d %s %d %x %x;", m.Seq, m.Subject, m.Time, m.Header, m.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.LoadStream(id)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&buf, "state %+v", info.State)
	return buf.Bytes()
}

// waitClusterReady waits until the meta group and every partition have a
// leader that has loaded them.
func waitClusterReady(t *testing.T, nodes []*testNode) {
	t.Helper()
	waitForCond(t, "every group led", func() bool {
		meta := false
		for _, nd := range nodes {
			meta = meta || nd.e.cl.metaLeader()
		}
		if !meta {
			return false
		}
		for g := 1; g < len(nodes[0].groups); g++ {
			if leaderOf(nodes, uint16(g)) == nil {
				return false
			}
		}
		return true
	})
}

// publishOnce publishes with a message id until it is acknowledged: a
// publish whose entry's fate became unknown (leadership moved again) gets
// no answer, and the client sends it again, as nats.go's users do.
func publishOnce(t *testing.T, acc *fakeAccount, subj, id string) api.PubAckResponse {
	t.Helper()
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: " + id + "\r\n\r\n")
	for try := 0; try < 10; try++ {
		b, ok := acc.tryRequest(subj, hdr, []byte(id), 2*time.Second)
		if !ok || len(b) == 0 {
			// No answer (fate unknown), or no responders (not stored).
			t.Logf("publish %s: not acknowledged, sending again", id)
			continue
		}
		var ack api.PubAckResponse
		if err := json.Unmarshal(b, &ack); err != nil {
			t.Fatal(err)
		}
		return ack
	}
	t.Fatalf("publish %s: never acknowledged", id)
	return api.PubAckResponse{}
}

// waitAssigned waits until every node's catalog holds the stream, and
// returns its assignment.
func waitAssigned(t *testing.T, nodes []*testNode, account, name string) *assignment {
	t.Helper()
	var asg *assignment
	waitForCond(t, name+" in every catalog", func() bool {
		for _, nd := range nodes {
			if asg = nd.e.cl.catalog.lookup(account, name); asg == nil {
				return false
			}
		}
		return true
	})
	return asg
}

// createR3 creates R3 stream name on subject in acc's account and waits
// until every node's catalog has it. A node that has not heard from the
// new meta leader yet may say 10008 first, as nats-server does; a client
// asks again.
func createR3(t *testing.T, acc *fakeAccount, nodes []*testNode, name, subject string) *assignment {
	t.Helper()
	for try := 0; ; try++ {
		var resp api.StreamCreateResponse
		acc.apiCall(t, "$JS.API.STREAM.CREATE."+name, api.StreamConfig{Name: name, Subjects: []string{subject}, Replicas: 3}, &resp)
		if resp.Error == nil {
			break
		}
		if resp.Error.ErrCode != api.CodeClusterNotAvailable || try == 10 {
			t.Fatalf("create %s: %v", name, resp.Error)
		}
	}
	return waitAssigned(t, nodes, acc.Name(), name)
}

// without is nodes less skip, in order.
func without(nodes []*testNode, skip *testNode) []*testNode {
	var out []*testNode
	for _, nd := range nodes {
		if nd != skip {
			out = append(out, nd)
		}
	}
	return out
}

// leaderOf is the node leading group g, or nil.
func leaderOf(nodes []*testNode, g uint16) *testNode {
	for _, nd := range nodes {
		select {
		case <-nd.quit:
			continue
		default:
		}
		if nd.groups[g].State() == raft.Leader && nd.e.cl.partition(g) != nil {
			return nd
		}
	}
	return nil
}

// TestClusterReplicatesAndFailsOver creates an R3 stream through the meta
// group, publishes through its partition's leader, checks that every
// replica holds byte-identical records, stops the leader and keeps
// publishing on the new one without losing or reusing a sequence.
func TestClusterReplicatesAndFailsOver(t *testing.T) {
	for _, storage := range []api.StorageType{api.FileStorage, api.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) { testReplicatesAndFailsOver(t, storage) })
	}
}

// testReplicatesAndFailsOver is TestClusterReplicatesAndFailsOver for one
// storage type. A replicated memory stream lives in its partition like a
// file one (replicated, and so on every member's disk); its usage counts
// against memory limits.
func testReplicatesAndFailsOver(t *testing.T, storage api.StorageType) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.ORDERS", api.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: storage}, &resp)
	if resp.Error != nil {
		t.Fatalf("create: %v", resp.Error)
	}
	if resp.Cluster == nil || resp.Cluster.Leader == "" {
		t.Fatalf("create reply has no cluster leader: %+v", resp.Cluster)
	}
	asg := waitAssigned(t, nodes, "A", "ORDERS")
	if asg.group() == 0 {
		t.Fatalf("catalog assignment %+v", asg)
	}
	g := asg.group()
	for i := 1; i <= 50; i++ {
		ack := publishOnce(t, acc, "orders.new", fmt.Sprintf("m%d", i))
		if ack.Error != nil || ack.PubAck == nil || ack.PubAck.Sequence != uint64(i) {
			t.Fatalf("publish %d: %+v %v", i, ack.PubAck, ack.Error)
		}
	}
	// Every replica applies what its leader acknowledged.
	first := leaderOf(nodes, g)
	want := streamDigest(t, first.st, asg.ID)
	for _, nd := range nodes {
		waitForCond(t, nd.name+" caught up", func() bool {
			return bytes.Equal(streamDigest(t, nd.st, asg.ID), want)
		})
	}
	first.stop()
	waitForCond(t, "a new partition leader", func() bool { return leaderOf(nodes, g) != nil })
	for i := 51; i <= 60; i++ {
		ack := publishOnce(t, acc, "orders.new", fmt.Sprintf("m%d", i))
		if ack.Error != nil || ack.PubAck == nil || ack.PubAck.Sequence != uint64(i) {
			t.Fatalf("publish %d after failover: %+v %v", i, ack.PubAck, ack.Error)
		}
	}
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.ORDERS", nil, &info)
	if info.Error != nil || info.State.Msgs != 60 || info.State.LastSeq != 60 {
		t.Fatalf("info after failover: %+v %v", info.State, info.Error)
	}
	second := leaderOf(nodes, g)
	want = streamDigest(t, second.st, asg.ID)
	for _, nd := range nodes {
		if nd == first {
			continue
		}
		waitForCond(t, nd.name+" caught up after failover", func() bool {
			return bytes.Equal(streamDigest(t, nd.st, asg.ID), want)
		})
	}
}

// TestClusterConsumerContinuesOnNewLeader acknowledges part of a stream
// through a durable consumer, stops the partition's leader, and checks
// that the consumer lives on under the new leader from its ack floor:
// nothing acknowledged comes again, nothing unacknowledged is skipped.
func TestClusterConsumerContinuesOnNewLeader(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.S", api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}, &resp)
	if resp.Error != nil {
		t.Fatalf("create: %v", resp.Error)
	}
	for i := 1; i <= 20; i++ {
		if ack := publishOnce(t, acc, "s.x", fmt.Sprint(i)); ack.Error != nil {
			t.Fatalf("publish %d: %v", i, ack.Error)
		}
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, AckWait: time.Minute})
	got := inbox(t, acc, "_INBOX.pull")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.pull", nil, []byte(`{"batch":10}`))
	for i := 1; i <= 10; i++ {
		d := next(t, got)
		if d.data != fmt.Sprint(i) {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		// A double ack: answered once the ack is recorded.
		acc.request(t, d.reply, nil, []byte("+ACK"))
	}
	var info api.ConsumerInfoResponse
	waitForCond(t, "ack floor 10 replicated", func() bool {
		acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &info)
		return info.AckFloor.Stream == 10
	})
	asg := waitAssigned(t, nodes, "A", "S")
	first := leaderOf(nodes, asg.group())
	// The consumer's state reaches the replicas with the partition's
	// entries; wait for every member to hold what the leader wrote.
	want := streamDigest(t, first.st, asg.ID)
	for _, nd := range nodes {
		waitForCond(t, nd.name+" caught up", func() bool { return bytes.Equal(streamDigest(t, nd.st, asg.ID), want) })
	}
	first.stop()
	waitForCond(t, "a new partition leader", func() bool { return leaderOf(nodes, asg.group()) != nil })
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &info)
	if info.Error != nil || info.AckFloor.Stream != 10 {
		t.Fatalf("consumer on the new leader: floor %+v, err %v", info.AckFloor, info.Error)
	}
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.pull", nil, []byte(`{"batch":10}`))
	for i := 11; i <= 20; i++ {
		if d := next(t, got); d.data != fmt.Sprint(i) {
			t.Fatalf("after failover, delivery %d: %+v", i, d)
		}
	}
}

// TestClusterInfoDuringPublishes: stream infos asked while hundreds of
// publishes are in flight on a replicated partition, each on a new
// leader (whose subject index is built on first use, a read through the
// apply step). The apply step waits there for every entry in flight to
// commit, holding the stream's lock; the acknowledgements of those
// entries take that lock, so they must not hold up the commits: every
// info is answered and every publish acknowledged.
func TestClusterInfoDuringPublishes(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 1, acc)
	waitClusterReady(t, nodes)
	asg := createR3(t, acc, nodes, "S", "s.>")
	var acked atomic.Int64
	unsub, _ := acc.SubscribeInternal("_INBOX.acks.>", func(_, _, _, msg []byte) {
		if bytes.Contains(msg, []byte(`"seq"`)) {
			acked.Add(1)
		}
	})
	t.Cleanup(unsub)
	const perRound, rounds = 300, 4
	for round := range rounds {
		l := leaderOf(nodes, asg.group())
		for i := range perRound {
			acc.Publish(fmt.Sprintf("s.%d", i%7), fmt.Sprintf("_INBOX.acks.%d.%d", round, i), nil, []byte("x"))
		}
		var info api.StreamInfoResponse
		acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
		if info.Error != nil {
			t.Fatalf("round %d: info: %v", round, info.Error)
		}
		waitForCond(t, "every publish acknowledged", func() bool { return acked.Load() >= int64((round+1)*perRound) })
		if err := l.groups[asg.group()].LeadershipTransfer().Error(); err != nil {
			t.Fatalf("round %d: stepdown: %v", round, err)
		}
		waitForCond(t, "a new leader", func() bool {
			n := leaderOf(nodes, asg.group())
			return n != nil && n != l
		})
	}
}

// A node lets stepdown requests move a partition it leads stepdownBurst
// times, then once per stepdownRefill; a move that fails is refunded.
func TestMoveBudget(t *testing.T) {
	var b moveBudget
	t0 := time.Unix(1000, 0)
	for i := range stepdownBurst {
		if w := b.take(1, t0); w != 0 {
			t.Fatalf("take %d within the burst: wait %v", i, w)
		}
	}
	if w := b.take(1, t0); w != stepdownRefill {
		t.Fatalf("past the burst: wait %v, want %v", w, stepdownRefill)
	}
	if w := b.take(2, t0); w != 0 {
		t.Fatalf("another partition's budget is its own: wait %v", w)
	}
	if w := b.take(1, t0.Add(stepdownRefill/4)); w != stepdownRefill*3/4 {
		t.Fatalf("a quarter refilled: wait %v", w)
	}
	if w := b.take(1, t0.Add(stepdownRefill)); w != 0 {
		t.Fatalf("refilled: wait %v", w)
	}
	b.refund(1) // that move failed
	if w := b.take(1, t0.Add(stepdownRefill)); w != 0 {
		t.Fatalf("refunded: wait %v", w)
	}
	if w := b.take(1, t0.Add(stepdownRefill)); w == 0 {
		t.Fatal("spent again, yet a move was allowed")
	}
}

// One account asking for stepdowns in a loop moves its stream's partition,
// which carries other accounts' streams too, only as often as the nodes'
// budgets allow; the refusal says when to ask again.
func TestClusterStepdownStormIsBounded(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 1, acc)
	waitClusterReady(t, nodes)
	asg := createR3(t, acc, nodes, "S", "s.>")
	moved, refused := 0, 0
	for range 3*stepdownBurst + 4 {
		l := leaderOf(nodes, asg.group())
		for l == nil {
			waitForCond(t, "a leader", func() bool { return leaderOf(nodes, asg.group()) != nil })
			l = leaderOf(nodes, asg.group())
		}
		var resp api.SuccessResponse
		acc.apiCall(t, "$JS.API.STREAM.LEADER.STEPDOWN.S", nil, &resp)
		switch {
		case resp.Error == nil:
			moved++
			waitForCond(t, "the partition moved", func() bool {
				n := leaderOf(nodes, asg.group())
				return n != nil && n != l
			})
		case strings.Contains(resp.Error.Description, "try again in"):
			refused++
		default:
			t.Fatalf("stepdown: %v", resp.Error)
		}
	}
	if moved > 3*stepdownBurst || refused == 0 {
		t.Fatalf("%d moves and %d refusals; at most %d moves within the budgets", moved, refused, 3*stepdownBurst)
	}
}

// A restore's stream is made by its restore, never empty: a committed
// restore placement whose request is gone (its client gave up, or it was
// answered elsewhere) is forgotten by the node that would hold it,
// instead of becoming an empty stream that passes for the backup.
func TestClusterRestoreNeverMaterialized(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	ml := waitMetaLeader(t, nodes)
	c, a := ml.e.cl, ml.e.account("A")
	cfg, aerr := a.restoreConfig([]byte(`{"config":{"name":"R","subjects":["r"],"num_replicas":3}}`), "R")
	if aerr != nil {
		t.Fatal(aerr)
	}
	c.proposeMu.Lock()
	asg := c.placeNew(a, "R", cfg)
	asg.Restore = true
	err := c.propose(&metaEntry{Op: metaCreate, Asg: asg})
	c.proposeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		waitForCond(t, nd.name+"'s catalog to forget the restore", func() bool {
			cur := nd.e.cl.catalog.lookup("A", "R")
			return nd.e.cl.catalog.lastID(asg.group()) >= asg.ID && cur == nil
		})
		if s := nd.e.account("A").lookup("R"); s != nil {
			t.Errorf("%s holds stream R", nd.name)
		}
	}
	wantStreamNotFound(t, acc, "R")
}

// A partition's new leader makes the streams the catalog assigns it and
// it lacks (materialize); one whose catalog delete was served before the
// create began (the stream was not there to delete) is removed once made,
// so no node holds a stream the catalog no longer lists.
func TestClusterMaterializeAfterDelete(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	ml := waitMetaLeader(t, nodes)
	cfg, aerr := ml.e.account("A").checkStreamConfig(&api.StreamConfigRequest{StreamConfig: api.StreamConfig{Name: "Z", Subjects: []string{"z"}, Replicas: 3}}, "Z", true, false)
	if aerr != nil {
		t.Fatal(aerr)
	}
	// Assigned, never committed: as the catalog stands once the stream's
	// delete has applied.
	ml.e.cl.proposeMu.Lock()
	asg := ml.e.cl.placeNew(ml.e.account("A"), "Z", cfg)
	ml.e.cl.proposeMu.Unlock()
	holder := leaderOf(nodes, asg.group())
	if holder == nil {
		t.Fatalf("no leader for partition %d", asg.group())
	}
	holder.e.cl.materialize(asg)
	if s := holder.e.account("A").lookup("Z"); s != nil {
		t.Fatal("the stream the catalog no longer lists stayed")
	}
	wantStreamNotFound(t, acc, "Z")
}

// wantStreamNotFound fails unless stream name's info is "not found".
func wantStreamNotFound(t *testing.T, acc *fakeAccount, name string) {
	t.Helper()
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO."+name, nil, &info)
	if info.Error == nil || info.Error.ErrCode != api.CodeStreamNotFound {
		t.Fatalf("info of stream %s: %+v", name, info)
	}
}

// materialize makes a stream from the assignment it was handed; one whose
// catalog update was served before the create began (the stream was not
// there to update) is updated once made, so the stream carries the
// catalog's config.
func TestClusterMaterializeAfterUpdate(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	var cr api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.U", api.StreamConfig{Name: "U", Subjects: []string{"u"}, Replicas: 3, MaxMsgs: 10}, &cr)
	if cr.Error != nil {
		t.Fatal(cr.Error)
	}
	old := *waitAssigned(t, nodes, "A", "U")
	var ur api.StreamUpdateResponse
	acc.apiCall(t, "$JS.API.STREAM.UPDATE.U", api.StreamConfig{Name: "U", Subjects: []string{"u"}, Replicas: 3, MaxMsgs: 20}, &ur)
	if ur.Error != nil {
		t.Fatal(ur.Error)
	}
	holder := leaderOf(nodes, old.group())
	ha := holder.e.account("A")
	waitForCond(t, "the update in the catalog", func() bool {
		cur := holder.e.cl.catalog.lookup("A", "U")
		return cur != nil && cur.Config.MaxMsgs == 20
	})
	// Gone from the partition, kept by the catalog: as a partition
	// lacks a stream when its create entry's serve was lost.
	if resp, ok := ha.streamDelete(apiRequest{a: ha}, "U").(*api.SuccessResponse); !ok || !resp.Success {
		t.Fatalf("local delete: %+v", resp)
	}
	holder.e.cl.materialize(&old)
	s := ha.lookup("U")
	if s == nil || s.config().MaxMsgs != 20 {
		t.Fatalf("made from the assignment before the update: %+v", s)
	}
}
