package main

import (
	"context"
	"errors"
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
	runChurn(t, func(t *testing.T, urls []string, aCreds string, quiet *quietTenant) string {
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
		summary := quiet.during(t, urls, aCreds, func(js jetstream.JetStream, c, n int) bool {
			stream := churned[n%len(churned)]
			name := fmt.Sprintf("e%d-%d", c, n)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
				Name: name, AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: 2 * time.Second,
			})
			return err == nil && js.DeleteConsumer(ctx, stream, name) == nil
		})

		// Nothing of the churn is left: each of A's streams ends with no
		// consumer, and still none once another node leads it.
		for _, name := range churned {
			waitFor(t, clusterTimeout(), name+"'s consumers gone", func() bool {
				info := streamInfoNow(jsA, name)
				return info != nil && info.State.Consumers == 0
			})
			was, info := stepDownStream(t, ncA, jsA, name)
			if n := info.State.Consumers; n != 0 {
				t.Fatalf("%s has %d consumers once %s no longer leads it, want 0", name, n, was)
			}
		}
		return summary
	})
}

// TestClusterStreamChurnNoisyNeighbour: tenant A creates, publishes to
// and deletes R3 streams in a loop over eight connections spread over the
// nodes, the connections sharing four names, so creates and deletes of
// one name race each other from different nodes; meanwhile tenant B
// publishes to and reads its own R3 stream. B is served throughout, and
// when the churn stops the cluster agrees on what A has: each name is a
// stream every node answers for, or none; once A deletes what is left,
// every node's store holds B's stream alone (its /jsz counts one stream,
// leader or follower), so no delete left a replica behind.
func TestClusterStreamChurnNoisyNeighbour(t *testing.T) {
	const names = 4
	var nodes []*clusterNode
	runChurnOn(t, func(cs []*clusterNode) { nodes = cs }, func(t *testing.T, urls []string, aCreds string, quiet *quietTenant) string {
		summary := quiet.during(t, urls, aCreds, func(js jetstream.JetStream, c, n int) bool {
			k := strconv.Itoa((c + n) % names)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S" + k, Subjects: []string{"s." + k}, Replicas: 3}); err != nil {
				return false
			}
			_, _ = js.Publish(ctx, "s."+k, []byte("x"))
			return js.DeleteStream(ctx, "S"+k) == nil
		})
		// Every node answers the same for each name, and deleting what
		// is left leaves A nothing.
		var conns []jetstream.JetStream
		for _, u := range urls {
			js, _ := jetstream.New(connectCreds(t, u, aCreds))
			conns = append(conns, js)
		}
		for k := range names {
			name := "S" + strconv.Itoa(k)
			var seen []bool
			for _, js := range conns {
				var exists bool
				waitFor(t, clusterTimeout(), name+" answered", func() bool {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					_, err := js.Stream(ctx, name)
					exists = err == nil
					return err == nil || errors.Is(err, jetstream.ErrStreamNotFound)
				})
				seen = append(seen, exists)
			}
			if slices.Contains(seen, !seen[0]) {
				t.Fatalf("%s: the nodes disagree after the churn, exists per node: %v", name, seen)
			}
			if seen[0] {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := conns[0].DeleteStream(ctx, name); err != nil {
					t.Fatalf("delete %s after the churn: %v", name, err)
				}
				cancel()
			}
		}
		ncA := connectCreds(t, urls[0], aCreds)
		jsA, _ := jetstream.New(ncA)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if info, err := jsA.AccountInfo(ctx); err != nil || info.Streams != 0 {
			t.Fatalf("tenant A after deleting its streams: %+v, %v", info, err)
		}
		// Contrail's nodes: only B's stream is left in any store.
		for _, cn := range nodes {
			waitFor(t, clusterTimeout(), cn.ID+"'s /jsz counting B's stream alone", func() bool {
				var j struct {
					Streams int `json:"streams"`
				}
				return fetchJSON(cn.MonURL+"/jsz", &j) == nil && j.Streams == 1
			})
		}
		return summary
	})
}

// churnRun is one side's run of a churn scenario: it churns as tenant A
// while quiet (tenant B) is served, checks what the churn left, and
// describes the run.
type churnRun func(t *testing.T, urls []string, aCreds string, quiet *quietTenant) string

// runChurn runs scenario on a nats-server cluster, as the reference for
// its outcomes, then on a Contrail cluster; both sides' figures are
// logged, not compared.
func runChurn(t *testing.T, scenario churnRun) { runChurnOn(t, nil, scenario) }

