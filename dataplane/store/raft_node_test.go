package store

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// kvFSM is the FSM shape the store is built for: each command's writes and
// the applied index go into one batch, committed without fsync (the raft
// log is the durable copy); configuration entries are recorded with
// PutAppliedConfig; snapshots are the state in place. A command "k=v"
// stores v under the meta catalog key "kv/k" (group 0's range) or, for a
// partition, as a stream's name.
type kvFSM struct {
	s     *Store
	group uint16

	mu       sync.Mutex
	applied  uint64
	restores int
	changed  chan struct{} // signalled on every change of applied
}

func newKVFSM(t testing.TB, s *Store, group uint16) *kvFSM {
	f := &kvFSM{s: s, group: group, changed: make(chan struct{}, 1)}
	// Where the FSM starts: raft replays only the entries after it.
	var err error
	f.applied, _, err = s.Applied(group)
	must(t, err)
	return f
}

// kvKey is where k lives: in the meta catalog for group 0, as a consumer
// of the partition's first stream otherwise.
func kvKey(group uint16, k []byte) []byte {
	if group == 0 {
		return append([]byte{prefixMetaCat, 'k', 'v', '/'}, k...)
	}
	return consumerKey(nil, uint64(group)<<partitionShift+1, string(k), consumerConfig)
}

func (f *kvFSM) ApplyBatch(logs []*raft.Log) []any {
	b := f.s.NewBatch()
	defer b.Close()
	var last uint64
	for _, l := range logs {
		switch l.Type {
		case raft.LogCommand:
			k, v, _ := bytes.Cut(l.Data, []byte("="))
			b.set(kvKey(f.group, k), v)
			b.PutApplied(f.group, l.Index, l.Term)
		case raft.LogConfiguration:
			b.PutAppliedConfig(f.group, l.Index, l.Term, raft.DecodeConfiguration(l.Data))
		}
		last = l.Index
	}
	if err := b.Commit(false); err != nil {
		panic(fmt.Sprintf("fsm commit: %v", err)) // a real FSM stops the group
	}
	f.setApplied(last)
	return make([]any, len(logs))
}

func (f *kvFSM) setApplied(i uint64) {
	f.mu.Lock()
	f.applied = i
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *kvFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// Snapshot has nothing to capture: the store is the snapshot, and every
// applied batch is committed before Apply returns.
func (f *kvFSM) Snapshot() (raft.FSMSnapshot, error) { return placeSnapshot{}, nil }

// Restore installs the received snapshot the sink verified, then reloads
// what the FSM keeps in memory.
func (f *kvFSM) Restore(rc io.ReadCloser) error {
	if err := f.s.RestoreSnapshot(f.group, rc); err != nil {
		return err
	}
	i, _, err := f.s.Applied(f.group)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.restores++
	f.mu.Unlock()
	f.setApplied(i)
	return nil
}

func (f *kvFSM) waitApplied(t testing.TB, index uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		got := f.applied
		f.mu.Unlock()
		if got >= index {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("group %d applied %d, waiting for %d", f.group, got, index)
		}
	}
}

type placeSnapshot struct{}

func (placeSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (placeSnapshot) Release()                             {}

// raftNode is one hashicorp/raft instance over a Store.
type raftNode struct {
	r   *raft.Raft
	fsm *kvFSM
}

func raftConfig(id string) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotInterval = time.Hour // snapshots are taken by the tests
	c.SnapshotThreshold = 1 << 30
	c.TrailingLogs = 4
	c.NoSnapshotRestoreOnStart = true
	c.RestoreCommittedLogs = true
	c.BatchApplyCh = true
	c.Logger = hclog.NewNullLogger()
	return c
}

func startRaftNode(t testing.TB, s *Store, group uint16, id string, trans raft.Transport, bootstrap bool) *raftNode {
	t.Helper()
	l := mustRaftLog(t, s, group)
	logs, err := l.Cached(64, 16<<10)
	must(t, err)
	snaps := s.SnapshotStore(group)
	conf := raftConfig(id)
	if bootstrap {
		had, err := raft.HasExistingState(logs, l, snaps)
		must(t, err)
		if had {
			t.Fatal("bootstrapping a node with state")
		}
		must(t, raft.BootstrapCluster(conf, logs, l, snaps, trans, raft.Configuration{Servers: []raft.Server{
			{Suffrage: raft.Voter, ID: conf.LocalID, Address: trans.LocalAddr()},
		}}))
	}
	fsm := newKVFSM(t, s, group)
	r, err := raft.NewRaft(conf, fsm, logs, l, snaps, trans)
	must(t, err)
	return &raftNode{r: r, fsm: fsm}
}

