package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumer churn on a cluster: each create and delete of a replicated
// stream's consumer is a commit of the stream's partition, ephemeral or
// not, so a tenant churning consumers writes to the same raft log as
// every other tenant's streams on that partition.
const (
	churnStreams = 3 // one per partition: a quiet tenant's stream shares one
	churnConns   = 8 // the churning tenant's connections, spread over the nodes
	churnQuiet   = 200
	// The quiet tenant's publishes are each answered within this, churn
	// or not; nats.go's own default is 5 s.
	churnPubTimeout = 2 * time.Second
)

// TestClusterConsumerChurnNoisyNeighbour: tenant A creates and deletes
// ephemeral consumers on its R3 streams as fast as the cluster answers,
// over eight connections, while tenant B publishes synchronously to an R3
// stream on a partition A's churn commits to, and reads its messages
// back. Every one of B's publishes is acknowledged in time and B reads
// them all; A's churn is answered (or refused as too busy, never left
// unanswered for good), no node exits, and the churn leaves no consumer
// behind: what it created and did not delete (a create whose answer came
// too late) is removed for inactivity, and none comes back once another
// node leads the stream, so the removals reached the replicas too. The
// same runs on a nats-server cluster first, as the reference for the
// outcomes; the latencies of both are logged, not compared.
func TestClusterConsumerChurnNoisyNeighbour(t *testing.T) {
	w := newOpWorld(t)
	withJS := func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() }
	a := w.account("A", withJS)
	b := w.account("B", withJS)
	aCreds, _ := a.user("a", nil)
	bCreds, _ := b.user("b", nil)
	refURLs := startRefOpCluster(t, w)
	waitFor(t, startTimeout, "reference cluster accepting clients", func() bool {
		for _, u := range refURLs {
			nc, err := nats.Connect(u, nats.UserCredentials(aCreds))
			if err != nil {
				return false
			}
			nc.Close()
		}
		return true
	})
	t.Logf("nats-server: %s", churnScenario(t, refURLs, aCreds, bCreds))
	nodes := opCluster(t, w)
	var urls []string
	for _, cn := range nodes {
		urls = append(urls, cn.URL)
	}
	t.Logf("contrail: %s", churnScenario(t, urls, aCreds, bCreds))
	for _, cn := range nodes {
		if !cn.running() {
			t.Fatalf("%s exited during the churn", cn.ID)
		}
	}
}

// churnScenario runs the consumer churn on the cluster at urls and
// describes what B's publishes and A's churn got.
func churnScenario(t *testing.T, urls []string, aCreds, bCreds string) string {
	t.Helper()
	all := strings.Join(urls, ",")
	ncA := connectCreds(t, all, aCreds)
	jsA, _ := jetstream.New(ncA)
	jsReady(t, jsA)
	var churned []string
	for i := range churnStreams {
		name := "CHURN" + strconv.Itoa(i)
		createR3(t, jsA, jetstream.StreamConfig{Name: name, Subjects: []string{"churn." + strconv.Itoa(i)}, Replicas: 3})
		churned = append(churned, name)
	}
	ncB := connectCreds(t, all, bCreds)
	jsB, _ := jetstream.New(ncB)
	jsReady(t, jsB)
	createR3(t, jsB, jetstream.StreamConfig{Name: "OWN", Subjects: []string{"own"}, Replicas: 3})

	// publishQuiet publishes B's messages from..to-1, each acknowledged
	// within churnPubTimeout, and returns their latencies, sorted.
	publishQuiet := func(from, to int) []time.Duration {
		t.Helper()
		lat := make([]time.Duration, 0, to-from)
		for i := from; i < to; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), churnPubTimeout)
			began := time.Now()
			ack, err := jsB.Publish(ctx, "own", []byte("m"+strconv.Itoa(i)))
			cancel()
			if err != nil {
				t.Fatalf("tenant B's publish %d: %v", i, err)
			}
			if ack.Sequence != uint64(i+1) {
				t.Fatalf("tenant B's publish %d: stored at %d, want %d", i, ack.Sequence, i+1)
			}
			lat = append(lat, time.Since(began))
		}
		slices.Sort(lat)
		return lat
	}
	alone := publishQuiet(0, churnQuiet)

	var created, deleted, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range churnConns {
		nc := connectCreds(t, urls[c%len(urls)], aCreds)
		js, _ := jetstream.New(nc)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				stream := churned[n%len(churned)]
				name := fmt.Sprintf("e%d-%d", c, n)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
					Name: name, AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: 2 * time.Second,
				})
				if err == nil {
					created.Add(1)
					if js.DeleteConsumer(ctx, stream, name) == nil {
						deleted.Add(1)
					}
				} else {
					refused.Add(1)
				}
				cancel()
			}
		})
	}
	stopChurn := func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopChurn)
	waitFor(t, clusterTimeout(), "tenant A's churn under way", func() bool { return deleted.Load() >= 100 })
	before := created.Load()
	churnedLat := publishQuiet(churnQuiet, 2*churnQuiet)
	during := created.Load() - before

	// B reads everything back while the churn goes on.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, err := jsB.OrderedConsumer(ctx, "OWN", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("tenant B's ordered consumer during the churn: %v", err)
	}
	for i := 0; i < 2*churnQuiet; {
		batch, err := reader.Fetch(2*churnQuiet-i, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("tenant B's fetch during the churn: %v", err)
		}
		got := 0
		for m := range batch.Messages() {
			if want := "m" + strconv.Itoa(i); string(m.Data()) != want {
				t.Fatalf("tenant B read %q, want %q", m.Data(), want)
			}
			i++
			got++
		}
		if got == 0 {
			t.Fatalf("tenant B's fetch during the churn: nothing after m%d (%v)", i-1, batch.Error())
		}
	}
	stopChurn()
	if during == 0 {
		t.Fatal("tenant A's churn stalled while tenant B published")
	}

	// Nothing of the churn is left: each of A's streams ends with no
	// consumer, and still none once another node leads it.
	// info is the stream's consumer count and leader, or -1 while no one
	// answers (an info sent while the leadership moves can go
	// unanswered; each is bounded on its own).
	info := func(name string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := jsA.Stream(ctx, name)
		if err != nil || s.CachedInfo().Cluster == nil || s.CachedInfo().Cluster.Leader == "" {
			return -1, ""
		}
		return s.CachedInfo().State.Consumers, s.CachedInfo().Cluster.Leader
	}
	for _, name := range churned {
		var was string
		waitFor(t, clusterTimeout(), name+"'s consumers gone", func() bool {
			n, l := info(name)
			was = l
			return n == 0
		})
		// A refused stepdown (no follower current yet) is asked again,
		// unless the leadership moved anyway.
		waitFor(t, clusterTimeout(), "a stepdown of "+name, func() bool {
			if _, l := info(name); l != "" && l != was {
				return true
			}
			return clusterAPI(t, ncA, "$JS.API.STREAM.LEADER.STEPDOWN."+name, "").Success
		})
		n := -1
		waitFor(t, clusterTimeout(), name+" answering from a new leader", func() bool {
			var l string
			n, l = info(name)
			return n >= 0 && l != was
		})
		if n != 0 {
			t.Fatalf("%s has %d consumers once %s no longer leads it, want 0", name, n, was)
		}
	}
	return fmt.Sprintf("tenant B's publish p50/max alone %v/%v, during the churn %v/%v; tenant A created %d consumers (%d while B published %d), deleted %d, refused %d",
		pct(alone, 50), pct(alone, 100), pct(churnedLat, 50), pct(churnedLat, 100),
		created.Load(), during, churnQuiet, deleted.Load(), refused.Load())
}
