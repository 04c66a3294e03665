package jetstream

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// accountOf returns the engine's state for a registered account.
func accountOf(t testing.TB, e *Engine, name string) *jsAccount {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.mu.accounts[name]
	if a == nil {
		t.Fatalf("account %q not registered", name)
	}
	return a
}

// errorOf is the error of a handler's reply, nil for a success.
func errorOf(resp any) *api.Error {
	if r, ok := resp.(interface{ ToError() error }); ok {
		if aerr, ok := r.ToError().(*api.Error); ok {
			return aerr
		}
	}
	return nil
}

// callDirect runs an API handler on the caller's goroutine, without the
// account's subject routing: the many-stream tests measure the engine,
// not the fake account's linear subscription list.
func callDirect(a *jsAccount, h apiHandler, name string, req any) any {
	var body []byte
	if req != nil {
		body, _ = json.Marshal(req)
	}
	return h(a, apiRequest{a: a, body: body}, name)
}

func createDirect(a *jsAccount, cfg api.StreamConfig) *api.Error {
	return errorOf(callDirect(a, (*jsAccount).streamCreate, cfg.Name, cfg))
}

func updateDirect(a *jsAccount, cfg api.StreamConfig) *api.Error {
	return errorOf(callDirect(a, (*jsAccount).streamUpdate, cfg.Name, cfg))
}

// manyStreamsName names the i-th stream of the many-stream tests; every
// 1,000th has a wildcard subject too.
func manyStreamsName(i int) string { return fmt.Sprintf("S%06d", i) }

func manyStreamsConfig(i int) api.StreamConfig {
	cfg := api.StreamConfig{Name: manyStreamsName(i), Subjects: []string{fmt.Sprintf("s.%d", i)}, Storage: api.FileStorage}
	if i%1000 == 0 {
		cfg.Subjects = append(cfg.Subjects, fmt.Sprintf("w.%d.*", i))
	}
	return cfg
}

// createMany creates streams 0..n-1 of manyStreamsConfig.
func createMany(t testing.TB, a *jsAccount, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := createDirect(a, manyStreamsConfig(i)); err != nil {
			t.Fatalf("create %s: %v", manyStreamsName(i), err)
		}
	}
}

// pageNames collects STREAM.NAMES page by page, checking that each page
// reports the same total.
func pageNames(t *testing.T, a *jsAccount, filter string) []string {
	t.Helper()
	var names []string
	for {
		resp := callDirect(a, (*jsAccount).streamNames, "", api.StreamNamesRequest{
			PagedRequest: api.PagedRequest{Offset: len(names)}, Subject: filter}).(*api.StreamNamesResponse)
		if resp.Error != nil {
			t.Fatalf("names from %d: %v", len(names), resp.Error)
		}
		names = append(names, resp.Streams...)
		if len(resp.Streams) == 0 || len(names) >= resp.Total {
			if len(names) != resp.Total {
				t.Fatalf("names with filter %q: paged %d, total %d", filter, len(names), resp.Total)
			}
			return names
		}
	}
}

// TestManyStreamsOverlapAndPaging creates 20,000 streams and holds the
// subject index to nats-server's rules: a subject another stream captures
// is refused with 10065 on create and update, literal and wildcard alike;
// a stream keeps its own subjects on update; a deleted stream's subjects
// are free again; and STREAM.NAMES pages every stream once, in name order,
// with and without a subject filter.
func TestManyStreamsOverlapAndPaging(t *testing.T) {
	const n = 20_000
	e, acc, _ := openEngine(t, vfs.NewMem())
	a := accountOf(t, e, "A")
	createMany(t, a, 0, n)

	for _, subjects := range [][]string{
		{"s.123"}, {"s.*"}, {"s.>"}, {">"}, {"*.19999"}, {"w.5000.x"}, {"w.*.y"}, {"x", "s.42"},
	} {
		// no_ack, so that subjects overlapping the API's are allowed.
		err := createDirect(a, api.StreamConfig{Name: "NEW", Subjects: subjects, NoAck: true})
		if err == nil || err.ErrCode != api.CodeStreamSubjectOverlap {
			t.Errorf("create with %v: got %v, want 10065", subjects, err)
		}
	}
	// No overlap: a token short of a wildcard subject, or a new prefix.
	for i, subjects := range [][]string{{"w.5000"}, {"s"}, {"s.1.x"}, {"w.5001.*"}} {
		if err := createDirect(a, api.StreamConfig{Name: fmt.Sprintf("FREE%d", i), Subjects: subjects}); err != nil {
			t.Errorf("create with %v: %v", subjects, err)
		}
	}

	// Through the API subjects too, as a client sends it.
	var cresp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.NEW", api.StreamConfig{Name: "NEW", Subjects: []string{"s.7"}}, &cresp)
	if cresp.Error == nil || cresp.Error.ErrCode != api.CodeStreamSubjectOverlap {
		t.Fatalf("create over the API: got %v, want 10065", cresp.Error)
	}

	upd := manyStreamsConfig(1)
	upd.Subjects = []string{"s.1", "s.2"}
	if err := updateDirect(a, upd); err == nil || err.ErrCode != api.CodeStreamSubjectOverlap {
		t.Fatalf("update taking another stream's subject: got %v, want 10065", err)
	}
	upd.Subjects = []string{"s.1", "t.1"}
	if err := updateDirect(a, upd); err != nil {
		t.Fatalf("update keeping its own subject: %v", err)
	}
	if err := createDirect(a, api.StreamConfig{Name: "NEW", Subjects: []string{"t.*"}}); err == nil || err.ErrCode != api.CodeStreamSubjectOverlap {
		t.Fatalf("create over an updated subject: got %v, want 10065", err)
	}
	if err := errorOf(callDirect(a, (*jsAccount).streamDelete, manyStreamsName(2), nil)); err != nil {
		t.Fatal(err)
	}
	upd.Subjects = []string{"s.1", "s.2"}
	if err := updateDirect(a, upd); err != nil {
		t.Fatalf("update taking a deleted stream's subject: %v", err)
	}

	want := []string{"FREE0", "FREE1", "FREE2", "FREE3"}
	for i := range n {
		if i != 2 {
			want = append(want, manyStreamsName(i))
		}
	}
	slices.Sort(want)
	if got := pageNames(t, a, ""); !slices.Equal(got, want) {
		t.Fatalf("paged %d names, want %d in order (first %v)", len(got), len(want), got[:min(len(got), 5)])
	}
	wild := []string{"FREE0", "FREE3"}
	for i := 0; i < n; i += 1000 {
		wild = append(wild, manyStreamsName(i))
	}
	if got := pageNames(t, a, "w.>"); !slices.Equal(got, wild) {
		t.Fatalf("names matching w.>: %v, want %v", got, wild)
	}
	if got := pageNames(t, a, "s.1"); !slices.Equal(got, []string{manyStreamsName(1)}) {
		t.Fatalf("names matching s.1: %v", got)
	}
}

