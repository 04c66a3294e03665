package store

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestCrashKeepsAcknowledged commits with sync from several goroutines on
// a crash-simulating FS, takes the acknowledged set, crashes (keeping only
// synced data, plus some unsynced data at random), reopens, and checks
// that every acknowledged message is there. The state machine's crash
// tests (jetstream's durability tests) cover its apply path on top.
func TestCrashKeepsAcknowledged(t *testing.T) {
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := mustOpen(t, fs)
			const workers = 6
			var mu sync.Mutex
			acked := map[[2]uint64]bool{}
			enough := make(chan struct{})
			var enoughOnce sync.Once
			var stop atomic.Bool
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					b := s.NewBatch()
					defer b.Close()
					for seq := uint64(1); !stop.Load(); seq++ {
						b.Reset()
						b.PutMsg(uint64(w), msg(seq, "s", strings.Repeat("d", 100)))
						err := b.Commit(true)
						if err != nil {
							return
						}
						mu.Lock()
						acked[[2]uint64{uint64(w), seq}] = true
						if len(acked) >= 300*(round+1) {
							enoughOnce.Do(func() { close(enough) })
						}
						mu.Unlock()
					}
				})
			}
			// Let the publishers run, then freeze the acknowledged set and
			// crash while they are still going.
			<-enough
			mu.Lock()
			want := make([][2]uint64, 0, len(acked))
			for k := range acked {
				want = append(want, k)
			}
			mu.Unlock()
			rng := rand.New(rand.NewPCG(uint64(round), 99))
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: round * 30, RNG: rng})
			stop.Store(true)
			wg.Wait()
			_ = s.Close()

			s2 := mustOpen(t, crashed)
			defer s2.Close()
			for _, k := range want {
				if _, err := s2.LoadMsg(k[0], k[1]); err != nil {
					t.Fatalf("acknowledged message %d/%d lost: %v", k[0], k[1], err)
				}
			}
			t.Logf("%d acknowledged messages survived the crash", len(want))
		})
	}
}

// failWALSyncs fails every sync of a WAL file while failing is set.
func failWALSyncs(failing *atomic.Bool) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !failing.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return errorfs.ErrInjected
		}
		return nil
	})
}

// TestSyncFailureFailsEveryCaller makes WAL syncs fail and checks that no
// concurrent caller is told its batch is durable, and that the store
// stays failed afterwards.
func TestSyncFailureFailsEveryCaller(t *testing.T) {
	var failing atomic.Bool
	s := mustOpen(t, errorfs.Wrap(vfs.NewMem(), failWALSyncs(&failing)))
	defer s.Close()
	b := s.NewBatch()
	b.PutMsg(1, msg(1, "a", "ok"))
	if err := b.Commit(true); err != nil {
		t.Fatalf("commit before failure: %v", err)
	}
	failing.Store(true)
	const workers, each = 8, 50
	var wg sync.WaitGroup
	var successes, failures atomic.Int64
	for w := range workers {
		wg.Go(func() {
			b := s.NewBatch()
			defer b.Close()
			for i := range each {
				b.Reset()
				b.PutMsg(2, msg(uint64(w*each+i+1), "b", "x"))
				if err := b.Commit(true); err != nil {
					wantErr(t, err, ErrFailed)
					failures.Add(1)
				} else {
					successes.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if successes.Load() != 0 || failures.Load() != workers*each {
		t.Fatalf("%d successes, %d failures after sync failure", successes.Load(), failures.Load())
	}
	_, err := s.LoadMsg(1, 1)
	wantErr(t, err, ErrFailed)
	if !strings.Contains(err.Error(), "injected") {
		t.Errorf("failure lost its cause: %v", err)
	}
}

// TestReopenAfterSyncFailure: closing a failed store releases it, and
// reopening recovers from what reached the files. A batch whose sync failed
// may or may not be there (its outcome is unknown, and its caller was told
// so); everything acknowledged before the failure is.
func TestReopenAfterSyncFailure(t *testing.T) {
	var failing atomic.Bool
	mem := vfs.NewMem()
	s := mustOpen(t, errorfs.Wrap(mem, failWALSyncs(&failing)))
	fill(&harness{t: t, s: s}, 1, 10, "a")
	failing.Store(true)
	b := s.NewBatch()
	b.PutMsg(1, msg(11, "a", "x"))
	wantErr(t, b.Commit(true), ErrFailed)
	wantErr(t, b.Commit(true), ErrFailed) // stays failed
	must(t, s.Close())
	failing.Store(false)
	s2 := mustOpen(t, mem)
	defer s2.Close()
	if m, err := s2.NextMsg(1, 0, "a"); err != nil || m.Seq != 1 {
		t.Fatalf("after reopen: %d, %v", m.Seq, err)
	}
	mustLoad(t, s2, 1, 10)
}

// TestLazySyncFailurePoisons: commits without sync (lazy durability) are
// applied; a failed Sync then fails every later commit and sync.
func TestLazySyncFailurePoisons(t *testing.T) {
	var failing atomic.Bool
	s := mustOpen(t, errorfs.Wrap(vfs.NewMem(), failWALSyncs(&failing)))
	defer s.Close()
	b := s.NewBatch()
	defer b.Close()
	b.PutMsg(1, msg(1, "a", "x"))
	must(t, b.Commit(false)) // applied, not yet synced: the weaker contract
	failing.Store(true)
	wantErr(t, s.Sync(), ErrFailed) // what the applier's sync timer does
	b.PutMsg(1, msg(2, "a", "x"))
	wantErr(t, b.Commit(false), ErrFailed)
	wantErr(t, s.Sync(), ErrFailed)
}

// TestSyncMakesUnsyncedCommitsDurable: batches committed without sync and
// then covered by one Store.Sync survive a crash that keeps only synced
// data.
func TestSyncMakesUnsyncedCommitsDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := mustOpen(t, fs)
	b := s.NewBatch()
	for seq := uint64(1); seq <= 20; seq++ {
		b.PutMsg(1, msg(seq, "a", "x"))
		must(t, b.Commit(false))
	}
	must(t, s.Sync())
	b.PutMsg(1, msg(21, "a", "not synced"))
	must(t, b.Commit(false))
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	b.Close()
	must(t, s.Close())
	s2 := mustOpen(t, crashed)
	defer s2.Close()
	for seq := uint64(1); seq <= 20; seq++ {
		mustLoad(t, s2, 1, seq)
	}
}
