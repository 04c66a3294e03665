package main

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestClusterRouteNoisyNeighbour: one account floods a subject across
// nodes (four publishers on n1, a subscriber on n2) while another account
// does request/reply between the same two nodes over the same route.
// Every request of the quiet account is answered in time, and no route
// is cut as slow: the flood is paced by stalling its own publishers, not
// by cutting the route every account shares.
func TestClusterRouteNoisyNeighbour(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	b := w.account("B", nil)
	nodes := opCluster(t, w)
	aCreds, _ := a.user("a", nil)
	bCreds, _ := b.user("b", nil)

	var got atomic.Int64
	sub := connectCreds(t, nodes[1].URL, aCreds)
	if _, err := sub.Subscribe("flood", func(m *nats.Msg) { got.Add(1) }); err != nil {
		t.Fatal(err)
	}
	svc := connectCreds(t, nodes[1].URL, bCreds)
	if _, err := svc.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	sub.Flush()
	svc.Flush()
	client := connectCreds(t, nodes[0].URL, bCreds)
	waitFor(t, startTimeout, "B's service reachable from n1", func() bool {
		_, err := client.Request("svc", []byte("ping"), time.Second)
		return err == nil
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	payload := bytes.Repeat([]byte("x"), 32<<10)
	for range 4 {
		pub := connectCreds(t, nodes[0].URL, aCreds)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if pub.Publish("flood", payload) != nil {
					return
				}
			}
		}()
	}
	waitFor(t, startTimeout, "the flood arriving on n2", func() bool { return got.Load() > 1000 })

	var worst time.Duration
	for i := range 200 {
		start := time.Now()
		resp, err := client.Request("svc", []byte{byte(i)}, 2*time.Second)
		if err != nil {
			t.Fatalf("request %d of the quiet account during the flood: %v", i, err)
		}
		if len(resp.Data) != 1 || resp.Data[0] != byte(i) {
			t.Fatalf("request %d: answer %q", i, resp.Data)
		}
		worst = max(worst, time.Since(start))
	}
	close(stop)
	wg.Wait()
	t.Logf("200 requests answered during the flood, slowest %v; %d flood messages delivered", worst.Round(time.Millisecond), got.Load())
	for _, cn := range nodes[:2] {
		var v struct {
			Slow struct {
				Routes uint64 `json:"routes"`
			} `json:"slow_consumer_stats"`
		}
		if err := fetchJSON(cn.MonURL+"/varz", &v); err != nil {
			t.Fatal(err)
		}
		if v.Slow.Routes != 0 {
			t.Errorf("%s cut %d slow routes during one account's flood", cn.ID, v.Slow.Routes)
		}
	}
}