// TestOverlapCheckDoesNotGrowWithStreams is the scaling check, by count,
// not time: the subject index visits as many nodes to check a new
// stream's subject among 20,000 streams as among 10.
func TestOverlapCheckDoesNotGrowWithStreams(t *testing.T) {
	visits := func(n int) int {
		e, _, _ := openEngine(t, vfs.NewMem())
		a := accountOf(t, e, "A")
		createMany(t, a, 0, n)
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.mu.streams.subjects.Overlapping("s.new", func(*stream) bool { return true })
	}
	if small, large := visits(10), visits(20_000); small != large {
		t.Fatalf("overlap check visited %d nodes among 10 streams, %d among 20,000", small, large)
	}
}

// BenchmarkStreamCreate measures one create (file storage, in-memory
// filesystem) in an account that already has that many streams: the
// figures should not depend on the count.
func BenchmarkStreamCreate(b *testing.B) {
	for _, n := range []int{10, 100_000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			e, _, _ := openEngine(b, vfs.NewMem())
			a := accountOf(b, e, "A")
			createMany(b, a, 0, n)
			i := n
			for b.Loop() {
				if err := createDirect(a, manyStreamsConfig(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestConcurrentCreatesHoldTheRules: creates no longer hold the account
// across their fsync, so racing creates must still obey every check that
// runs before it. 64 creates race in each round: of those taking one
// subject only one succeeds (10065 for the rest); repeats of one config
// all succeed with one stream; max_streams and max_storage are never
// exceeded; and each refused create leaves nothing behind.
func TestConcurrentCreatesHoldTheRules(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	register(t, e, "A", untiered(func(l *api.AccountLimits) {
		l.MaxStreams = 40
		l.MaxStore = 30 << 10
	}))
	a := accountOf(t, e, "A")
	race := func(n int, cfg func(i int) api.StreamConfig) []*api.Error {
		errs := make([]*api.Error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = createDirect(a, cfg(i)) })
		}
		wg.Wait()
		return errs
	}
	count := func(errs []*api.Error, code api.ErrorCode) (n int) {
		for _, err := range errs {
			if (err == nil && code == 0) || (err != nil && err.ErrCode == code) {
				n++
			}
		}
		return n
	}

	errs := race(64, func(i int) api.StreamConfig {
		return api.StreamConfig{Name: fmt.Sprintf("OVER%d", i), Subjects: []string{"shared.>"}, MaxBytes: 1}
	})
	if ok, over := count(errs, 0), count(errs, api.CodeStreamSubjectOverlap); ok != 1 || over != 63 {
		t.Fatalf("64 creates over one subject: %d created, %d refused with 10065 (%v)", ok, over, errs)
	}
	errs = race(64, func(int) api.StreamConfig {
		return api.StreamConfig{Name: "SAME", Subjects: []string{"same"}, MaxBytes: 1}
	})
	if ok := count(errs, 0); ok != 64 {
		t.Fatalf("64 repeats of one create: %d succeeded (%v)", ok, errs)
	}
	// 1 KiB each: 30 KiB of storage leaves room for 28 more beside the
	// two above; max_streams would allow 38.
	errs = race(64, func(i int) api.StreamConfig {
		return api.StreamConfig{Name: fmt.Sprintf("K%d", i), Subjects: []string{fmt.Sprintf("k.%d", i)}, MaxBytes: 1 << 10}
	})
	if ok, full := count(errs, 0), count(errs, api.CodeStorageResourcesExceeded); ok != 29 || full != 35 {
		t.Fatalf("64 creates of 1 KiB into 30 KiB: %d created, %d refused with 10047 (%v)", ok, full, errs)
	}
	errs = race(64, func(i int) api.StreamConfig {
		return api.StreamConfig{Name: fmt.Sprintf("M%d", i), Subjects: []string{fmt.Sprintf("m.%d", i)}, MaxBytes: 1}
	})
	if ok, max := count(errs, 0), count(errs, api.CodeMaxStreamsReached); ok != 40-31 || max != 64-9 {
		t.Fatalf("64 creates up to max_streams: %d created, %d refused with 10027 (%v)", ok, max, errs)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n, p := a.mu.streams.count(""), len(a.mu.streams.pending); n != 40 || p != 0 {
		t.Fatalf("index holds %d streams, %d pending; want 40, 0", n, p)
	}
}

// heldSyncFS is a memory FS whose syncs, while block is set, signal
// entered and wait for release to close: a commit held mid-fsync.
func heldSyncFS() (fs vfs.FS, block *atomic.Bool, entered, release chan struct{}) {
	block = new(atomic.Bool)
	entered, release = make(chan struct{}, 1), make(chan struct{})
	fs = errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if block.Load() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
			}
		}
		return nil
	}))
	return fs, block, entered, release
}

