package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestMonitorJsz checks /jsz and the /varz jetstream section: nats-server's
// field names (compared with a real nats-server), totals that follow the
// streams, and the accounts / streams / config detail options.
func TestMonitorJsz(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	ref := startNatsServer(t, "-js", "-sd", t.TempDir())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, url := range []string{n.URL, ref.URL} {
		js, err := jetstream.New(connect(t, url))
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"A", "B"} {
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
				t.Fatal(err)
			}
			for j := 0; j <= i; j++ {
				if _, err := js.Publish(ctx, fmt.Sprintf("%s.x", name), []byte("0123456789")); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	var ours, theirs map[string]any
	getJSON(t, n.MonURL+"/jsz", &ours)
	getJSON(t, ref.MonURL+"/jsz", &theirs)
	compareKeys(t, "/jsz", ours, theirs, []string{"server_id", "now", "config", "memory", "storage",
		"reserved_memory", "reserved_storage", "accounts", "ha_assets", "api", "streams", "consumers",
		"messages", "bytes", "total"})
	if num(t, ours, "streams") != 2 || num(t, ours, "messages") != 3 || num(t, ours, "storage") <= 0 {
		t.Errorf("/jsz totals: streams %v messages %v storage %v", ours["streams"], ours["messages"], ours["storage"])
	}
	cfg, _ := ours["config"].(map[string]any)
	if cfg["store_dir"] == nil || num(t, cfg, "max_storage") <= 0 || num(t, cfg, "max_memory") <= 0 {
		t.Errorf("/jsz config: %v", cfg)
	}
	if _, ok := ours["account_details"]; ok {
		t.Errorf("/jsz without accounts=true lists account details")
	}

	var detail struct {
		Accounts []struct {
			Name    string `json:"name"`
			Streams []struct {
				Name   string         `json:"name"`
				Config map[string]any `json:"config"`
				State  struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	getJSON(t, n.MonURL+"/jsz?accounts=true&streams=true&config=true", &detail)
	if len(detail.Accounts) != 1 || len(detail.Accounts[0].Streams) != 2 {
		t.Fatalf("/jsz detail: %+v", detail)
	}
	for i, s := range detail.Accounts[0].Streams {
		if s.Name != []string{"A", "B"}[i] || s.State.Msgs != uint64(i+1) || s.Config["name"] != s.Name {
			t.Errorf("/jsz stream %d: %+v", i, s)
		}
	}

	v := varz(t, n.MonURL)
	jsv, _ := v["jetstream"].(map[string]any)
	stats, _ := jsv["stats"].(map[string]any)
	if jsv["config"] == nil || stats == nil || num(t, stats, "storage") <= 0 {
		t.Errorf("/varz jetstream section: %v", v["jetstream"])
	}
}
