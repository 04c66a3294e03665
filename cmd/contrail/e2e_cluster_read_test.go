package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A deposed leader that has not yet heard of its successor must not
// answer reads from the state it held: the stream's leader is stopped
// (SIGSTOP) while a new one is elected, acks and writes are confirmed by
// the new one, and info requests are sent while the old one is stopped,
// so they wait in its socket and reach it the moment it continues,
// before raft tells it it was replaced. Every answer the requester gets,
// from any node, must show the confirmed acks and writes.
func TestClusterStaleLeaderRead(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	_, js := clusterJS(t, clusterURLs(nodes))
	createR3(t, js, jetstream.StreamConfig{Name: "READS", Subjects: []string{"reads.>"}, Replicas: 3})
	for i := range 10 {
		publishAcked(t, js, "reads.x", fmt.Sprintf("a%02d", i))
	}
	old, _ := streamLeader(t, js, nodes, "READS")
	var via *clusterNode // the requester's node: not the leader
	for _, cn := range nodes {
		if cn != old {
			via = cn
			break
		}
	}
	nc := connect(t, via.URL)
	t.Cleanup(nc.Close)
	vjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
	waitFor(t, clusterTimeout(), "a new leader for READS", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		s, err := vjs.Stream(rctx, "READS")
		return err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" &&
			s.CachedInfo().Cluster.Leader != old.ID
	})
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
	if answers-refusals < 2*rounds {
		t.Errorf("%d answers to %d requests (%d of them refusals)", answers, 2*rounds, refusals)
	}
	t.Logf("%d answers to %d requests (%d of them refusals)", answers, 2*rounds, refusals)
}
