package main

import (
	"strings"
	"testing"
	"time"
)

// TestStreamsReport checks the stream-count figures: the spread of full
// blocks (a short last block is left out), the per-block rates, and the
// verdicts against the targets scaled to the count.
func TestStreamsReport(t *testing.T) {
	r := &streamsResult{sideOutcome: sideOutcome{side: sideContrail}, n: 25_000, total: 30 * time.Second,
		blocks: []time.Duration{10 * time.Second, 15 * time.Second, 5 * time.Second},
		rss:    200 << 10, hwm: 300 << 10, disk: 25_000 << 10, restart: time.Second}
	if got := r.spread(); got != 1.5 {
		t.Fatalf("spread = %v, want 1.5", got)
	}
	var b strings.Builder
	printStreamsTable(&b, []*streamsResult{r})
	out := b.String()
	for _, want := range []string{
		"streams/s per 10,000 streams: 1000 667 1000\n",
		"create 25,000 in ≤ 30s: met; RSS ≤ 1024 MiB: met; restart ≤ 2s: met",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
