package store

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestReadersSeeWholeBatches commits two-message batches while readers
// scan: every scan must see each batch entirely or not at all.
func TestReadersSeeWholeBatches(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		const batches = 300
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for !stop.Load() {
					var n uint64
					err := h.s.ScanMsgs(1, 0, math.MaxUint64, func(m *Message) error {
						n++
						if m.Seq != n {
							t.Errorf("scan saw seq %d at position %d", m.Seq, n)
						}
						return nil
					})
					if err != nil || n%2 != 0 {
						t.Errorf("scan saw %d messages (half a batch?), err %v", n, err)
						return
					}
				}
			})
		}
		b := h.s.NewBatch()
		for i := uint64(1); i <= batches; i++ {
			b.PutMsg(1, msg(2*i-1, "a", "x"))
			b.PutMsg(1, msg(2*i, "b", "y"))
			must(t, b.Commit(false))
		}
		b.Close()
		stop.Store(true)
		wg.Wait()
	})
}

// TestBatchReaderSeesPendingWrites: reads through a batch see the store
// with the batch's writes on top (puts, deletes, range deletes, and
// writes made after Reader was first called), the store itself sees none
// of them until the commit, and the commit applies them as one batch.
func TestBatchReaderSeesPendingWrites(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		fill(h, 1, 10, "a")
		b := h.s.NewBatch()
		defer b.Close()
		b.PutMsg(1, msg(11, "b", "new"))
		b.DeleteMsg(1, 1, "a")
		r := b.Reader()
		if m, err := r.LoadMsg(1, 11); err != nil || string(m.Data) != "new" {
			t.Fatalf("pending put through the reader: %+v, %v", m, err)
		}
		if _, err := r.LoadMsg(1, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("pending delete through the reader: %v", err)
		}
		// Writes after Reader are seen too, by scans as by point reads.
		b.PurgeRange(1, 2, 5)
		b.UnindexRange(1, "a", 2, 5)
		b.PutMsg(1, msg(12, "b", "newer"))
		var seqs []uint64
		must(t, r.ScanMsgs(1, 0, math.MaxUint64, func(m *Message) error { seqs = append(seqs, m.Seq); return nil }))
		if want := []uint64{5, 6, 7, 8, 9, 10, 11, 12}; !slices.Equal(seqs, want) {
			t.Fatalf("scan through the reader: %v, want %v", seqs, want)
		}
		if m, err := r.NextMsg(1, 0, "a"); err != nil || m.Seq != 5 {
			t.Fatalf("next for a through the reader: %d, %v", m.Seq, err)
		}
		if m, err := r.LastMsg(1, "b"); err != nil || m.Seq != 12 {
			t.Fatalf("last for b through the reader: %d, %v", m.Seq, err)
		}
		// The store sees nothing of the batch yet.
		mustLoad(t, h.s, 1, 1)
		if _, err := h.s.LoadMsg(1, 11); !errors.Is(err, ErrNotFound) {
			t.Fatalf("store sees a pending write: %v", err)
		}
		must(t, b.Commit(true))
		if m, err := h.s.LastMsg(1, "b"); err != nil || m.Seq != 12 {
			t.Fatalf("last for b after the commit: %d, %v", m.Seq, err)
		}
		if _, err := h.s.LoadMsg(1, 3); !errors.Is(err, ErrNotFound) {
			t.Fatalf("purged message after the commit: %v", err)
		}
		// The batch is plain again and reusable, with a fresh reader.
		b.PutMsg(1, msg(13, "b", "again"))
		if m, err := b.Reader().LoadMsg(1, 13); err != nil || string(m.Data) != "again" {
			t.Fatalf("reader after reuse: %+v, %v", m, err)
		}
	})
}

// TestBatchReaderCrashKeepsNothing: a crash before a read-through batch is
// committed keeps none of it; after its synced commit, all of it.
func TestBatchReaderCrashKeepsNothing(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := mustOpen(t, fs)
	fill(&harness{t: t, s: s}, 1, 3, "a")
	must(t, s.Sync())
	b := s.NewBatch()
	b.PutMsg(1, msg(4, "a", "x"))
	_ = b.Reader()
	b.DeleteMsg(1, 1, "a")
	before := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
	must(t, b.Commit(true))
	after := fs.CrashClone(vfs.CrashCloneCfg{})
	b.Close()
	must(t, s.Close())
	for _, c := range []struct {
		fs         vfs.FS
		has4, has1 bool
	}{{before, false, true}, {after, true, false}} {
		s2 := mustOpen(t, c.fs)
		_, err4 := s2.LoadMsg(1, 4)
		_, err1 := s2.LoadMsg(1, 1)
		if (err4 == nil) != c.has4 || (err1 == nil) != c.has1 {
			t.Errorf("after a crash: seq 4 %v, seq 1 %v; want present %v, %v", err4, err1, c.has4, c.has1)
		}
		must(t, s2.Close())
	}
}