func (n *raftNode) waitLeader(t testing.TB) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for n.r.State() != raft.Leader {
		select {
		case <-n.r.LeaderCh():
		case <-deadline:
			t.Fatalf("no leader: %v", n.r.State())
		}
	}
}

func (n *raftNode) apply(t testing.TB, from, to int) uint64 {
	t.Helper()
	var last raft.ApplyFuture
	for i := from; i <= to; i++ {
		last = n.r.Apply([]byte(fmt.Sprintf("k%03d=v%d", i, i)), 5*time.Second)
	}
	must(t, last.Error())
	return last.Index()
}

func (n *raftNode) stop(t testing.TB) { must(t, n.r.Shutdown().Error()) }

func wantKV(t testing.TB, s *Store, group uint16, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		k := kvKey(group, []byte(fmt.Sprintf("k%03d", i)))
		var got []byte
		err := s.eng.get(k, func(v []byte) error {
			p, err := unseal(k, v)
			got = bytes.Clone(p)
			return err
		})
		if err != nil || string(got) != fmt.Sprintf("v%d", i) {
			t.Fatalf("entry %d: %q, %v", i, got, err)
		}
	}
}

// TestRaftNodeRestart runs hashicorp/raft on one node over the store:
// applies, snapshots (compacting the log), applies more, restarts over the
// same store (cleanly and after a power loss that keeps only synced data)
// and checks that no committed entry is lost and the group carries on.
func TestRaftNodeRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := mustOpen(t, fs)
			_, trans := raft.NewInmemTransport("n1")
			n := startRaftNode(t, s, 0, "n1", trans, true)
			n.waitLeader(t)
			n.apply(t, 1, 50)
			must(t, n.r.Snapshot().Error())
			last := n.apply(t, 51, 80)
			first, _ := mustRaftLog(t, s, 0).FirstIndex()
			if first <= 1 {
				t.Fatalf("log not compacted by the snapshot: first index %d", first)
			}
			reopenFS := vfs.FS(fs)
			if crash {
				// Everything raft acknowledged was fsynced by StoreLogs; the
				// FSM's batches may be lost and are replayed from the log.
				reopenFS = fs.CrashClone(vfs.CrashCloneCfg{})
			}
			n.stop(t)
			must(t, s.Close())

			s = mustOpen(t, reopenFS)
			defer s.Close()
			l := mustRaftLog(t, s, 0)
			if ok, _ := s.HasState(0); !ok {
				t.Fatal("no raft state after restart")
			}
			if c, err := l.GetCommitIndex(); err != nil || c == 0 {
				t.Fatalf("commit index %d, %v", c, err)
			}
			_, trans = raft.NewInmemTransport("n1")
			n = startRaftNode(t, s, 0, "n1", trans, false)
			defer n.stop(t)
			n.waitLeader(t)
			must(t, n.r.Barrier(5*time.Second).Error())
			n.fsm.waitApplied(t, last)
			wantKV(t, s, 0, 1, 80)
			last = n.apply(t, 81, 90)
			wantKV(t, s, 0, 81, 90)
			if i, _, err := s.Applied(0); err != nil || i < last {
				t.Fatalf("applied %d, %v; last applied entry %d", i, err, last)
			}
			if conf := n.r.GetConfiguration(); conf.Error() != nil || len(conf.Configuration().Servers) != 1 {
				t.Fatalf("configuration after restart: %+v, %v", conf.Configuration(), conf.Error())
			}
		})
	}
}

