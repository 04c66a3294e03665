package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

func mustRaftLog(t testing.TB, s *Store, group uint16) *RaftLog {
	t.Helper()
	l, err := s.RaftLog(group)
	if err != nil {
		t.Fatalf("raft log %d: %v", group, err)
	}
	return l
}

// raftEntries returns entries [from, to] with every field set.
func raftEntries(from, to uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		e := &raft.Log{
			Index:      i,
			Term:       i/4 + 1,
			Type:       raft.LogType(i % 6),
			Data:       bytes.Repeat([]byte{byte(i)}, size),
			AppendedAt: time.Unix(1700000000, int64(i)).UTC(),
		}
		if i%3 == 0 {
			e.Extensions = []byte(fmt.Sprintf("ext-%d", i))
		}
		out = append(out, e)
	}
	return out
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func wantBounds(t testing.TB, l *RaftLog, first, last uint64) {
	t.Helper()
	f, err := l.FirstIndex()
	must(t, err)
	la, err := l.LastIndex()
	must(t, err)
	if f != first || la != last {
		t.Fatalf("group %d bounds [%d, %d], want [%d, %d]", l.Group(), f, la, first, last)
	}
}

func wantEntries(t testing.TB, l *RaftLog, want []*raft.Log) {
	t.Helper()
	for _, w := range want {
		var got raft.Log
		if err := l.GetLog(w.Index, &got); err != nil {
			t.Fatalf("get %d: %v", w.Index, err)
		}
		if !sameLog(&got, w) {
			t.Fatalf("entry %d: got %+v, want %+v", w.Index, got, *w)
		}
	}
}

// TestRaftLogContract is raft's LogStore contract (what its own store
// tests check) plus what IsMonotonic promises, on both engines.
func TestRaftLogContract(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		l := mustRaftLog(t, h.s, 1)
		if l2 := mustRaftLog(t, h.s, 1); l2 != l {
			t.Fatal("two RaftLogs for one group")
		}
		if !l.IsMonotonic() {
			t.Fatal("not monotonic")
		}
		wantBounds(t, l, 0, 0)
		var e raft.Log
		if err := l.GetLog(1, &e); err != raft.ErrLogNotFound {
			t.Fatalf("get from empty log: %v", err)
		}
		all := raftEntries(1, 20, 100)
		must(t, l.StoreLog(all[0]))
		must(t, l.StoreLogs(all[1:10]))
		must(t, l.StoreLogs(all[10:]))
		wantBounds(t, l, 1, 20)
		wantEntries(t, l, all)
		// Entries with nothing optional survive as they were.
		bare := &raft.Log{Index: 21, Term: 9}
		must(t, l.StoreLog(bare))
		wantEntries(t, l, []*raft.Log{bare})
		// A gap, a repeat and a non-consecutive batch are refused.
		for _, bad := range [][]*raft.Log{
			raftEntries(23, 23, 1),
			raftEntries(21, 21, 1),
			{raftEntries(22, 22, 1)[0], raftEntries(24, 24, 1)[0]},
		} {
			if err := l.StoreLogs(bad); err == nil {
				t.Fatalf("stored %d entries from %d after 21", len(bad), bad[0].Index)
			}
		}
		wantBounds(t, l, 1, 21)
		// Another group is another log.
		other := mustRaftLog(t, h.s, 2)
		wantBounds(t, other, 0, 0)
		must(t, other.StoreLogs(raftEntries(5, 6, 10)))
		wantBounds(t, other, 5, 6)
		// Compaction from the head, a conflicting tail cut, then all.
		must(t, l.DeleteRange(1, 5))
		wantBounds(t, l, 6, 21)
		if err := l.GetLog(5, &e); err != raft.ErrLogNotFound {
			t.Fatalf("deleted entry: %v", err)
		}
		must(t, l.DeleteRange(18, 21))
		wantBounds(t, l, 6, 17)
		must(t, l.StoreLogs(raftEntries(18, 19, 7)))
		wantEntries(t, l, raftEntries(18, 19, 7))
		wantEntries(t, l, all[5:17])
		if h.reopen() {
			l = mustRaftLog(t, h.s, 1)
			wantBounds(t, l, 6, 19)
			wantEntries(t, l, all[5:17])
		}
		must(t, l.DeleteRange(6, 19))
		wantBounds(t, l, 0, 0)
		// An empty log takes any index (raft after installing a snapshot).
		must(t, l.StoreLogs(raftEntries(100, 101, 1)))
		wantBounds(t, l, 100, 101)
		must(t, l.DeleteRange(0, ^uint64(0)))
		wantBounds(t, l, 0, 0)
		wantBounds(t, mustRaftLog(t, h.s, 2), 5, 6)
	})
}

