package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// reconnecting lets a test's connection fail over to another node, as a
// user's nats.go connection does by default.
func reconnecting() nats.Option {
	return func(o *nats.Options) error {
		o.AllowReconnect, o.MaxReconnect, o.ReconnectWait = true, -1, 50*time.Millisecond
		return nil
	}
}

// clusterTimeout bounds the waits for a cluster to settle (a leader after
// a failover, a replica current again): race-built nodes on two loaded
// cores run raft at three times the timeouts and several times slower.
func clusterTimeout() time.Duration {
	if raceEnabled() {
		return 3 * startTimeout
	}
	return startTimeout
}

// clusterJS connects to urls (failing over between them, as a user's
// client does) and returns the connection, closed when the test ends, and
// its JetStream context.
func clusterJS(t *testing.T, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := connect(t, urls, reconnecting())
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// clusterURLs is every node's client URL, as a user gives nats.go.
func clusterURLs(nodes []*clusterNode) string {
	urls := make([]string, len(nodes))
	for i, cn := range nodes {
		urls[i] = cn.URL
	}
	return strings.Join(urls, ",")
}

// createR3 creates cfg once the cluster can: while the meta group forms,
// requests go unanswered.
func createR3(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	var s jetstream.Stream
	waitFor(t, startTimeout, "stream "+cfg.Name+" created", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		s, err = js.CreateStream(ctx, cfg)
		return err == nil
	})
	return s
}

// publishAcked publishes one message with a message id until the
// cluster acknowledges it: a publish whose PubAck was lost to a failover
// is sent again, and the id makes the stream store it once.
func publishAcked(t *testing.T, js jetstream.JetStream, subj, id string) *jetstream.PubAck {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ack, err := js.Publish(ctx, subj, []byte(id), jetstream.WithMsgID(id),
			jetstream.WithRetryAttempts(20), jetstream.WithRetryWait(50*time.Millisecond))
		cancel()
		if err == nil {
			return ack
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
}

// streamLeader is the node that leads the stream now, per its info.
func streamLeader(t *testing.T, js jetstream.JetStream, nodes []*clusterNode, name string) (*clusterNode, *jetstream.StreamInfo) {
	t.Helper()
	var leader *clusterNode
	var info *jetstream.StreamInfo
	var last string
	waitFor(t, clusterTimeout(), "a leader for "+name, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, name)
		if err != nil {
			// Each new error once: what a wait that times out saw.
			if err.Error() != last {
				last = err.Error()
				t.Logf("stream info %s: %v", name, err)
			}
			return false
		}
		info = s.CachedInfo()
		if info.Cluster == nil {
			return false
		}
		for _, cn := range nodes {
			if cn.ID == info.Cluster.Leader {
				leader = cn
			}
		}
		return leader != nil
	})
	return leader, info
}

// TestClusterJetStreamFailover runs three real nodes: an R3 stream is
// created from a client, published to, its leader is killed while the
// publishing goes on, and every acknowledged message is then read back
// exactly once by an ordered consumer; the killed node comes back and
// catches up.
func TestClusterJetStreamFailover(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	_, js := clusterJS(t, clusterURLs(nodes))
	createR3(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
	leader, info := streamLeader(t, js, nodes, "ORDERS")
	if len(info.Cluster.Replicas) != 2 {
		t.Fatalf("replicas %+v (of %d, cluster %+v), want the two other nodes", info.Cluster.Replicas, info.Config.Replicas, info.Cluster)
	}
	acked := map[uint64]string{}
	const before, after = 200, 200
	for i := range before {
		id := fmt.Sprintf("m%04d", i)
		ack := publishAcked(t, js, "orders.new", id)
		acked[ack.Sequence] = id
	}
	killed := time.Now()
	leader.kill(t)
	var firstAck time.Duration
	for i := before; i < before+after; i++ {
		id := fmt.Sprintf("m%04d", i)
		ack := publishAcked(t, js, "orders.new", id)
		if i == before {
			firstAck = time.Since(killed)
		}
		if prev, dup := acked[ack.Sequence]; dup && prev != id {
			t.Fatalf("seq %d acknowledged for %s and %s", ack.Sequence, prev, id)
		}
		acked[ack.Sequence] = id
	}
	t.Logf("leader %s killed: first acknowledged publish %v later", leader.ID, firstAck)
	if len(acked) != before+after {
		t.Fatalf("%d distinct sequences acknowledged for %d messages", len(acked), before+after)
	}
	// Every acknowledged message exactly once, in sequence order.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	for len(seen) < len(acked) {
		// The balancer may move the partition meanwhile; the ordered
		// consumer notices the missing heartbeats and starts over where
		// it was, as it does on nats-server when a consumer's server goes.
		msg, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("reading back after %d: %v", len(seen), err)
			}
			continue
		}
		md, _ := msg.Metadata()
		id := string(msg.Data())
		if prev, dup := seen[id]; dup {
			t.Fatalf("%s stored twice (seq %d and %d)", id, prev, md.Sequence.Stream)
		}
		seen[id] = md.Sequence.Stream
		if acked[md.Sequence.Stream] != id {
			t.Fatalf("seq %d holds %s, acknowledged as %q", md.Sequence.Stream, id, acked[md.Sequence.Stream])
		}
	}
	// The killed node comes back and catches up.
	leader.restart(t)
	waitFor(t, startTimeout, leader.ID+" current again", func() bool {
		now, info := streamLeader(t, js, nodes, "ORDERS")
		if now == leader {
			return true // the balancer gave it its share of leaderships back
		}
		for _, r := range info.Cluster.Replicas {
			if r.Name == leader.ID {
				return r.Current && !r.Offline
			}
		}
		return false
	})
	s, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Msgs != uint64(len(acked)) {
		t.Fatalf("stream holds %d messages, %d acknowledged", st.Msgs, len(acked))
	}
}

