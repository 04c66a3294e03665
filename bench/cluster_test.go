package main

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestCPUTicks(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := cpuTicks(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

// TestClusterTableMarksFailures: a side that failed after some rounds
// shows their median and says it failed; one that never completed shows
// FAILED; the targets name the failure.
func TestClusterTableMarksFailures(t *testing.T) {
	m := newClusterMetric("R3 js pub async", "msgs/s", false, rateFormat)
	m.vals[sideContrail] = []float64{100, 300}
	m.errs[sideContrail] = errors.New("ack timeout")
	m.vals[sideNatsServer] = []float64{100}
	m.errs[sideNatsServerFsy] = errors.New("boom")
	var b strings.Builder
	printClusterTable(&b, []*clusterMetric{m}, 3)
	out := b.String()
	for _, want := range []string{"200 (2 ok, then FAILED)", "2.00", "FAILED", "R3 js pub async: FAILED in a round"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestClusterTableCPURow: the CPU row of R3 js pub async has its own
// ratio and does not count as the throughput target.
func TestClusterTableCPURow(t *testing.T) {
	rate := newClusterMetric("R3 js pub async", "msgs/s", false, rateFormat)
	rate.vals[sideContrail], rate.vals[sideNatsServer] = []float64{160}, []float64{100}
	cpu := newClusterMetric("R3 js pub async", clusterCPUMetric, true, oneDecimal)
	cpu.vals[sideContrail], cpu.vals[sideNatsServer] = []float64{9}, []float64{12}
	var b strings.Builder
	printClusterTable(&b, []*clusterMetric{rate, cpu}, 1)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{clusterCPUMetric + " 9.0 12.0 0.75", "R3 async publish ≥ 1.5x nats-server: met"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if n := strings.Count(out, "R3 async publish"); n != 1 {
		t.Errorf("%d throughput verdicts, want 1:\n%s", n, b.String())
	}
}