func TestRaftStableStore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		l := mustRaftLog(t, h.s, 3)
		// raft tells a missing key by its text.
		if _, err := l.Get([]byte("LastVoteCand")); err == nil || err.Error() != "not found" {
			t.Fatalf("missing key: %v", err)
		}
		if _, err := l.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
			t.Fatalf("missing integer: %v", err)
		}
		must(t, l.Set([]byte("LastVoteCand"), []byte("n2")))
		must(t, l.SetUint64([]byte("CurrentTerm"), 7))
		must(t, mustRaftLog(t, h.s, 4).SetUint64([]byte("CurrentTerm"), 99))
		if h.reopen() {
			l = mustRaftLog(t, h.s, 3)
		}
		if v, err := l.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
			t.Fatalf("vote: %q, %v", v, err)
		}
		if v, err := l.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
			t.Fatalf("term: %d, %v", v, err)
		}
		// The stable records are raft state: a group with only a term has
		// state.
		if ok, err := h.s.HasState(4); err != nil || !ok {
			t.Fatalf("group with a term: HasState %v, %v", ok, err)
		}
	})
}

func TestRaftCommitIndex(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		l := mustRaftLog(t, h.s, 1)
		if c, err := l.GetCommitIndex(); err != nil || c != 0 {
			t.Fatalf("fresh commit index %d, %v", c, err)
		}
		must(t, l.StageCommitIndex(3))
		if c, _ := l.GetCommitIndex(); c != 0 {
			t.Fatalf("staged commit index visible before StoreLogs: %d", c)
		}
		must(t, l.StoreLogs(commands(raftEntries(1, 5, 1))))
		if c, err := l.GetCommitIndex(); err != nil || c != 3 {
			t.Fatalf("commit index %d, %v", c, err)
		}
		// Never above the last entry.
		must(t, l.StageCommitIndex(9))
		must(t, l.StoreLogs(commands(raftEntries(6, 6, 1))))
		if c, _ := l.GetCommitIndex(); c != 6 {
			t.Fatalf("commit index %d, want clamped to 6", c)
		}
		must(t, l.DeleteRange(5, 6))
		if c, _ := l.GetCommitIndex(); c != 4 {
			t.Fatalf("commit index %d after the tail went, want 4", c)
		}
	})
}

// commands makes every entry a command.
func commands(es []*raft.Log) []*raft.Log {
	for _, e := range es {
		e.Type = raft.LogCommand
	}
	return es
}

// TestRaftCommitIndexStopsBeforeUnappliedConfig: the commit index
// handed to raft at start ends before the first configuration entry the
// applied state does not hold, so that raft's scan for the membership,
// which starts after it, sees that entry.
func TestRaftCommitIndexStopsBeforeUnappliedConfig(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		l := mustRaftLog(t, h.s, 1)
		es := commands(raftEntries(1, 8, 1))
		es[0].Type = raft.LogConfiguration // the bootstrap entry
		es[5].Type = raft.LogConfiguration // a membership change at 6
		must(t, l.StageCommitIndex(8))
		must(t, l.StoreLogs(es))
		want := func(what string, c uint64) {
			t.Helper()
			if got, err := l.GetCommitIndex(); err != nil || got != c {
				t.Fatalf("%s: commit index %d, %v; want %d", what, got, err, c)
			}
		}
		want("nothing applied", 0)
		b := h.s.NewBatch()
		b.PutAppliedConfig(1, 1, es[0].Term, raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "n1"}}})
		b.PutApplied(1, 3, es[2].Term)
		must(t, b.Commit(true))
		b.Close()
		want("applied up to 3 with the bootstrap membership", 5)
		b = h.s.NewBatch()
		b.PutAppliedConfig(1, 6, es[5].Term, raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "n1"}}})
		b.PutApplied(1, 6, es[5].Term)
		must(t, b.Commit(true))
		b.Close()
		want("applied past the membership change", 8)
	})
}

