package store

import (
	"math"
	"math/bits"
	"slices"
	"testing"
)

// countingEngine counts the records an engine hands out.
type countingEngine struct {
	engine
	reads int
}

func (c *countingEngine) get(key []byte, fn func(v []byte) error) error {
	c.reads++
	return c.engine.get(key, fn)
}

func (c *countingEngine) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return c.engine.scan(lower, upper, reverse, func(k, v []byte) (bool, error) {
		c.reads++
		return fn(k, v)
	})
}

// TestSeqAtTime: the first message at or after a time, against a linear
// answer, at the edges (before the first, after the last, exact hits,
// times falling in gaps, several messages sharing a time) and across
// holes left by deletes and a purged range; and the number of records read
// stays logarithmic in the stream's length.
func TestSeqAtTime(t *testing.T) {
	const n = 20000
	forEachEngine(t, func(t *testing.T, h *harness) {
		// Times 10, 20, 30...; every 100th pair shares a time.
		timeOf := func(seq uint64) int64 {
			if seq%100 == 1 {
				seq--
			}
			return int64(seq) * 10
		}
		h.apply(func(b *Batch) {
			for seq := uint64(1); seq <= n; seq++ {
				b.PutMsg(1, &Message{Seq: seq, Subject: "a", Time: timeOf(seq)})
			}
		})
		gone := map[uint64]bool{}
		h.apply(func(b *Batch) {
			for seq := uint64(7); seq <= n; seq += 13 {
				b.DeleteMsg(1, seq, "a")
				gone[seq] = true
			}
			b.PurgeRange(1, 5000, 9000) // [5000, 9000)
			for seq := uint64(5000); seq < 9000; seq++ {
				gone[seq] = true
			}
			b.DeleteMsg(1, n, "a") // the last sequence is a hole too
			gone[n] = true
		})
		linear := func(ts int64) (uint64, bool) {
			for seq := uint64(1); seq <= n; seq++ {
				if !gone[seq] && timeOf(seq) >= ts {
					return seq, true
				}
			}
			return 0, false
		}
		ce := &countingEngine{engine: h.s.eng}
		h.s.eng = ce
		defer func() { h.s.eng = ce.engine }()
		limit := 2*bits.Len(uint(n)) + 2
		check := func(ts int64) {
			t.Helper()
			ce.reads = 0
			got, ok, err := h.s.SeqAtTime(1, 1, n, ts)
			if err != nil {
				t.Fatalf("time %d: %v", ts, err)
			}
			want, wantOK := linear(ts)
			if got != want || ok != wantOK {
				t.Fatalf("time %d: got %d %v, want %d %v", ts, got, ok, want, wantOK)
			}
			if ce.reads > limit {
				t.Fatalf("time %d: %d records read for %d messages (limit %d)", ts, ce.reads, n, limit)
			}
		}
		for _, ts := range []int64{math.MinInt64, -1, 0, 9, 10, 11, 69, 70, 71, 1000, 1005, 1010,
			49990, 49995, 50000, 60000, 89990, 90000, 90010, n*10 - 10, n*10 - 5, n * 10, n*10 + 1, math.MaxInt64} {
			check(ts)
		}
		for ts := int64(3); ts < n*10; ts += 997 {
			check(ts)
		}
		// A sub-range, and a range that holds nothing.
		if got, ok, _ := h.s.SeqAtTime(1, 100, 200, 0); !ok || got != 100 {
			t.Fatalf("sub-range from 100: %d %v", got, ok)
		}
		if _, ok, _ := h.s.SeqAtTime(1, 5000, 8999, 0); ok {
			t.Fatal("purged range answered")
		}
		if _, ok, _ := h.s.SeqAtTime(2, 0, math.MaxUint64, 0); ok {
			t.Fatal("empty stream answered")
		}
	})
}

func TestMsgSeqs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		fill(h, 1, 30, "a", "b")
		fill(h, 2, 5, "c")
		h.apply(func(b *Batch) {
			b.DeleteMsg(1, 4, "b")
			b.PurgeRange(1, 10, 20)
		})
		var got []uint64
		if err := h.s.MsgSeqs(1, 2, 25, func(seq uint64) bool { got = append(got, seq); return seq < 22 }); err != nil {
			t.Fatal(err)
		}
		if want := []uint64{2, 3, 5, 6, 7, 8, 9, 20, 21, 22}; !slices.Equal(got, want) {
			t.Fatalf("sequences %v, want %v", got, want)
		}
	})
}
