package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		scannable, floor uint64
		want             int
	}{
		{2 << 20, 64 << 20, 3200},   // a small heap waits for the floor
		{64 << 20, 64 << 20, 100},   // at the floor, Go's default
		{1 << 30, 64 << 20, 100},    // a large heap never goes under it
		{0, 64 << 20, maxPercent},   // nothing measured
		{1, 64 << 20, maxPercent},   // capped
		{10 << 20, 100 << 20, 1000}, // exact division
	} {
		if got := Percent(tt.scannable, tt.floor); got != tt.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tt.scannable, tt.floor, got, tt.want)
		}
	}
}

// TestTunerFollowsCollections starts a tuner, forces collections and
// checks that each one is followed by an adjustment that sets a percent
// above Go's default (this test's heap is far under the floor) and a
// memory limit, and that Stop restores both.
func TestTunerFollowsCollections(t *testing.T) {
	type adj struct {
		percent int
		limit   int64
	}
	seen := make(chan adj, 64)
	prevPct := debug.SetGCPercent(100)
	debug.SetGCPercent(prevPct)
	prevLimit := debug.SetMemoryLimit(-1)

	tu := start(DefaultFloor, time.Hour, func(p int, l int64) {
		select {
		case seen <- adj{p, l}:
		default:
		}
	}, nil)
	for i := 0; i < 2; i++ {
		runtime.GC()
		select {
		case a := <-seen:
			if a.percent <= 100 {
				t.Errorf("percent after collection %d = %d, want above 100 for a heap under the floor", i, a.percent)
			}
			if a.limit == math.MaxInt64 || a.limit < DefaultFloor {
				t.Errorf("limit after collection %d = %d, want the memory in use plus the floor", i, a.limit)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no adjustment followed collection %d", i)
		}
	}
	if p := debug.SetGCPercent(-1); p <= 100 {
		t.Errorf("GOGC while tuning = %d", p)
	}
	debug.SetGCPercent(100)

	tu.Stop()
	if p := debug.SetGCPercent(prevPct); p != prevPct {
		t.Errorf("GOGC after Stop = %d, want %d", p, prevPct)
	}
	if l := debug.SetMemoryLimit(-1); l != prevLimit {
		t.Errorf("memory limit after Stop = %d, want %d", l, prevLimit)
	}
	// A stopped tuner adjusts nothing more.
	for len(seen) > 0 {
		<-seen
	}
	runtime.GC()
	runtime.GC()
	if p := debug.SetGCPercent(prevPct); p != prevPct {
		t.Errorf("GOGC changed after Stop: %d", p)
	}
}

func TestGOGCEnvironmentWins(t *testing.T) {
	t.Setenv("GOGC", "150")
	if tu := Start(DefaultFloor); tu != nil {
		tu.Stop()
		t.Fatal("tuner started although GOGC is set")
	}
	var none *Tuner
	none.Stop()
}

func TestIdle(t *testing.T) {
	for _, tt := range []struct {
		allocated, garbage uint64
		want               bool
	}{
		{0, 32 << 20, true},
		{512 << 10, 9 << 20, true},
		{2 << 20, 32 << 20, false}, // still allocating: the goal will come
		{0, 4 << 20, false},        // little to gain
	} {
		if got := Idle(tt.allocated, tt.garbage); got != tt.want {
			t.Errorf("Idle(%d, %d) = %v, want %v", tt.allocated, tt.garbage, got, tt.want)
		}
	}
}

// sink keeps the garbage below from being optimized away.
var sink []byte

// TestIdleHeapIsCollected leaves 32 MiB of garbage and stops
// allocating: the tuner must collect it without waiting for the goal.
// A collection first measures the live heap, so the tuner's goal lies a
// whole floor (256 MiB here) above it and the garbage cannot be
// collected by the goal instead.
func TestIdleHeapIsCollected(t *testing.T) {
	runtime.GC()
	freed := make(chan struct{}, 1)
	tu := start(256<<20, 20*time.Millisecond, nil, func() {
		select {
		case freed <- struct{}{}:
		default:
		}
	})
	defer tu.Stop()
	for i := 0; i < 32; i++ {
		sink = make([]byte, 1<<20)
	}
	sink = nil
	select {
	case <-freed:
	case <-time.After(10 * time.Second):
		t.Fatal("32 MiB of garbage on an idle heap was not collected")
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(); objects > live+idleGarbage {
		t.Errorf("%d bytes of garbage left after the idle collection", objects-live)
	}
}
