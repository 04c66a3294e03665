package jetstream

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// BenchmarkApplierPublish measures the fsync-before-ack publish path of
// the apply path on real disk, as async JetStream publishers drive it:
// four publishers each keep 256 publishes in flight, and an
// acknowledgement frees a window slot. "stream" has no limits; "kv" is a
// KV bucket's shape (max_msgs_per_subject 1 over 1,000 keys), where a
// publish often evicts a value still in a group on its way to disk, so
// the group reads its own writes; "kv-memfs" is the same on a memory FS,
// what the path costs in CPU alone. It reports publishes per second.
func BenchmarkApplierPublish(b *testing.B) {
	for _, kind := range []string{"stream", "kv", "kv-memfs"} {
		b.Run(kind, func(b *testing.B) {
			o := store.Options{Dir: b.TempDir()}
			if kind == "kv-memfs" {
				// No disk: what the apply path costs in CPU.
				o = store.Options{Dir: "js", FS: vfs.NewMem()}
			}
			st, err := store.Open(o)
			if err != nil {
				b.Fatal(err)
			}
			e, acc, _ := engineOn(b, st)
			cfg := api.StreamConfig{Name: "S", Subjects: []string{"s.>"}}
			if kind != "stream" {
				cfg.MaxMsgsPer = 1
			}
			createStream(b, acc, cfg)
			e.mu.Lock()
			a := e.mu.accounts[acc.Name()]
			e.mu.Unlock()
			s := a.lookup("S")
			payload := make([]byte, 128)
			const publishers, window = 4, 256
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range publishers {
				wg.Go(func() {
					slots := make(chan struct{}, window)
					done := func(_ *proposal, r result) {
						if r.err != nil {
							b.Error(r.err)
						}
						<-slots
					}
					for i := w; i < b.N; i += publishers {
						slots <- struct{}{}
						s.ap.submit(&proposal{s: s, acct: a, kind: propMsg,
							subject: fmt.Sprintf("s.%d", i%1000), data: payload, done: done})
					}
					for range window {
						slots <- struct{}{}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}
