package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// submitAll runs workers goroutines that each submit n one-message batches
// to stream (worker+1), returning the sequences acknowledged per worker.
func submitAll(t testing.TB, s *Store, c *Committer, workers, n int) [][]uint64 {
	acked := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mu sync.Mutex
			var pending sync.WaitGroup
			b := s.NewBatch()
			defer b.Close()
			for i := 1; i <= n; i++ {
				seq := uint64(i)
				b.Reset()
				b.PutMsg(uint64(w+1), msg(seq, fmt.Sprintf("w.%d", w), "x"))
				pending.Add(1)
				c.Submit(b, func(err error) {
					defer pending.Done()
					if err != nil {
						t.Errorf("worker %d seq %d: %v", w, seq, err)
						return
					}
					mu.Lock()
					acked[w] = append(acked[w], seq)
					mu.Unlock()
				})
			}
			pending.Wait()
		})
	}
	wg.Wait()
	return acked
}

func TestCommitterGroupsAndOrders(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		c := NewCommitter(h.s, CommitterOptions{})
		acked := submitAll(t, h.s, c, 8, 200)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for w, seqs := range acked {
			for i, seq := range seqs {
				if seq != uint64(i+1) {
					t.Fatalf("worker %d: completion %d was seq %d: out of order", w, i, seq)
				}
			}
			if len(seqs) != 200 {
				t.Fatalf("worker %d: %d acks", w, len(seqs))
			}
			if m, err := h.s.LastMsg(uint64(w+1), fmt.Sprintf("w.%d", w)); err != nil || m.Seq != 200 {
				t.Fatalf("worker %d last = %d, %v", w, m.Seq, err)
			}
		}
		st := c.Stats()
		if st.Items != 1600 || st.Failed != 0 || st.Groups == 0 || st.Groups > st.Items {
			t.Fatalf("stats = %+v", st)
		}
		t.Logf("%d batches in %d groups", st.Items, st.Groups)
		err := c.Commit(h.s.NewBatch())
		wantErr(t, err, ErrClosed)
	})
}

func TestCommitterBackPressure(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		c := NewCommitter(h.s, CommitterOptions{MaxGroupBytes: 1 << 10})
		acked := submitAll(t, h.s, c, 4, 100)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for w := range acked {
			if len(acked[w]) != 100 {
				t.Fatalf("worker %d: %d acks", w, len(acked[w]))
			}
		}
	})
}

func TestCommitterLazySync(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		c := NewCommitter(h.s, CommitterOptions{SyncInterval: time.Millisecond})
		b := h.s.NewBatch()
		b.PutMsg(1, msg(1, "a", "x"))
		if err := c.Commit(b); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		mustLoad(t, h.s, 1, 1)
	})
}

// TestCommitterSurfacesStoreClosed: closing the store under a running
// committer fails its callers instead of hanging them.
func TestCommitterSurfacesStoreClosed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		c := NewCommitter(h.s, CommitterOptions{})
		defer c.Close()
		if err := h.s.Close(); err != nil {
			t.Fatal(err)
		}
		err := c.Commit(h.s.NewBatch())
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("commit on closed store: %v", err)
		}
	})
}
