package store

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// cachedIndexes lists what the cache holds, checking its invariant: every
// held entry lies in [lo, last] in its own slot, and bytes is their sum.
func cachedIndexes(t *testing.T, c *CachedRaftLog) []uint64 {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var held []uint64
	var sum int64
	for i, e := range c.ring {
		if e == nil {
			continue
		}
		if e.Index < c.lo || e.Index > c.last || e.Index%uint64(len(c.ring)) != uint64(i) {
			// A stale slot is allowed only if it is not in the window.
			continue
		}
		held = append(held, e.Index)
		sum += entrySize(e)
	}
	if sum != c.bytes {
		t.Fatalf("cache counts %d bytes, holds %d", c.bytes, sum)
	}
	if c.bytes > c.maxBytes {
		t.Fatalf("cache holds %d bytes, bound %d", c.bytes, c.maxBytes)
	}
	slices.Sort(held)
	return held
}

// TestCachedRaftLogBounds: whatever sizes the entries have, the cache
// holds at most its entries and bytes, always the newest ones, and every
// entry reads back whole, cached or not.
func TestCachedRaftLogBounds(t *testing.T) {
	h := openPebbleHarness(t)
	defer h.close()
	l := mustRaftLog(t, h.s, 1)
	if _, err := l.Cached(0, 1); err == nil {
		t.Fatal("a cache of no entries was accepted")
	}
	c, err := l.Cached(8, 4000)
	must(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	var all []*raft.Log
	next := uint64(1)
	for range 60 {
		n := 1 + rng.IntN(5)
		batch := raftEntries(next, next+uint64(n)-1, 0)
		for _, e := range batch {
			size := rng.IntN(1500)
			if rng.IntN(10) == 0 {
				size = 5000 // larger than the whole cache
			}
			e.Data = make([]byte, size)
			if size > 0 {
				e.Data[0] = byte(e.Index)
			}
		}
		must(t, c.StoreLogs(batch))
		all = append(all, batch...)
		next += uint64(n)

		held := cachedIndexes(t, c)
		if len(held) > 8 {
			t.Fatalf("cache holds %d entries", len(held))
		}
		// The newest entries, contiguous up to the last stored, unless
		// the last one alone is too large.
		for i, idx := range held {
			if want := next - uint64(len(held)-i); idx != want {
				t.Fatalf("cache holds %v after storing up to %d", held, next-1)
			}
		}
		// Room for one more of the newest would have kept it.
		if k := len(held); k < 8 && k < len(all) {
			var sum int64
			for _, e := range all[len(all)-k-1:] {
				sum += entrySize(e)
			}
			if sum <= 4000 {
				t.Fatalf("cache evicted entry %d with room for it (%v)", all[len(all)-k-1].Index, held)
			}
		}
		for _, w := range all[max(0, len(all)-20):] {
			var got raft.Log
			must(t, c.GetLog(w.Index, &got))
			if !sameLog(&got, w) {
				t.Fatalf("entry %d reads back as %+v", w.Index, got)
			}
		}
	}
	// Deleting empties the cache; reads go to the log.
	must(t, c.DeleteRange(next-3, next-1))
	if held := cachedIndexes(t, c); len(held) != 0 {
		t.Fatalf("cache holds %v after a delete", held)
	}
	var e raft.Log
	if err := c.GetLog(next-1, &e); err != raft.ErrLogNotFound {
		t.Fatalf("deleted entry: %v", err)
	}
	// Rewriting the deleted suffix caches afresh.
	must(t, c.StoreLogs(raftEntries(next-3, next-1, 10)))
	if held := cachedIndexes(t, c); len(held) != 3 || held[0] != next-3 {
		t.Fatalf("cache holds %v after the rewrite", held)
	}
	wantEntries(t, l, raftEntries(next-3, next-1, 10))
}
