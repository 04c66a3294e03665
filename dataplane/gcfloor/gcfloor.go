// Package gcfloor lets a small Go heap grow by a fixed amount of garbage
// between collections, instead of by its own size.
//
// Go collects once the heap reaches live × (1 + GOGC/100), and at least
// 4 MiB. A data-plane node's live Go heap is small (a few MiB: Pebble
// keeps its memtables and block cache outside it), while its message path
// allocates a few hundred bytes per message, so at 170k messages a second
// a node collected 45 times a second and spent about a sixth of its CPU in
// the collector and the allocator.
//
// After every collection the tuner sets GOGC so that the next one comes
// after about floor bytes of allocation (never under 100), and a soft
// memory limit of the memory in use plus the floor, so a live heap that
// grows fast (a node loading its streams) is collected within one floor
// of growth rather than at a multiple of it. A heap whose live part
// exceeds the floor runs at Go's default: memory per connection and per
// stream scales as before, and the floor bounds what the tuning adds.
// GOGC in the environment is the operator's choice and turns the tuning
// off; a GOMEMLIMIT stays the ceiling.
//
// Garbage left when a node goes idle would otherwise stay until Go's
// two-minute forced collection, and its pages longer: an idle node with
// 1,000 tenants held 24 MiB more than without the floor. So once a second
// the tuner checks the allocation since the last check, and when the
// node allocated under a MiB while the heap holds more than 8 MiB of
// garbage, it collects and returns the memory to the OS. Under any load
// the check finds more allocation and does nothing.
package gcfloor

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// DefaultFloor is the garbage a node may accumulate between collections
// when its live heap is smaller than that.
const DefaultFloor = 64 << 20

// Idle thresholds: a node that allocated less than idleAlloc in one
// check interval is idle, and an idle heap holding more than idleGarbage
// beyond its live part is collected and its memory returned.
const (
	idleAlloc    = 1 << 20
	idleGarbage  = 8 << 20
	idleInterval = time.Second
)

// Idle reports whether a heap that allocated allocated bytes since the
// last check and holds garbage bytes beyond its live part should be
// collected now rather than at its next goal.
func Idle(allocated, garbage uint64) bool {
	return allocated < idleAlloc && garbage > idleGarbage
}

// maxPercent bounds the percent set for a nearly empty heap.
const maxPercent = 100_000

// Percent is the GOGC value that lets the heap grow by floor bytes
// before its next collection. Go sets the next collection's goal at
// live + scannable × GOGC/100, where scannable is the live heap plus the
// stacks and globals the collection scanned.
func Percent(scannable, floor uint64) int {
	if scannable == 0 || floor/scannable >= maxPercent/100 {
		return maxPercent
	}
	return max(100, int(floor*100/scannable))
}

// Tuner adjusts the collector after each collection until stopped.
type Tuner struct {
	floor  uint64
	sample []metrics.Sample
	// adjusted, when set, is called after each adjustment with the
	// percent and limit in force (tests).
	adjusted func(percent int, limit int64)

	// freed, when set, is called after each idle collection (tests).
	freed func()
	done  chan struct{}
	idle  sync.WaitGroup

	mu        sync.Mutex
	stopped   bool
	percent   int   // the percent last set
	prev      int   // the percent before the tuner started, restored by Stop
	prevLimit int64 // the memory limit before it started: GOMEMLIMIT's, or none
}

// Start begins tuning the collector for floor bytes of garbage, unless
// GOGC is set in the environment, in which case it returns nil. A nil
// Tuner's Stop does nothing.
func Start(floor uint64) *Tuner {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	return start(floor, idleInterval, nil, nil)
}

func start(floor uint64, interval time.Duration, adjusted func(int, int64), freed func()) *Tuner {
	t := &Tuner{
		floor: floor,
		freed: freed,
		done:  make(chan struct{}),
		sample: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
			{Name: "/memory/classes/total:bytes"},
			{Name: "/memory/classes/heap/released:bytes"},
		},
		adjusted: adjusted,
		prev:     debug.SetGCPercent(100),
		percent:  100,
	}
	t.prevLimit = debug.SetMemoryLimit(-1)
	t.mu.Lock()
	t.adjustLocked()
	t.mu.Unlock()
	t.arm()
	t.idle.Add(1)
	go t.watchIdle(interval)
	return t
}

// watchIdle collects an idle heap's garbage and returns its memory
// (see the package comment).
func (t *Tuner) watchIdle(interval time.Duration) {
	defer t.idle.Done()
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		if !read(s) {
			continue
		}
		allocs, objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
		allocated := allocs - last
		last = allocs
		if objects > live && Idle(allocated, objects-live) {
			debug.FreeOSMemory()
			if read(s) {
				last = s[0].Value.Uint64()
			}
			if t.freed != nil {
				t.freed()
			}
		}
	}
}

// read reads samples and reports whether every one is a count: a
// runtime that does not know one of the metrics reads it as KindBad,
// and Uint64 would panic on it.
func read(samples []metrics.Sample) bool {
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return false
		}
	}
	return true
}

// sentinel is garbage whose finalizer runs after the collection that
// found it unreachable: the hook for "a collection has finished". Its
// size keeps it out of the tiny allocator, whose blocks are freed (and
// finalized) together.
type sentinel struct{ _ [32]byte }

func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped {
			return
		}
		t.adjustLocked()
		t.arm()
	})
}

// adjustLocked sets the percent and the limit for what the last
// collection measured. A percent change under an eighth is left alone:
// the live heap wanders a little between collections.
func (t *Tuner) adjustLocked() {
	if !read(t.sample) {
		return
	}
	v := func(i int) uint64 { return t.sample[i].Value.Uint64() }
	live, inUse := v(0), v(3)-v(4)
	if live == 0 {
		return // no collection has measured the heap yet
	}
	limit := t.prevLimit
	if inUse < math.MaxInt64-t.floor {
		limit = min(limit, int64(inUse+t.floor))
	}
	debug.SetMemoryLimit(limit)
	p := Percent(live+v(1)+v(2), t.floor)
	if d := p - t.percent; d >= t.percent/8 || -d >= t.percent/8 {
		t.percent = p
		debug.SetGCPercent(p)
	}
	if t.adjusted != nil {
		t.adjusted(t.percent, limit)
	}
}

// Stop ends the tuning and restores the percent and memory limit the
// process had before.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	if !t.stopped {
		t.stopped = true
		close(t.done)
		debug.SetGCPercent(t.prev)
		debug.SetMemoryLimit(t.prevLimit)
	}
	t.mu.Unlock()
	t.idle.Wait()
}