// TestRaftNodeRestartKeepsMembership: a node whose FSM lost what it
// applied (its batches are not synced) while the log kept the commit
// index past the bootstrap configuration comes back with its membership,
// so it leads its one-node group again. Before the commit index stopped
// short of unapplied configurations, raft replayed the entries up to it,
// looked for the membership only after them, and started with none.
func TestRaftNodeRestartKeepsMembership(t *testing.T) {
	s := NewMem()
	defer s.Close()
	_, trans := raft.NewInmemTransport("n1")
	l := mustRaftLog(t, s, 0)
	must(t, raft.BootstrapCluster(raftConfig("n1"), l, l, s.SnapshotStore(0), trans, raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "n1", Address: trans.LocalAddr()},
	}}))
	// Entries 2 and 3 committed, as their StoreLogs recorded; no applied
	// state, as after a kill that lost the FSM's batches.
	must(t, l.StageCommitIndex(3))
	must(t, l.StoreLogs([]*raft.Log{
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("k001=v1")},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte("k002=v2")},
	}))
	if i, _, err := s.Applied(0); err != nil || i != 0 {
		t.Fatalf("applied %d, %v before the start", i, err)
	}
	n := startRaftNode(t, s, 0, "n1", trans, false)
	defer n.stop(t)
	if conf := n.r.GetConfiguration(); conf.Error() != nil || len(conf.Configuration().Servers) != 1 {
		t.Fatalf("configuration after restart: %+v, %v", conf.Configuration(), conf.Error())
	}
	n.waitLeader(t)
	n.fsm.waitApplied(t, 3)
	wantKV(t, s, 0, 1, 2)
}

// TestRaftNodeInstallsSnapshot adds a member with an empty store to a group
// whose leader has compacted its log: the leader streams its state (Open),
// the new member installs it (Create, Close) and catches up from the log.
func TestRaftNodeInstallsSnapshot(t *testing.T) {
	const group = 1
	s1, s2 := NewMem(), mustOpen(t, vfs.NewMem())
	defer s1.Close()
	defer s2.Close()
	// Partition 1's data beside the FSM's: streams of the partition and an
	// R1 stream, which the install must not touch.
	for _, s := range []*Store{s1, s2} {
		b := s.NewBatch()
		b.PutStream(StreamMeta{ID: 5, Name: fmt.Sprintf("r1-%p", s)})
		must(t, b.Commit(true))
		b.Close()
	}
	b := s1.NewBatch()
	b.PutStream(StreamMeta{ID: 1<<48 + 3, Name: "p1"})
	b.PutMsg(1<<48+3, msg(1, "a", "x"))
	must(t, b.Commit(true))
	b.Close()
	b = s2.NewBatch()
	b.PutStream(StreamMeta{ID: 1<<48 + 4, Name: "stale"})
	must(t, b.Commit(true))
	b.Close()

	a1, t1 := raft.NewInmemTransport("n1")
	a2, t2 := raft.NewInmemTransport("n2")
	t1.Connect(a2, t2)
	t2.Connect(a1, t1)
	n1 := startRaftNode(t, s1, group, "n1", t1, true)
	defer n1.stop(t)
	n1.waitLeader(t)
	n1.apply(t, 1, 40)
	must(t, n1.r.Snapshot().Error())
	n1.apply(t, 41, 60)
	if first, _ := mustRaftLog(t, s1, group).FirstIndex(); first <= 2 {
		t.Fatalf("leader's log not compacted: first index %d", first)
	}

	n2 := startRaftNode(t, s2, group, "n2", t2, false)
	defer n2.stop(t)
	must(t, n1.r.AddNonvoter("n2", a2, 0, 5*time.Second).Error())
	last := n1.apply(t, 61, 70)
	n2.fsm.waitApplied(t, last)
	n2.fsm.mu.Lock()
	restores := n2.fsm.restores
	n2.fsm.mu.Unlock()
	if restores != 1 {
		t.Fatalf("%d restores on the new member, want 1 (a snapshot install)", restores)
	}
	// The partition's ranges are the leader's, and so is the applied state.
	n1.fsm.waitApplied(t, last)
	p1, p2 := groupDump(t, s1, group), groupDump(t, s2, group)
	if !sameDump(p1, p2) {
		t.Fatalf("partition differs: %d records on the leader, %d on the new member", len(p1), len(p2))
	}
	if info, err := s2.LoadStream(5); err != nil || info.Name != fmt.Sprintf("r1-%p", s2) {
		t.Fatalf("R1 stream on the new member: %+v, %v", info, err)
	}
	if _, err := s2.LoadStream(1<<48 + 4); err == nil {
		t.Fatal("stale partition stream survived the install")
	}
	wantKV(t, s2, group, 1, 70)
}