// runChurnOn is runChurn; onNodes, if set, is given Contrail's nodes
// before its run (nil during the reference run).
func runChurnOn(t *testing.T, onNodes func([]*clusterNode), scenario churnRun) {
	w := newOpWorld(t)
	withJS := func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() }
	a := w.account("A", withJS)
	b := w.account("B", withJS)
	aCreds, _ := a.user("a", nil)
	bCreds, _ := b.user("b", nil)
	refURLs := startRefOpCluster(t, w, aCreds)
	if onNodes != nil {
		onNodes(nil)
	}
	t.Logf("nats-server: %s", scenario(t, refURLs, aCreds, newQuietTenant(t, refURLs, bCreds)))
	nodes := opCluster(t, w)
	if onNodes != nil {
		onNodes(nodes)
	}
	var urls []string
	for _, cn := range nodes {
		urls = append(urls, cn.URL)
	}
	t.Logf("contrail: %s", scenario(t, urls, aCreds, newQuietTenant(t, urls, bCreds)))
	for _, cn := range nodes {
		if !cn.running() {
			t.Fatalf("%s exited during the churn", cn.ID)
		}
	}
}

// quietTenant is tenant B of a churn scenario: an R3 stream of its own,
// published to synchronously, each publish acknowledged within
// churnPubTimeout, and read back.
type quietTenant struct {
	js   jetstream.JetStream
	next int // the number of B's next message
}

func newQuietTenant(t *testing.T, urls []string, bCreds string) *quietTenant {
	nc := connectCreds(t, strings.Join(urls, ","), bCreds)
	js, _ := jetstream.New(nc)
	jsReady(t, js)
	createR3(t, js, jetstream.StreamConfig{Name: "OWN", Subjects: []string{"own"}, Replicas: 3})
	return &quietTenant{js: js}
}

// publish publishes B's next n messages and returns their latencies,
// sorted.
func (q *quietTenant) publish(t *testing.T, n int) []time.Duration {
	t.Helper()
	lat := make([]time.Duration, 0, n)
	for range n {
		i := q.next
		ctx, cancel := context.WithTimeout(context.Background(), churnPubTimeout)
		began := time.Now()
		// Retried past nats.go's default two: a leadership move of the
		// stream (a balancing move, here) leaves it without a subscriber
		// for a moment, on nats-server too; the bound is churnPubTimeout.
		ack, err := q.js.Publish(ctx, "own", []byte("m"+strconv.Itoa(i)), jetstream.WithRetryAttempts(8))
		cancel()
		if err != nil {
			t.Fatalf("tenant B's publish %d: %v", i, err)
		}
		if ack.Sequence != uint64(i+1) {
			t.Fatalf("tenant B's publish %d: stored at %d, want %d", i, ack.Sequence, i+1)
		}
		lat = append(lat, time.Since(began))
		q.next++
	}
	slices.Sort(lat)
	return lat
}

// readBack reads every message B published, in order, through an
// ordered consumer.
func (q *quietTenant) readBack(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, err := q.js.OrderedConsumer(ctx, "OWN", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("tenant B's ordered consumer: %v", err)
	}
	for i := 0; i < q.next; {
		batch, err := reader.Fetch(q.next-i, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("tenant B's fetch: %v", err)
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
			if errors.Is(batch.Error(), nats.ErrNoResponders) && ctx.Err() == nil {
				// The new consumer's pull subject has not reached every
				// server's interest yet (seen on nats-server): a client
				// asks again, after a pause as nats.go's own retries make.
				time.Sleep(50 * time.Millisecond)
				continue
			}
			t.Fatalf("tenant B's fetch: nothing after m%d (%v)", i-1, batch.Error())
		}
	}
}

// during publishes B's messages alone, then again while tenant A churns
// (churnConns connections spread over urls, each calling churn with its
// number and a running count until stopped; churn reports whether its
// round fully succeeded), reads them all back while A still churns, and
// stops A. It describes B's latencies and A's rounds.
func (q *quietTenant) during(t *testing.T, urls []string, aCreds string, churn func(js jetstream.JetStream, c, n int) bool) string {
	t.Helper()
	alone := q.publish(t, churnQuiet)
	var rounds, failed atomic.Int64
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
				if !churn(js, c, n) {
					failed.Add(1)
				}
				rounds.Add(1)
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
	waitFor(t, clusterTimeout(), "tenant A's churn under way", func() bool { return rounds.Load()-failed.Load() >= 50 })
	before := rounds.Load()
	churned := q.publish(t, churnQuiet)
	during := rounds.Load() - before
	q.readBack(t)
	stopChurn()
	if during == 0 {
		t.Fatal("tenant A's churn stalled while tenant B published")
	}
	return fmt.Sprintf("tenant B's publish p50/max alone %v/%v, during the churn %v/%v; tenant A's rounds %d (%d while B published %d), %d not fully successful",
		pct(alone, 50), pct(alone, 100), pct(churned, 50), pct(churned, 100),
		rounds.Load(), during, churnQuiet, failed.Load())
}