// TestRaftCorruptionDetected plants bad raft records behind the codec's
// back: every read reports ErrCorrupt, never an entry.
func TestRaftCorruptionDetected(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		l := mustRaftLog(t, h.s, 1)
		must(t, l.StoreLogs(raftEntries(1, 4, 50)))
		must(t, l.SetUint64([]byte("CurrentTerm"), 2))
		var e raft.Log
		for bit := range 8 {
			key := raftLogKey(nil, 1, 2)
			v := h.rawGet(key)
			orig := bytes.Clone(v)
			v[(bit*7)%len(v)] ^= 1 << bit
			h.rawSet(key, v)
			wantErr(t, l.GetLog(2, &e), ErrCorrupt)
			h.rawSet(key, orig)
		}
		// A valid entry under another index.
		h.rawSet(raftLogKey(nil, 1, 3), h.rawGet(raftLogKey(nil, 1, 4)))
		wantErr(t, l.GetLog(3, &e), ErrCorrupt)
		// A truncated entry.
		h.rawSet(raftLogKey(nil, 1, 4), []byte{1, 2})
		err := l.GetLog(4, &e)
		wantErr(t, err, ErrCorrupt)
		if !strings.Contains(err.Error(), "raft group 1 log entry 4") {
			t.Errorf("corruption error lacks context: %v", err)
		}
		must(t, l.GetLog(1, &e))
		key := raftStableKey(nil, 1, []byte("CurrentTerm"))
		v := h.rawGet(key)
		v[3] ^= 0x10
		h.rawSet(key, v)
		_, err = l.GetUint64([]byte("CurrentTerm"))
		wantErr(t, err, ErrCorrupt)
		h.rawSet(raftKey(nil, 1, raftKindApplied), []byte{9, 9, 9, 9, 9})
		_, _, err = h.s.Applied(1)
		wantErr(t, err, ErrCorrupt)
		_, err = h.s.SnapshotStore(1).List()
		wantErr(t, err, ErrCorrupt)
	})
}

// TestRaftCrashKeepsSynced appends and votes from several groups at once on
// a crash-simulating FS, crashes at a random moment (keeping unsynced data
// at random too), and checks every acknowledged entry and stable value is
// there, and that the log has no hole.
func TestRaftCrashKeepsSynced(t *testing.T) {
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := mustOpen(t, fs)
			const groups = 4
			var mu sync.Mutex
			acked := map[uint16]uint64{} // group -> last acknowledged index
			terms := map[uint16]uint64{}
			var stop atomic.Bool
			enough := make(chan struct{})
			var enoughOnce sync.Once
			var total atomic.Int64
			var wg sync.WaitGroup
			for g := uint16(1); g <= groups; g++ {
				wg.Go(func() {
					l := mustRaftLog(t, s, g)
					for i := uint64(1); !stop.Load(); i += 4 {
						if err := l.StoreLogs(raftEntries(i, i+3, 200)); err != nil {
							return
						}
						mu.Lock()
						acked[g] = i + 3
						mu.Unlock()
						if i%16 == 1 {
							if err := l.SetUint64([]byte("CurrentTerm"), i); err != nil {
								return
							}
							mu.Lock()
							terms[g] = i
							mu.Unlock()
						}
						if total.Add(4) >= int64(200*(round+1)) {
							enoughOnce.Do(func() { close(enough) })
						}
					}
				})
			}
			<-enough
			mu.Lock()
			wantLast := map[uint16]uint64{}
			wantTerm := map[uint16]uint64{}
			for g, v := range acked {
				wantLast[g] = v
			}
			for g, v := range terms {
				wantTerm[g] = v
			}
			mu.Unlock()
			rng := rand.New(rand.NewPCG(uint64(round), 7))
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: round * 30, RNG: rng})
			stop.Store(true)
			wg.Wait()
			_ = s.Close()

			s2 := mustOpen(t, crashed)
			defer s2.Close()
			for g := uint16(1); g <= groups; g++ {
				l := mustRaftLog(t, s2, g)
				first, _ := l.FirstIndex()
				last, err := l.LastIndex()
				must(t, err)
				// A group the crash caught before its first append may
				// be empty; any other starts at 1.
				if last < wantLast[g] || (last > 0 && first != 1) {
					t.Fatalf("group %d: log [%d, %d] after crash, %d acknowledged", g, first, last, wantLast[g])
				}
				wantEntries(t, l, raftEntries(1, last, 200))
				if wantTerm[g] != 0 {
					if v, err := l.GetUint64([]byte("CurrentTerm")); err != nil || v < wantTerm[g] {
						t.Fatalf("group %d: term %d, %v after crash, %d acknowledged", g, v, err, wantTerm[g])
					}
				}
			}
		})
	}
}

