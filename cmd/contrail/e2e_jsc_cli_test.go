package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// The nats CLI's consumer commands (validated by jsm.go's schemas), run
// the same way against contrail and nats-server.

func TestJSCConsumerCLI(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	for _, tgt := range []*jsTarget{ours, ref} {
		mkStream(t, tgt.js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		pubN(t, tgt.js, "orders.new", "o", 5)
		pubN(t, tgt.js, "orders.old", "x", 2)
	}
	// cli runs the same command on both and returns both outputs.
	cli := func(args ...string) (string, string) {
		return runCLI(t, ours.url, args...), runCLI(t, ref.url, args...)
	}
	cli("consumer", "add", "ORDERS", "PULL", "--pull", "--ack", "explicit", "--deliver", "all", "--filter", "orders.new",
		"--max-deliver", "5", "--wait", "30s", "--max-pending", "100", "--replay", "instant", "--description", "cli pull",
		"--no-headers-only", "--max-waiting", "50", "--max-pull-batch", "10", "--backoff", "none", "--sample=50", "--defaults")
	cli("consumer", "add", "ORDERS", "PUSH", "--target", "deliver.push", "--ack", "all", "--deliver", "last",
		"--heartbeat", "5s", "--flow-control", "--deliver-group", "grp", "--replay", "instant", "--defaults")
	cli("consumer", "add", "ORDERS", "SEQ", "--pull", "--ack", "none", "--deliver", "3", "--defaults")

	// info --json: the same document once times are masked.
	for _, name := range []string{"PULL", "PUSH", "SEQ"} {
		a, b := cli("consumer", "info", "ORDERS", name, "--json")
		var da, db map[string]any
		if err := json.Unmarshal([]byte(a), &da); err != nil {
			t.Fatalf("contrail info %s: %v\n%s", name, err, a)
		}
		if err := json.Unmarshal([]byte(b), &db); err != nil {
			t.Fatalf("nats-server info %s: %v\n%s", name, err, b)
		}
		if d := jsonDiff("", maskReply(da), maskReply(db)); len(d) > 0 {
			t.Errorf("consumer info %s --json differs:\n  %s", name, strings.Join(d, "\n  "))
		}
	}
	a, b := cli("consumer", "ls", "ORDERS", "--names")
	if strings.Fields(a) == nil || strings.Join(strings.Fields(a), " ") != strings.Join(strings.Fields(b), " ") {
		t.Errorf("consumer ls --names:\ncontrail:    %q\nnats-server: %q", a, b)
	}
	a, _ = cli("consumer", "ls", "ORDERS")
	for _, want := range []string{"PULL", "PUSH", "SEQ"} {
		if !strings.Contains(a, want) {
			t.Errorf("consumer ls lacks %s:\n%s", want, a)
		}
	}
	// next: fetch and acknowledge, the same messages on both.
	a, b = cli("consumer", "next", "ORDERS", "PULL", "--count", "3", "--ack", "--raw")
	if strings.TrimSpace(a) != "o1\no2\no3" || a != b {
		t.Errorf("consumer next --raw:\ncontrail:    %q\nnats-server: %q", a, b)
	}
	a, b = cli("consumer", "next", "ORDERS", "SEQ", "--raw")
	if strings.TrimSpace(a) != "o3" || a != b {
		t.Errorf("consumer next from seq 3:\ncontrail:    %q\nnats-server: %q", a, b)
	}
	a, b = cli("consumer", "next", "ORDERS", "PULL", "--nak", "--raw")
	if strings.TrimSpace(a) != "o4" || a != b {
		t.Errorf("consumer next --nak:\ncontrail:    %q\nnats-server: %q", a, b)
	}
	a, b = cli("consumer", "next", "ORDERS", "PULL", "--raw")
	if strings.TrimSpace(a) != "o4" || a != b {
		t.Errorf("consumer next after a nak:\ncontrail:    %q\nnats-server: %q", a, b)
	}
	var ia, ib map[string]any
	a, b = cli("consumer", "info", "ORDERS", "PULL", "--json")
	json.Unmarshal([]byte(a), &ia)
	json.Unmarshal([]byte(b), &ib)
	if d := jsonDiff("", maskReply(ia), maskReply(ib)); len(d) > 0 {
		t.Errorf("consumer info after next differs:\n  %s", strings.Join(d, "\n  "))
	}
	// Plain info and report must render (jsm.go validates the replies).
	a, _ = cli("consumer", "info", "ORDERS", "PULL")
	for _, want := range []string{"cli pull", "Ack Policy: Explicit", "orders.new", "Redelivered Messages: 0", "Unprocessed Messages: 1"} {
		if !strings.Contains(a, want) {
			t.Errorf("consumer info lacks %q:\n%s", want, a)
		}
	}
	a, _ = cli("consumer", "report", "ORDERS")
	for _, want := range []string{"PULL", "PUSH", "SEQ"} {
		if !strings.Contains(a, want) {
			t.Errorf("consumer report lacks %s:\n%s", want, a)
		}
	}
	cli("consumer", "rm", "ORDERS", "SEQ", "-f")
	a, b = cli("consumer", "ls", "ORDERS", "--names")
	if strings.Contains(a, "SEQ") || strings.Join(strings.Fields(a), " ") != strings.Join(strings.Fields(b), " ") {
		t.Errorf("after rm:\ncontrail:    %q\nnats-server: %q", a, b)
	}
	// Errors: a missing consumer and stream, worded as for nats-server.
	for _, args := range [][]string{{"consumer", "info", "ORDERS", "NOPE", "--no-select"}, {"consumer", "ls", "NOPE", "--no-select"}} {
		a, errA := tryCLI(t, ours.url, args...)
		b, errB := tryCLI(t, ref.url, args...)
		if errA == nil || errB == nil || a != b {
			t.Errorf("nats %s:\ncontrail (%v):    %q\nnats-server (%v): %q", strings.Join(args, " "), errA, a, errB, b)
		}
	}
}