// TestCreateFinishingInDisabledAccount: a create whose record becomes
// durable after its account was disabled (it no longer holds the
// account while it waits for its fsync) is answered 10039, and the
// stream it made is held with the account's other streams: enabled
// again, the account has it, attached.
func TestCreateFinishingInDisabledAccount(t *testing.T) {
	fs, block, entered, release := heldSyncFS()
	e, _ := bareEngine(t, fs)
	on := untiered(func(*api.AccountLimits) {})
	register(t, e, "A", on)
	a := accountOf(t, e, "A")

	block.Store(true)
	done := make(chan *api.Error)
	go func() { done <- createDirect(a, api.StreamConfig{Name: "P", Subjects: []string{"p"}}) }()
	<-entered
	// A sync is held; once the create is pending, its commit waits on one.
	for pending := false; !pending; runtime.Gosched() {
		a.mu.Lock()
		pending = a.mu.streams.pending["P"].done != nil
		a.mu.Unlock()
	}
	if err := e.UpdateAccount("A", disabledLimits); err != nil {
		t.Fatal(err)
	}
	block.Store(false)
	close(release)
	if err := <-done; err == nil || err.ErrCode != api.CodeNotEnabledForAccount {
		t.Fatalf("create finishing in a disabled account: %v, want 10039", err)
	}
	if err := e.UpdateAccount("A", on); err != nil {
		t.Fatal(err)
	}
	if a.lookup("P") == nil {
		t.Fatal("the stream created while the account was disabled is gone after enabling it")
	}
	if err := createDirect(a, api.StreamConfig{Name: "Q", Subjects: []string{"p"}}); err == nil || err.ErrCode != api.CodeStreamSubjectOverlap {
		t.Fatalf("its subject is free: %v", err)
	}
}

// TestCommittedDeleteWaitsForCreate: a committed meta delete served
// while its stream's create is still committing (a new leader's
// materialize runs off the account's lane) waits for the create and
// deletes what it made, instead of answering that the stream is gone
// already and leaving it behind the catalog's back.
func TestCommittedDeleteWaitsForCreate(t *testing.T) {
	fs, block, entered, release := heldSyncFS()
	e, _ := bareEngine(t, fs)
	register(t, e, "A", untiered(func(*api.AccountLimits) {}))
	a := accountOf(t, e, "A")

	block.Store(true)
	created := make(chan *api.Error)
	go func() { created <- createDirect(a, api.StreamConfig{Name: "P", Subjects: []string{"p"}}) }()
	<-entered
	var id uint64
	for id == 0 {
		a.mu.Lock()
		if p, ok := a.mu.streams.pending["P"]; ok {
			id = p.s.id
		}
		a.mu.Unlock()
		runtime.Gosched()
	}
	deleted := make(chan any)
	go func() {
		deleted <- a.streamDelete(apiRequest{a: a, asg: &assignment{Account: "A", Name: "P", ID: id}}, "P")
	}()
	block.Store(false)
	close(release)
	if err := <-created; err != nil {
		t.Fatalf("create: %v", err)
	}
	if resp, ok := (<-deleted).(*api.SuccessResponse); !ok || !resp.Success {
		t.Fatalf("delete: %+v", resp)
	}
	if a.lookup("P") != nil {
		t.Fatal("the stream outlived the delete served while it was made")
	}
}