func TestRaftAppliedAndRepair(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		for g := range uint16(3) {
			if ok, err := h.s.HasState(g); err != nil || ok {
				t.Fatalf("fresh group %d: HasState %v, %v", g, ok, err)
			}
		}
		if i, tm, err := h.s.Applied(1); err != nil || i != 0 || tm != 0 {
			t.Fatalf("fresh applied %d/%d, %v", i, tm, err)
		}
		h.apply(func(b *Batch) {
			b.PutMsg(1<<48+1, msg(1, "a", "x"))
			b.PutApplied(1, 10, 2)
		})
		if i, tm, err := h.s.Applied(1); err != nil || i != 10 || tm != 2 {
			t.Fatalf("applied %d/%d, %v", i, tm, err)
		}
		if ok, _ := h.s.HasState(1); !ok {
			t.Fatal("group with an applied record has no state")
		}
		if ok, _ := h.s.HasState(2); ok {
			t.Fatal("group 2 has state")
		}
		l := mustRaftLog(t, h.s, 2)
		if ok, err := l.NeedsRepair(); err != nil || ok {
			t.Fatalf("fresh NeedsRepair %v, %v", ok, err)
		}
		must(t, h.s.SetRepair(2))
		if h.reopen() {
			l = mustRaftLog(t, h.s, 2)
		}
		if ok, err := l.NeedsRepair(); err != nil || !ok {
			t.Fatalf("NeedsRepair after SetRepair %v, %v", ok, err)
		}
		if ok, _ := h.s.NeedsRepair(1); ok {
			t.Fatal("marker leaked to group 1")
		}
		// A damaged marker still says repair.
		key := raftKey(nil, 2, raftKindRepair)
		h.rawSet(key, []byte{1, 2, 3, 4, 5})
		if ok, err := h.s.NeedsRepair(2); !ok || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("damaged marker: %v, %v", ok, err)
		}
		must(t, h.s.ClearRepair(2))
		if ok, err := h.s.NeedsRepair(2); err != nil || ok {
			t.Fatalf("NeedsRepair after ClearRepair %v, %v", ok, err)
		}
	})
}

// syncCountingFS counts the fsyncs of WAL files, recycled ones included
// (errorfs does not wrap the files ReuseForWrite returns).
type syncCountingFS struct {
	vfs.FS
	n *atomic.Int64
}

func (fs syncCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return syncCountingFile{f, fs.n}, nil
}

func (fs syncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs syncCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

type syncCountingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f syncCountingFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f syncCountingFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f syncCountingFile) SyncTo(length int64) (bool, error) {
	f.n.Add(1)
	return f.File.SyncTo(length)
}

