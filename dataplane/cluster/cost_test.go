package cluster

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rssKiB is the process's resident set, from /proc (Linux only).
func rssKiB(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	t.Skip("no VmRSS")
	return 0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The idle cost of three nodes running 13 groups each, in one process:
// CPU over 10 s with nothing proposed, and the memory the groups hold.
func TestIdleCost(t *testing.T) {
	if !soak() {
		t.Skip("CONTRAIL_SOAK=1 measures the idle cost (10 s)")
	}
	runtime.GC()
	rss0 := rssKiB(t)
	g0 := runtime.NumGoroutine()
	c := newTestCluster(t, three...)
	if v := os.Getenv("CONTRAIL_COMMIT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		c.tweak = func(cfg *Config) { cfg.CommitTimeout = d }
	}
	for _, name := range three {
		c.start(name)
	}
	c.waitLeaders(20 * time.Second)
	for g := uint16(0); g <= testPartitions; g++ {
		c.apply(g, "x")
	}
	// Let connections and buffers settle before measuring.
	time.Sleep(2 * time.Second)
	const idle = 10 * time.Second
	cpu0, wall0 := cpuTime(), time.Now()
	time.Sleep(idle)
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss := rssKiB(t)
	t.Logf("3 nodes x %d groups idle: CPU %v over %v = %.1f%% of one core (%.1f%% per node)",
		testPartitions+1, cpu.Round(time.Millisecond), wall.Round(time.Millisecond),
		100*cpu.Seconds()/wall.Seconds(), 100*cpu.Seconds()/wall.Seconds()/3)
	fds, _ := os.ReadDir("/proc/self/fd")
	t.Logf("open descriptors (sockets, both ends of every raft connection): %d", len(fds))
	t.Logf("RSS %d MiB -> %d MiB (+%d MiB, %.1f MiB per node); heap in use %d MiB; goroutines %d -> %d",
		rss0>>10, rss>>10, (rss-rss0)>>10, float64(rss-rss0)/1024/3, ms.HeapInuse>>20, g0, runtime.NumGoroutine())
}
