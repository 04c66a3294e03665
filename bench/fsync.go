package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The fsync probe: what one durable write costs on the disk that holds the
// servers' data dirs. A durable publish cannot be acknowledged sooner than
// one such write after it arrives, so the probe's median is the floor of
// the sync workloads' latency (see syncTarget).

const (
	// fsyncBlock is the probe's write: one small block, as a single
	// message's WAL record is.
	fsyncBlock = 4096
	// fsyncSlots is how many blocks the probe file holds; writes cycle
	// through them, so they overwrite allocated blocks and the flush
	// carries data only, as a WAL writing into a recycled file does.
	fsyncSlots = 64
	// fsyncSamples is how many write+flush pairs one probe times.
	fsyncSamples = 500
	// fsyncIdleGap is how long the idle probe sleeps before each write:
	// about one loopback round trip, the time a single synchronous
	// publisher leaves between one acknowledgement and its next write.
	fsyncIdleGap = 100 * time.Microsecond
)

// fsyncProbe times n writes of one block, each followed by a data flush
// (fdatasync where there is one), in a file created in dir and removed
// after; it returns the per-write latencies in µs, sorted. With gap > 0
// the probe sleeps that long before each write, so every write starts
// from an idle CPU as a lone synchronous publisher's does; back to back
// (gap 0) the CPU never idles long and the flush is cheaper, on virtual
// machines by tens of µs (the guest's idle state delays the wake-up
// that ends the flush).
func fsyncProbe(dir string, n int, gap time.Duration) ([]float64, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	path := f.Name()
	defer os.Remove(path)
	defer f.Close()
	block := make([]byte, fsyncBlock)
	for i := range block {
		block[i] = byte(i)
	}
	// Allocate the slots first, with a full fsync, so the timed flushes
	// write no metadata (size, extents).
	for i := range fsyncSlots {
		if _, err := f.WriteAt(block, int64(i*fsyncBlock)); err != nil {
			return nil, fmt.Errorf("fsync probe: writing %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync probe: syncing %s: %w", path, err)
	}
	lat := make([]float64, 0, n)
	for i := range n {
		block[0] = byte(i) // each write changes the block
		if gap > 0 {
			time.Sleep(gap)
		}
		start := time.Now()
		if _, err := f.WriteAt(block, int64((i%fsyncSlots)*fsyncBlock)); err != nil {
			return nil, fmt.Errorf("fsync probe: writing %s: %w", path, err)
		}
		if err := datasync(f); err != nil {
			return nil, fmt.Errorf("fsync probe: syncing %s: %w", path, err)
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	slices.Sort(lat)
	return lat, nil
}

// percentile returns the q-quantile (0..1) of sorted values, nearest
// rank, or NaN for none.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// fsyncP50 probes dir and returns the median write+flush latency in µs,
// back to back and after an idle gap.
func fsyncP50(dir string) (busy, idle float64, err error) {
	dir = filepath.Clean(dir)
	lat, err := fsyncProbe(dir, fsyncSamples, 0)
	if err != nil {
		return math.NaN(), math.NaN(), err
	}
	busy = percentile(lat, 0.5)
	if lat, err = fsyncProbe(dir, fsyncSamples, fsyncIdleGap); err != nil {
		return math.NaN(), math.NaN(), err
	}
	return busy, percentile(lat, 0.5), nil
}
