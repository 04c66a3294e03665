package monitor

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/contrail/contrail/dataplane/jetstream"
)

// tierSource is the optional part of a JetStreamSource that reports
// tiered storage.
type tierSource interface {
	TierStatus() *jetstream.TierStatus
}

// metrics answers /metrics in Prometheus' text format: the node's tiered
// storage figures (absent while tiering is off). Not a nats-server
// endpoint; nats-server leaves metrics to an exporter reading /varz and
// /jsz, which keep their schema here.
func (m *Monitor) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var ts *jetstream.TierStatus
	if src, ok := m.js.(tierSource); ok && m.js != nil {
		ts = src.TierStatus()
	}
	writeTierMetrics(w, ts)
}

func writeTierMetrics(w io.Writer, ts *jetstream.TierStatus) {
	if ts == nil {
		return
	}
	over := 0
	if ts.OverBudget {
		over = 1
	}
	for _, g := range []struct {
		name, kind, help string
		v                float64
	}{
		{"contrail_tier_local_budget_bytes", "gauge", "The node's budget for local message bytes (0: none).", float64(ts.LocalBudget)},
		{"contrail_tier_local_bytes", "gauge", "Message bytes the node's file streams hold locally.", float64(ts.LocalBytes)},
		{"contrail_tier_over_budget", "gauge", "1 while local message bytes exceed the budget.", float64(over)},
		{"contrail_tier_upload_backlog_bytes", "gauge", "Local bytes tiering still has to move to reach 80 % of the budget.", float64(ts.UploadBacklog)},
		{"contrail_tier_cold_bytes", "gauge", "Message bytes held in segments in the object store.", float64(ts.ColdBytes)},
		{"contrail_tier_cold_messages", "gauge", "Messages held in segments in the object store.", float64(ts.ColdMsgs)},
		{"contrail_tier_segments", "gauge", "Segments in the manifests of the node's streams.", float64(ts.Segments)},
		{"contrail_tier_cache_bytes", "gauge", "Bytes held by the cold block cache.", float64(ts.CacheBytes)},
		{"contrail_tier_cache_hits_total", "counter", "Cold block cache hits.", float64(ts.CacheHits)},
		{"contrail_tier_cache_misses_total", "counter", "Cold block cache misses.", float64(ts.CacheMisses)},
		{"contrail_tier_gets_total", "counter", "Ranged GETs sent to the object store.", float64(ts.Gets)},
		{"contrail_tier_get_bytes_total", "counter", "Bytes fetched from the object store.", float64(ts.GetBytes)},
		{"contrail_tier_uploads_total", "counter", "Segments uploaded and committed.", float64(ts.Uploads)},
		{"contrail_tier_upload_bytes_total", "counter", "Bytes of segments uploaded and committed.", float64(ts.UploadBytes)},
		{"contrail_tier_upload_errors_total", "counter", "Failed segment uploads.", float64(ts.UploadErrors)},
		{"contrail_tier_rewrites_total", "counter", "Segments rewritten without their deleted messages.", float64(ts.Rewrites)},
		{"contrail_tier_deletes_total", "counter", "Objects deleted (dropped segments, abandoned uploads).", float64(ts.Deletes)},
		{"contrail_tier_delete_errors_total", "counter", "Failed object deletes (retried).", float64(ts.DeleteErrors)},
		{"contrail_tier_orphans_deleted_total", "counter", "Objects of this node no record named, removed by the orphan scan.", float64(ts.Orphans)},
		{"contrail_tier_cold_reads_total", "counter", "Message bodies read from segments.", float64(ts.ColdReads)},
		{"contrail_tier_cold_read_errors_total", "counter", "Cold reads that failed (store unreachable, checks failed).", float64(ts.ColdReadErrors)},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", g.name, g.help, g.name, g.kind, g.name, g.v)
	}
	for _, p := range []struct {
		name, help string
		v          func(*jetstream.TierStreamStatus) float64
	}{
		{"contrail_tier_stream_local_bytes", "A stream's message bytes held locally.", func(s *jetstream.TierStreamStatus) float64 { return float64(s.LocalBytes) }},
		{"contrail_tier_stream_local_messages", "A stream's messages held locally.", func(s *jetstream.TierStreamStatus) float64 { return float64(s.LocalMsgs) }},
		{"contrail_tier_stream_cold_bytes", "A stream's message bytes in segments.", func(s *jetstream.TierStreamStatus) float64 { return float64(s.ColdBytes) }},
		{"contrail_tier_stream_cold_messages", "A stream's messages in segments.", func(s *jetstream.TierStreamStatus) float64 { return float64(s.ColdMsgs) }},
		{"contrail_tier_stream_segments", "A stream's segments.", func(s *jetstream.TierStreamStatus) float64 { return float64(s.Segments) }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", p.name, p.help, p.name)
		for i := range ts.Streams {
			s := &ts.Streams[i]
			fmt.Fprintf(w, "%s{account=%q,stream=%q} %g\n", p.name, labelValue(s.Account), labelValue(s.Stream), p.v(s))
		}
	}
}

// labelValue keeps a label value on one line; %q escapes quotes and
// backslashes as the text format wants.
func labelValue(s string) string { return strings.ReplaceAll(s, "\n", " ") }
