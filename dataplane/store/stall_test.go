package store

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestStallListenerLogs: a write stall is logged when it begins, with
// Pebble's reason, and when it ends, with how long it lasted; an end
// without a beginning logs nothing.
func TestStallListenerLogs(t *testing.T) {
	var buf bytes.Buffer
	l := stallListener(slog.New(slog.NewTextHandler(&buf, nil)))
	l.WriteStallEnd()
	if buf.Len() != 0 {
		t.Fatalf("an end without a stall logged %q", buf.String())
	}
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	l.WriteStallEnd()
	out := buf.String()
	if !strings.Contains(out, `msg="store: writes stalled"`) || !strings.Contains(out, `reason="memtable count limit reached"`) ||
		!strings.Contains(out, `msg="store: writes resumed"`) || !strings.Contains(out, "stalled=") {
		t.Fatalf("stall logs: %q", out)
	}
}
