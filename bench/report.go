package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Side names, in report column order.
const (
	sideContrail   = "contrail"
	sideNatsServer = "nats-server"
)

// result collects the per-round figures of one workload.
type result struct {
	w    Workload
	msgs int64
	// rounds[side] holds, per completed round, the w.metrics() values.
	rounds map[string][][]float64
	// errs[side] is the side's first failure; its remaining rounds were skipped.
	errs map[string]error
	// fsync holds, for a Sync workload, each round's fsync p50 (µs) of
	// the data dirs' disk, probed before the round's first run.
	fsync []float64
	// fsyncIdle is the same probe's p50 with the CPU idle before each
	// write (fsyncIdleGap): not part of the target, printed beside it
	// because a lone synchronous publisher's fsyncs start that way.
	fsyncIdle []float64
	// clients is how many clients ran a Sync workload.
	clients int
}

// syncSlackMicros is what the latency target allows beyond the fsync and
// nats-server's own p50: the hand-offs between receiving a write, its
// fsync and its acknowledgement.
const syncSlackMicros = 50

// syncTarget is the target for a Sync workload, from the medians:
// with one client, Contrail's p50 at most fsync p50 + nats-server p50 +
// 50 µs (an acknowledgement after fsync at the physical limit: nats-server
// does not fsync, so its p50 is the rest of the round trip); with more,
// Contrail's msgs/s at least nats-server's (group commit shares each
// fsync). ok is false when a figure is missing.
func (r *result) syncTarget() (metric string, target float64, meets, ok bool) {
	fs := medianOf(r.fsync)
	if r.clients <= 1 {
		n, c := r.median(sideNatsServer, 1), r.median(sideContrail, 1)
		target = fs + n + syncSlackMicros
		return "p50 target (us)", target, c <= target, !math.IsNaN(target) && !math.IsNaN(c)
	}
	n, c := r.median(sideNatsServer, 0), r.median(sideContrail, 0)
	return "msgs/s target", n, c >= n, !math.IsNaN(n) && !math.IsNaN(c)
}

// median returns the median of metric i over the completed rounds of side,
// or NaN if there are none.
func (r *result) median(side string, i int) float64 {
	var vs []float64
	for _, round := range r.rounds[side] {
		vs = append(vs, round[i])
	}
	return medianOf(vs)
}

// medianOf returns the median of vs (left unchanged), or NaN if empty.
func medianOf(vs []float64) float64 {
	vs = slices.Clone(vs)
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	mid := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[mid]
	}
	return (vs[mid-1] + vs[mid]) / 2
}

// formatValue renders msgs/s as a comma-grouped integer and latencies with
// one decimal.
func formatValue(m metric, v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if m.lowerBetter {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return commas(int64(math.Round(v)))
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatRound renders one round's figures, e.g. "sub msgs/s 712,345 | pub msgs/s 720,001".
func formatRound(w Workload, vals []float64) string {
	var parts []string
	for i, m := range w.metrics() {
		parts = append(parts, m.name+" "+formatValue(m, vals[i]))
	}
	return strings.Join(parts, " | ")
}

// printTable writes the aligned summary: per workload and metric, the
// median of each side and the ratio contrail / nats-server.
func printTable(out io.Writer, results []*result, rounds int) {
	rows := [][]string{{"workload", "metric", sideContrail, sideNatsServer, "ratio"}}
	anySync := false
	for _, r := range results {
		name := r.w.Name
		for i, m := range r.w.metrics() {
			c, n := r.median(sideContrail, i), r.median(sideNatsServer, i)
			ratio := "-"
			if !math.IsNaN(c) && !math.IsNaN(n) && n != 0 {
				ratio = strconv.FormatFloat(c/n, 'f', 2, 64)
			}
			cs, ns := formatValue(m, c), formatValue(m, n)
			if r.errs[sideContrail] != nil {
				cs, ratio = "FAILED", "-"
			}
			if r.errs[sideNatsServer] != nil {
				ns, ratio = "FAILED", "-"
			}
			rows = append(rows, []string{name, m.name, cs, ns, ratio})
			name = ""
		}
		if r.w.Sync {
			rows = append(rows, syncRows(r)...)
			anySync = true
		}
	}
	fmt.Fprintf(out, "\nmedian of %d round(s); ratio = contrail / nats-server (msgs/s: higher is better for contrail; latency: lower is better)\n\n", rounds)
	writeTable(out, rows, 2)
	if anySync {
		fmt.Fprintf(out, "\nfsync p50: write+fdatasync of a %d-byte block on the data dirs' disk (%d per round), back to back; idle: the same with %v of idle CPU before each write; p50 target = fsync p50 + nats-server p50 + %d us (one client); msgs/s target = nats-server's (more clients)\n",
			fsyncBlock, fsyncSamples, fsyncIdleGap, syncSlackMicros)
	}
}

// syncRows are a Sync workload's extra rows: the fsync p50 and the
// target, with "meets" or "misses" in the ratio column.
func syncRows(r *result) [][]string {
	fsm := metric{name: "fsync p50 (us)", lowerBetter: true}
	fsi := metric{name: "fsync p50 idle (us)", lowerBetter: true}
	rows := [][]string{
		{"", fsm.name, formatValue(fsm, medianOf(r.fsync)), "", ""},
		{"", fsi.name, formatValue(fsi, medianOf(r.fsyncIdle)), "", ""},
	}
	name, target, meets, ok := r.syncTarget()
	verdict := "-"
	switch {
	case r.errs[sideContrail] != nil || r.errs[sideNatsServer] != nil || !ok:
	case meets:
		verdict = "meets"
	default:
		verdict = "misses"
	}
	tm := metric{name: name, lowerBetter: r.clients <= 1}
	return append(rows, []string{"", name, formatValue(tm, target), "", verdict})
}

// writeTable writes rows as aligned columns three spaces apart: the
// first textCols left-aligned, the figures after them right-aligned.
// Widths count runes ("µs" is two columns). A row may be shorter than
// the others (a failed side's).
func writeTable(out io.Writer, rows [][]string, textCols int) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i > 0 {
				b.WriteString("   ")
			}
			if i < textCols {
				fmt.Fprintf(&b, "%-*s", widths[i], cell)
			} else {
				fmt.Fprintf(&b, "%*s", widths[i], cell)
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
}
