package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// makeStreams writes n streams of msgs messages each, with metadata and
// state, into a Pebble store in dir.
func makeStreams(t testing.TB, fs vfs.FS, dir string, n, msgs int) {
	s, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	defer b.Close()
	data := make([]byte, 128)
	for id := uint64(1); id <= uint64(n); id++ {
		b.PutStream(StreamMeta{ID: id, Name: fmt.Sprint("STREAM_", id), Config: []byte(`{"subjects":["s.>"]}`)})
		for seq := uint64(1); seq <= uint64(msgs); seq++ {
			b.PutMsg(id, &Message{Seq: seq, Subject: fmt.Sprint("s.", seq%7), Data: data, Time: int64(seq)})
		}
		b.PutStreamState(id, StreamState{FirstSeq: 1, LastSeq: uint64(msgs), Msgs: uint64(msgs)})
		if id%500 == 0 {
			must(t, b.Commit(false))
		}
	}
	must(t, b.Commit(true))
}

// TestStartupIsFast reopens a store of 5,000 streams on real disk and lists
// them: start-up reads only the catalog, so it must take well under 2 s.
func TestStartupIsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 5,000 streams to disk")
	}
	dir := t.TempDir()
	makeStreams(t, vfs.Default, dir, 5000, 20)
	start := time.Now()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	must(t, s.Streams(func(i StreamInfo) error {
		if i.State.LastSeq != 20 || i.Name != fmt.Sprint("STREAM_", i.ID) {
			return fmt.Errorf("stream %d: %+v", i.ID, i)
		}
		n++
		return nil
	}))
	elapsed := time.Since(start)
	if n != 5000 {
		t.Fatalf("listed %d streams", n)
	}
	t.Logf("reopened and listed %d streams in %v", n, elapsed)
	if elapsed > 2*time.Second*raceSlowdown {
		t.Fatalf("start-up took %v", elapsed)
	}
}

// BenchmarkStartup5000Streams measures open + list of 5,000 streams of
// 100 messages each on real disk.
func BenchmarkStartup5000Streams(b *testing.B) {
	dir := b.TempDir()
	makeStreams(b, vfs.Default, dir, 5000, 100)
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		must(b, s.Streams(func(StreamInfo) error { n++; return nil }))
		must(b, s.Close())
		if n != 5000 {
			b.Fatalf("listed %d", n)
		}
	}
}

// TestCrashStartupIsFast is the worst case of TestStartupIsFast: the node
// died without flushing, so Open replays the WAL (everything since the last
// memtable flush) before listing.
func TestCrashStartupIsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 5,000 streams")
	}
	fs := vfs.NewCrashableMem()
	s, err := Open(Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	data := make([]byte, 128)
	for id := uint64(1); id <= 5000; id++ {
		b.PutStream(StreamMeta{ID: id, Name: fmt.Sprint("STREAM_", id)})
		for seq := uint64(1); seq <= 20; seq++ {
			b.PutMsg(id, &Message{Seq: seq, Subject: "s", Data: data})
		}
		b.PutStreamState(id, StreamState{LastSeq: 20})
		if id%500 == 0 {
			must(t, b.Commit(true))
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	b.Close()
	must(t, s.Close())
	start := time.Now()
	s2, err := Open(Options{Dir: "db", FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	n := 0
	must(t, s2.Streams(func(StreamInfo) error { n++; return nil }))
	elapsed := time.Since(start)
	t.Logf("crash restart: replayed the WAL and listed %d streams in %v", n, elapsed)
	if n != 5000 || elapsed > 2*time.Second*raceSlowdown {
		t.Fatalf("crash restart listed %d streams in %v", n, elapsed)
	}
}
