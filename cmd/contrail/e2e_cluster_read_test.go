package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// tenMessagesOffLeader starts three nodes, creates the R3 stream name
// (subjects name.>, lower case) with ten messages, and returns its
// leader and a connection to another node, as the requester's.
func tenMessagesOffLeader(t *testing.T, name string) (leader *clusterNode, nc *nats.Conn, js jetstream.JetStream) {
	t.Helper()
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	_, cjs := clusterJS(t, clusterURLs(nodes))
	subj := strings.ToLower(name)
	createR3(t, cjs, jetstream.StreamConfig{Name: name, Subjects: []string{subj + ".>"}, Replicas: 3})
	for i := range 10 {
		publishAcked(t, cjs, subj+".x", fmt.Sprintf("m%02d", i))
	}
	leader, _ = streamLeader(t, cjs, nodes, name)
	nc, js = clusterJS(t, without(nodes, leader)[0].URL)
	return leader, nc, js
}

// awaitNewLeader waits until the stream is led by a node other than old.
func awaitNewLeader(t *testing.T, js jetstream.JetStream, name string, old *clusterNode) {
	t.Helper()
	waitFor(t, clusterTimeout(), "a new leader for "+name, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, name)
		if err != nil || s.CachedInfo().Cluster == nil {
			return false
		}
		l := s.CachedInfo().Cluster.Leader
		return l != "" && l != old.ID
	})
}

// streamInfoNow is the stream's info as the cluster answers it now, or
// nil while no leader answers. Each ask is bounded on its own: an info
// asked while the leadership moves can go unanswered, as on nats-server,
// and nats.go waits for its answer until the context ends.
func streamInfoNow(js jetstream.JetStream, name string) *jetstream.StreamInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil || s.CachedInfo().Cluster == nil || s.CachedInfo().Cluster.Leader == "" {
		return nil
	}
	return s.CachedInfo()
}

// stepDownStream moves the stream's leadership off the node leading it
// now (the balancer may have moved it since the stream was made), and
// returns that node's name and the first info another leader answers.
// A stepdown is refused while no follower is current (a loaded machine);
// it is asked again then, unless the leadership moved anyway.
func stepDownStream(t *testing.T, nc *nats.Conn, js jetstream.JetStream, name string) (was string, info *jetstream.StreamInfo) {
	t.Helper()
	waitFor(t, clusterTimeout(), name+"'s leader", func() bool {
		if i := streamInfoNow(js, name); i != nil {
			was = i.Cluster.Leader
		}
		return was != ""
	})
	waitFor(t, clusterTimeout(), "a stepdown of "+name+" from "+was, func() bool {
		if i := streamInfoNow(js, name); i != nil && i.Cluster.Leader != was {
			return true
		}
		r := clusterAPI(t, nc, "$JS.API.STREAM.LEADER.STEPDOWN."+name, "")
		if !r.Success {
			t.Logf("stepdown of %s from %s: %+v", name, was, r.Error)
		}
		return r.Success
	})
	waitFor(t, clusterTimeout(), "a new leader for "+name, func() bool {
		info = streamInfoNow(js, name)
		return info != nil && info.Cluster.Leader != was
	})
	return was, info
}

