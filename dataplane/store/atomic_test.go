package store

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
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