// BenchmarkRaftStoreLogs appends 64 entries of 1 KiB per call, as a leader
// does with a full MaxAppendEntries batch, on the real disk.
func BenchmarkRaftStoreLogs(b *testing.B) {
	var syncs atomic.Int64
	s, err := Open(Options{Dir: b.TempDir(), FS: syncCountingFS{vfs.Default, &syncs}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := mustRaftLog(b, s, 1)
	const per = 64
	batch := raftEntries(1, per, 1024)
	b.SetBytes(per * 1024)
	b.ResetTimer()
	syncs.Store(0)
	next := uint64(1)
	for range b.N {
		for i, e := range batch {
			e.Index = next + uint64(i)
		}
		if err := l.StoreLogs(batch); err != nil {
			b.Fatal(err)
		}
		next += per
	}
	b.StopTimer()
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
}

// BenchmarkRaftStoreLogsGroups is BenchmarkRaftStoreLogs with 12 groups
// appending at once, as the partitions of a busy node do: their synced
// commits share fsyncs.
func BenchmarkRaftStoreLogsGroups(b *testing.B) {
	var syncs atomic.Int64
	s, err := Open(Options{Dir: b.TempDir(), FS: syncCountingFS{vfs.Default, &syncs}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const per, groups = 64, 12
	var nextGroup atomic.Int32
	b.SetBytes(per * 1024)
	b.SetParallelism((groups + 1) / 2) // GOMAXPROCS is 2 here: 12 goroutines
	b.ResetTimer()
	syncs.Store(0)
	b.RunParallel(func(pb *testing.PB) {
		l := mustRaftLog(b, s, uint16(nextGroup.Add(1)))
		batch := raftEntries(1, per, 1024)
		next := uint64(1)
		for pb.Next() {
			for i, e := range batch {
				e.Index = next + uint64(i)
			}
			if err := l.StoreLogs(batch); err != nil {
				b.Error(err)
				return
			}
			next += per
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
}

// TestRaftLogPropertyMatchesInmem drives the RaftLog of both engines and
// raft's own InmemStore (the reference) through one seeded random walk of
// appends, head compactions, tail cuts, stable writes and Pebble reopens,
// and checks that every read agrees.
func TestRaftLogPropertyMatchesInmem(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	ph, mh := openPebbleHarness(t), &harness{t: t, kind: "mem", s: NewMem()}
	defer ph.close()
	defer mh.close()
	ref := raft.NewInmemStore()
	logs := func() []*RaftLog { return []*RaftLog{mustRaftLog(t, ph.s, 7), mustRaftLog(t, mh.s, 7)} }
	var last uint64
	check := func() {
		t.Helper()
		rf, _ := ref.FirstIndex()
		rl, _ := ref.LastIndex()
		for _, l := range logs() {
			wantBounds(t, l, rf, rl)
			for i := rf; i <= rl && rl != 0; i++ {
				var want, got raft.Log
				must(t, ref.GetLog(i, &want))
				must(t, l.GetLog(i, &got))
				if !sameLog(&got, &want) {
					t.Fatalf("entry %d differs", i)
				}
			}
			for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
				want, _ := ref.GetUint64([]byte(k))
				got, err := l.GetUint64([]byte(k))
				if err != nil && err.Error() == "not found" {
					err = nil
				}
				if err != nil || got != want {
					t.Fatalf("%s: %d, %v; want %d", k, got, err, want)
				}
			}
		}
	}
	for step := range 600 {
		switch op := rng.IntN(10); {
		case op < 5: // append
			n := uint64(1 + rng.IntN(8))
			if last == 0 {
				last = uint64(rng.IntN(50)) // an empty log starts anywhere
			}
			es := raftEntries(last+1, last+n, rng.IntN(300))
			must(t, ref.StoreLogs(es))
			for _, l := range logs() {
				must(t, l.StoreLogs(es))
			}
			last += n
		case op < 7: // compact the head
			f, _ := ref.FirstIndex()
			if last == 0 {
				continue
			}
			to := f + uint64(rng.IntN(int(last-f)+1))
			must(t, ref.DeleteRange(f, to))
			for _, l := range logs() {
				must(t, l.DeleteRange(f, to))
			}
			if to == last {
				last = 0
			}
		case op < 8: // cut a conflicting tail
			f, _ := ref.FirstIndex()
			if last == 0 {
				continue
			}
			from := f + uint64(rng.IntN(int(last-f)+1))
			must(t, ref.DeleteRange(from, last))
			for _, l := range logs() {
				must(t, l.DeleteRange(from, last))
			}
			if from == f {
				last = 0
			} else {
				last = from - 1
			}
		case op < 9:
			k := []string{"CurrentTerm", "LastVoteTerm"}[rng.IntN(2)]
			v := rng.Uint64()
			must(t, ref.SetUint64([]byte(k), v))
			for _, l := range logs() {
				must(t, l.SetUint64([]byte(k), v))
			}
		default:
			ph.reopen()
		}
		if step%20 == 0 {
			check()
		}
	}
	check()
}