// TestClusterFormsWithMajority starts two of three nodes: the cluster
// forms, an R3 stream takes writes on two nodes, and the third, started
// later, joins and catches up (its copy then serves as the leader's).
func TestClusterFormsWithMajority(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{late: 1})
	nc, js := clusterJS(t, nodes[0].URL+","+nodes[1].URL)
	createR3(t, js, jetstream.StreamConfig{Name: "EARLY", Subjects: []string{"early.>"}, Replicas: 3})
	for i := range 50 {
		publishAcked(t, js, "early.x", fmt.Sprintf("e%02d", i))
	}
	late := nodes[2]
	late.start(t)
	waitFor(t, startTimeout, late.ID+" current", func() bool {
		now, info := streamLeader(t, js, nodes, "EARLY")
		if now == late {
			return true
		}
		for _, r := range info.Cluster.Replicas {
			if r.Name == late.ID {
				return r.Current && !r.Offline
			}
		}
		return false
	})
	// The late node's copy is whole: lead from it and read everything.
	waitFor(t, startTimeout, "leadership on "+late.ID, func() bool {
		if now, _ := streamLeader(t, js, nodes, "EARLY"); now == late {
			return true
		}
		// Ask again until it has moved: a stepdown may land while the
		// late node is still being promoted to voter, or go unanswered
		// while the partition changes hands (as on nats-server, where
		// only a leader answers), so each ask has its own timeout.
		m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.EARLY", []byte(`{"placement":{"preferred":"`+late.ID+`"}}`), 2*time.Second)
		if err != nil {
			t.Logf("stepdown: %v", err)
		} else {
			t.Logf("stepdown: %s", m.Data)
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "EARLY")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Msgs != 50 || st.LastSeq != 50 {
		t.Fatalf("on %s: %+v", late.ID, st)
	}
}

// TestClusterAPIAnsweredThroughStepdowns: with one node of three killed,
// clients keep asking for an R3 stream's info and for stepdowns, half of
// them preferring the dead node, while the partition moves (stepdowns,
// the balancer). Every request is answered: none falls between the old
// leader letting go and the new one serving, nor between two terms of
// the same leader. A stepdown preferring the dead node hands over to the
// live one, as on nats-server, and never waits out a transfer that
// cannot happen with the partition paused.
func TestClusterAPIAnsweredThroughStepdowns(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	_, js := clusterJS(t, clusterURLs(nodes))
	createR3(t, js, jetstream.StreamConfig{Name: "MOVES", Subjects: []string{"moves.>"}, Replicas: 3})
	publishAcked(t, js, "moves.x", "one")
	leader, _ := streamLeader(t, js, nodes, "MOVES")
	var dead *clusterNode
	var urls []string
	for _, n := range nodes {
		if n != leader && dead == nil {
			dead = n
		} else {
			urls = append(urls, n.URL)
		}
	}
	dead.kill(t)
	nc, _ := clusterJS(t, strings.Join(urls, ","))

	asks := []struct{ subject, body string }{
		{"$JS.API.STREAM.INFO.MOVES", ""},
		{"$JS.API.STREAM.LEADER.STEPDOWN.MOVES", `{"placement":{"preferred":"` + dead.ID + `"}}`},
		{"$JS.API.STREAM.INFO.MOVES", ""},
		{"$JS.API.STREAM.LEADER.STEPDOWN.MOVES", ""},
	}
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	until := time.Now().Add(4 * time.Second)
	for _, ask := range asks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				// Answered is what counts, not how fast: a stepdown
				// waits in its account's API lane behind the others,
				// each a hand-over on a loaded race-built cluster.
				m, err := nc.Request(ask.subject, []byte(ask.body), 15*time.Second)
				kind := "unanswered"
				if err == nil {
					var r clusterAPIReply
					if jerr := json.Unmarshal(m.Data, &r); jerr != nil {
						kind = "malformed: " + string(m.Data)
					} else if r.Error != nil {
						kind = fmt.Sprintf("error %d", r.Error.ErrCode)
					} else {
						kind = "ok"
					}
				} else {
					t.Logf("%s %s: %v", ask.subject, ask.body, err)
				}
				mu.Lock()
				answers[kind]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("answers: %v", answers)
	for kind := range answers {
		if kind == "ok" || strings.HasPrefix(kind, "error ") {
			continue
		}
		t.Errorf("%d requests %s", answers[kind], kind)
	}
	if answers["ok"] == 0 {
		t.Errorf("no request succeeded: %v", answers)
	}
}