// A deposed leader that has not yet heard of its successor must not
// answer reads from the state it held: the stream's leader is stopped
// (SIGSTOP) while a new one is elected, acks and writes are confirmed by
// the new one, and info requests are sent while the old one is stopped,
// so they wait in its socket and reach it the moment it continues,
// before raft tells it it was replaced. Every answer the requester gets,
// from any node, must show the confirmed acks and writes.
func TestClusterStaleLeaderRead(t *testing.T) {
	old, nc, vjs := tenMessagesOffLeader(t, "READS")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := vjs.CreateOrUpdateConsumer(ctx, "READS", jetstream.ConsumerConfig{Durable: "R", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	// ackAll fetches n messages and double-acks each: every ack is
	// confirmed by the leader of the moment.
	ackAll := func(n int) {
		t.Helper()
		for got := 0; got < n; {
			batch, err := cons.Fetch(n-got, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				continue
			}
			for msg := range batch.Messages() {
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				if err := msg.DoubleAck(actx); err == nil {
					got++
				}
				acancel()
			}
		}
	}
	ackAll(5)

	pause(t, old)
	awaitNewLeader(t, vjs, "READS", old)
	ackAll(5) // confirmed floor 10, by the new leader
	var last uint64
	for i := range 5 {
		last = publishAcked(t, vjs, "reads.x", fmt.Sprintf("b%02d", i)).Sequence
	}

	// The requests reach the stopped node's socket, to be read as it
	// continues.
	inbox := nats.NewInbox()
	sub := subscribeSync(t, nc, inbox+".>")
	const rounds = 20
	for i := range rounds {
		for _, subj := range []string{"$JS.API.CONSUMER.INFO.READS.R", "$JS.API.STREAM.INFO.READS"} {
			if err := nc.PublishRequest(subj, fmt.Sprintf("%s.%d", inbox, i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush(t, nc)
	resume(t, old)
	answers, refusals := 0, 0
	for {
		msg, err := sub.NextMsg(3 * time.Second)
		if err != nil {
			break
		}
		answers++
		var info struct {
			Error    *struct{ Description string } `json:"error"`
			AckFloor *struct {
				Stream uint64 `json:"stream_seq"`
			} `json:"ack_floor"`
			State *struct {
				LastSeq uint64 `json:"last_seq"`
			} `json:"state"`
			Cluster *struct{ Leader string } `json:"cluster"`
		}
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatalf("answer %q: %v", msg.Data, err)
		}
		switch {
		case info.Error != nil:
			// A node that knows no leader for the stream's group says
			// so; the client's request takes the first answer, and the
			// leader's comes first.
			refusals++
		case info.AckFloor != nil && info.AckFloor.Stream < 10:
			t.Errorf("consumer info from %+v: ack floor %d, but every ack up to 10 was confirmed", info.Cluster, info.AckFloor.Stream)
		case info.State != nil && info.State.LastSeq < last:
			t.Errorf("stream info from %+v: last seq %d, but %d was acknowledged", info.Cluster, info.State.LastSeq, last)
		}
	}
	// Not every request need be answered: one that reaches each node
	// while leadership moves again (the continued node disturbs the
	// election on slow, race-built nodes) is answered by none, and a
	// client asks again.
	t.Logf("%d answers to %d requests (%d of them refusals)", answers, 2*rounds, refusals)
	waitFor(t, clusterTimeout(), "consumer info from the settled cluster", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		info, err := cons.Info(rctx)
		if err != nil {
			return false
		}
		if info.AckFloor.Stream < 10 {
			t.Fatalf("settled consumer info: ack floor %d, but every ack up to 10 was confirmed", info.AckFloor.Stream)
		}
		return true
	})
}

// An ack answers only what the cluster records: the stream's leader
// delivers messages and is stopped before it writes the deliveries (they
// are written lazily, a few times a second); its successor never heard
// of them. Double acks of them reach the successor, which must not
// confirm them (nats-server leaves them unanswered too): a confirmed ack
// is final for the client, yet nothing records it and the message comes
// again. Every ack that is confirmed must show in the consumer's ack
// floor once the cluster settles, and the messages are delivered again
// and can then be acked for real.
func TestClusterAckOfUnknownDelivery(t *testing.T) {
	old, _, vjs := tenMessagesOffLeader(t, "UNK")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cons, err := vjs.CreateOrUpdateConsumer(ctx, "UNK", jetstream.ConsumerConfig{Durable: "U",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(n int) []jetstream.Msg {
		t.Helper()
		var msgs []jetstream.Msg
		for len(msgs) < n {
			batch, err := cons.Fetch(n-len(msgs), jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				if ctx.Err() != nil {
					t.Fatal(err)
				}
				continue // leadership moving: pull again
			}
			for m := range batch.Messages() {
				msgs = append(msgs, m)
			}
		}
		return msgs
	}
	// The first delivery is written at once; the next, within the
	// coalescing interval, waits for it, and the leader is stopped first.
	first := fetch(1)
	if err := first[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	held := fetch(4)
	pause(t, old)
	awaitNewLeader(t, vjs, "UNK", old)
	confirmed := map[uint64]bool{1: true}
	for _, m := range held {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(ctx, time.Second)
		if m.DoubleAck(actx) == nil {
			confirmed[md.Sequence.Stream] = true
		}
		acancel()
	}
	floor := uint64(0)
	for confirmed[floor+1] {
		floor++
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acks confirmed %v (floor %d); consumer ack floor %d, %d ack pending", confirmed, floor,
		info.AckFloor.Stream, info.NumAckPending)
	if info.AckFloor.Stream < floor {
		t.Fatalf("ack floor %d, but every ack up to %d was confirmed", info.AckFloor.Stream, floor)
	}
	// What was not confirmed comes again, and is acked for real. An ack
	// may go unanswered again if leadership moves once more (the
	// continued node may take it back): as a client does, ack with a
	// short wait and take the message again when it comes back.
	resume(t, old)
	waitFor(t, time.Minute, "every message up to 5 acknowledged", func() bool {
		for _, m := range fetch(1) {
			actx, acancel := context.WithTimeout(ctx, time.Second)
			_ = m.DoubleAck(actx)
			acancel()
		}
		ictx, icancel := context.WithTimeout(ctx, time.Second)
		defer icancel()
		if i, err := cons.Info(ictx); err == nil {
			info = i
		}
		return info.AckFloor.Stream >= 5
	})
}

// TestClusterEphemeralConsumersOutliveStepdown: nats.go's ephemeral
// consumers of an R3 stream go on across a stream leader stepdown, as on
// nats-server: an ephemeral pull consumer is still there on the new
// leader, with its ack floor, and an ordered consumer read with Next and
// a short max wait reads on.
func TestClusterEphemeralConsumersOutliveStepdown(t *testing.T) {
	_, nc, js := tenMessagesOffLeader(t, "EPH")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 10; i < 20; i++ {
		publishAcked(t, js, "eph.x", fmt.Sprintf("m%02d", i))
	}
	ordered, err := js.OrderedConsumer(ctx, "EPH", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := ordered.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	// readOrdered reads m<from>..m<to-1> from the ordered consumer, each
	// Next waiting at most 2 s, for at most 20 s in all.
	readOrdered := func(from, to int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for i := from; i < to; {
			msg, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("ordered consumer: waiting for m%02d: %v", i, err)
				}
				continue
			}
			if want := fmt.Sprintf("m%02d", i); string(msg.Data()) != want {
				t.Fatalf("ordered consumer: got %q, want %q", msg.Data(), want)
			}
			i++
		}
	}
	readOrdered(0, 10)
	eph, err := js.CreateConsumer(ctx, "EPH", jetstream.ConsumerConfig{Name: "eph", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := eph.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("double ack: %v", err)
		}
		n++
	}
	if n != 10 {
		t.Fatalf("ephemeral pull consumer fetched %d messages, want 10", n)
	}

	stepDownStream(t, nc, js, "EPH")
	readOrdered(10, 20)
	c, err := js.Consumer(ctx, "EPH", "eph")
	if err != nil {
		t.Fatalf("ephemeral pull consumer after the stepdown: %v", err)
	}
	if floor := c.CachedInfo().AckFloor.Stream; floor != 10 {
		t.Fatalf("ephemeral pull consumer after the stepdown: ack floor %d, want 10", floor)
	}
	batch, err = c.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 10
	for m := range batch.Messages() {
		if want := fmt.Sprintf("m%02d", i); string(m.Data()) != want {
			t.Fatalf("ephemeral pull consumer after the stepdown: got %q, want %q", m.Data(), want)
		}
		i++
	}
	if i != 20 {
		t.Fatalf("ephemeral pull consumer after the stepdown: fetched up to m%02d, want m19", i-1)
	}
}
