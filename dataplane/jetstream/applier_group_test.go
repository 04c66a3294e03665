package jetstream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// TestGroupGrowsWhileCommitBusy: publishes that arrive while the previous
// group is being committed join the next group, applied as they come, and
// none of them is answered before the commit that carries it has synced:
// the whole backlog takes one more fsync, not one each.
func TestGroupGrowsWhileCommitBusy(t *testing.T) {
	synced := make(chan struct{}, 1<<10)
	var failing atomic.Bool
	st, err := store.Open(store.Options{Dir: "js", FS: errorfs.Wrap(vfs.NewMem(), walSyncs(synced, &failing))})
	if err != nil {
		t.Fatal(err)
	}
	e, acc, _ := engineOn(t, st)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	s := attachedStream(e, acc.Name(), "S")
	e.mu.Lock()
	a := e.mu.accounts[acc.Name()]
	e.mu.Unlock()

	// The first group's commit holds the commit step until released.
	var commits atomic.Int32
	held, release := make(chan struct{}), make(chan struct{})
	e.file.onCommit = func() {
		if commits.Add(1) == 1 {
			close(held)
			<-release
		}
	}
	for len(synced) > 0 {
		<-synced
	}
	const n = 50
	type outcome struct {
		r       result
		commits int32 // groups committed when it was answered
		syncs   int   // WAL fsyncs by then
	}
	out := make([]outcome, n+1)
	var answered atomic.Int32
	var wg sync.WaitGroup
	submit := func(i int) {
		wg.Add(1)
		s.ap.submit(&proposal{s: s, acct: a, kind: propMsg, subject: "s", data: []byte("x"),
			done: func(_ *proposal, r result) {
				defer wg.Done()
				out[i] = outcome{r: r, commits: commits.Load(), syncs: len(synced)}
				answered.Add(1)
			}})
	}
	submit(0)
	<-held
	for i := 1; i <= n; i++ {
		submit(i)
	}
	// Every later publish is applied (the stream holds it) while the
	// first commit is still held, and none is answered.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		last := s.mu.state.LastSeq
		s.mu.Unlock()
		if last == n+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("applied up to seq %d of %d while the commit step was busy", last, n+1)
		}
		time.Sleep(time.Millisecond) // polling the stream's state, not synchronising
	}
	if got := answered.Load(); got != 0 {
		t.Fatalf("%d publishes answered before their commit", got)
	}
	close(release)
	wg.Wait()
	e.file.onCommit = nil
	for i, o := range out {
		want := int32(1)
		if i > 0 {
			want = 2
		}
		if o.r.err != nil || o.r.seq != uint64(i+1) {
			t.Errorf("publish %d: seq %d, %v", i, o.r.seq, o.r.err)
		}
		if o.commits < want || o.syncs < int(want) {
			t.Errorf("publish %d answered after %d commits and %d WAL fsyncs, want %d of each", i, o.commits, o.syncs, want)
		}
	}
	if c := commits.Load(); c != 2 {
		t.Errorf("%d publishes took %d commits, want 2: the backlog is one group", n+1, c)
	}
	if m, ok := apiMsgGet(t, acc, "S", api.MsgGetRequest{Seq: n + 1}); !ok || m.Sequence != n+1 {
		t.Errorf("last publish not stored: %+v", m)
	}
}
