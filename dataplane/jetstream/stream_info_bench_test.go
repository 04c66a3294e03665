package jetstream

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// BenchmarkStreamInfo is STREAM.INFO on a stream of 300,000 messages over
// 30,000 subjects: plain (what every client asks), and with a subjects
// filter naming one subject.
func BenchmarkStreamInfo(b *testing.B) {
	const msgs, subjects = 300_000, 30_000
	e, acc, _ := openEngine(b, vfs.NewMem(), unpacedIngest)
	createStream(b, acc, api.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}})
	for i := range msgs {
		// No reply: the capture path queues without waiting, so the
		// applier commits in large groups.
		acc.Publish(fmt.Sprintf("big.%d", i%subjects), "", nil, []byte("payload"))
	}
	e.mu.Lock()
	s := e.mu.accounts["A"].lookup("BIG")
	e.mu.Unlock()
	for deadline := time.Now().Add(time.Minute); s.durable.Load() < msgs; {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d messages stored", s.durable.Load(), msgs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The first STREAM.INFO builds the per-subject summaries, once, in
	// steps on the applier: meanwhile another stream's publishes wait at
	// most one step.
	createStream(b, acc, api.StreamConfig{Name: "OTHER", Subjects: []string{"other"}})
	stop := make(chan struct{})
	worst := make(chan time.Duration)
	go func() {
		var w time.Duration
		for {
			select {
			case <-stop:
				worst <- w
				return
			default:
			}
			t0 := time.Now()
			publish(b, acc, "other", nil, []byte("x"))
			w = max(w, time.Since(t0))
		}
	}()
	start := time.Now()
	acc.request(b, "$JS.API.STREAM.INFO.BIG", nil, nil)
	first := time.Since(start)
	close(stop)
	b.Logf("first STREAM.INFO: %v; slowest publish to another stream meanwhile: %v", first, <-worst)
	for _, bc := range []struct{ name, body string }{
		{"plain", ""},
		{"subjects_filter_one", `{"subjects_filter":"big.7"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var resp api.StreamInfoResponse
			for b.Loop() {
				resp = api.StreamInfoResponse{}
				if err := json.Unmarshal(acc.request(b, "$JS.API.STREAM.INFO.BIG", nil, []byte(bc.body)), &resp); err != nil {
					b.Fatal(err)
				}
			}
			if resp.Error != nil || resp.StreamInfo.State.NumSubjects != subjects || resp.StreamInfo.State.Msgs != msgs {
				b.Fatalf("info: %+v", resp)
			}
		})
	}
}
