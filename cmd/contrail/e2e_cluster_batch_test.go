package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterAtomicBatch: on three real nodes an R3 stream takes an atomic
// batch as one replicated entry: the commit is acknowledged with batch and
// count, a refused batch leaves nothing on any replica, and after the
// leader is killed the new leader holds the whole batch.
func TestClusterAtomicBatch(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	nc, js := clusterJS(t, clusterURLs(nodes))
	createR3(t, js, jetstream.StreamConfig{Name: "BATCH", Subjects: []string{"batch.>"}, Replicas: 3,
		AllowAtomicPublish: true, Duplicates: time.Minute})
	leader, _ := streamLeader(t, js, nodes, "BATCH")

	send := func(id string, n int, lastHdr ...string) map[string]any {
		t.Helper()
		for i := 1; i <= n; i++ {
			m := nats.NewMsg("batch." + strconv.Itoa(i%3))
			m.Data = []byte(fmt.Sprintf("%s-%d", id, i))
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
			m.Header.Set("Nats-Msg-Id", fmt.Sprintf("%s-%d", id, i))
			if i < n {
				if err := nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
				continue
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			for j := 0; j+1 < len(lastHdr); j += 2 {
				m.Header.Set(lastHdr[j], lastHdr[j+1])
			}
			resp, err := nc.RequestMsg(m, clusterTimeout())
			if err != nil {
				t.Fatalf("commit of %s: %v", id, err)
			}
			var doc map[string]any
			if err := json.Unmarshal(resp.Data, &doc); err != nil {
				t.Fatalf("commit of %s: %q", id, resp.Data)
			}
			return doc
		}
		return nil
	}
	ack := send("first", 20)
	if ack["batch"] != "first" || ack["count"] != float64(20) || ack["seq"] != float64(20) {
		t.Fatalf("commit ack %v", ack)
	}
	// The last message repeats the first's id: the whole batch is refused.
	bad := send("second", 10, "Nats-Msg-Id", "second-1")
	if e, _ := bad["error"].(map[string]any); e == nil || e["err_code"] != float64(10201) {
		t.Fatalf("duplicate batch: %v", bad)
	}
	ack = send("third", 5)
	if ack["seq"] != float64(25) || ack["count"] != float64(5) {
		t.Fatalf("third commit ack %v", ack)
	}

	leader.kill(t)
	newLeader := leader
	waitFor(t, clusterTimeout(), "a new leader", func() bool {
		newLeader, _ = streamLeader(t, js, nodes, "BATCH")
		return newLeader != leader
	})
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout())
	defer cancel()
	s, err := js.Stream(ctx, "BATCH")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Msgs != 25 || st.LastSeq != 25 {
		t.Fatalf("new leader %s: state %+v, want the 25 messages of the two batches", newLeader.ID, st)
	}
	for seq := uint64(1); seq <= 25; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("seq %d on %s: %v", seq, newLeader.ID, err)
		}
		want := fmt.Sprintf("first-%d", seq)
		if seq > 20 {
			want = fmt.Sprintf("third-%d", seq-20)
		}
		if string(m.Data) != want {
			t.Fatalf("seq %d holds %q, want %q", seq, m.Data, want)
		}
	}
}

// TestClusterFastBatch: a fast batch into an R3 stream on three real nodes
// is answered with flow acks and the commit's PubAck, and the new leader
// holds every message after the old one is killed.
func TestClusterFastBatch(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	nc, js := clusterJS(t, clusterURLs(nodes))
	createR3(t, js, jetstream.StreamConfig{Name: "FAST", Subjects: []string{"fast.>"}, Replicas: 3, AllowBatchPublish: true})
	leader, _ := streamLeader(t, js, nodes, "FAST")
	sub, err := nc.SubscribeSync("fastr.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := 1; i <= n; i++ {
		op := 1
		switch {
		case i == 1:
			op = 0
		case i == n:
			op = 2
		}
		m := &nats.Msg{Subject: "fast.a", Data: []byte(strconv.Itoa(i)), Reply: fmt.Sprintf("fastr.f1.10.fail.%d.%d.$FI", i, op)}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	var flows int
	for {
		m, err := sub.NextMsg(clusterTimeout())
		if err != nil {
			t.Fatalf("after %d flow acks: %v", flows, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(m.Data, &doc); err != nil {
			t.Fatalf("reply %q", m.Data)
		}
		if doc["type"] == "ack" {
			flows++
			continue
		}
		if doc["batch"] != "f1" || doc["count"] != float64(n) || doc["seq"] != float64(n) {
			t.Fatalf("end of batch %s", m.Data)
		}
		break
	}
	if flows < 1 {
		t.Fatal("no flow ack before the end")
	}
	leader.kill(t)
	waitFor(t, clusterTimeout(), "a new leader", func() bool {
		now, _ := streamLeader(t, js, nodes, "FAST")
		return now != leader
	})
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout())
	defer cancel()
	s, err := js.Stream(ctx, "FAST")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Msgs != n {
		t.Fatalf("state after the leader's kill %+v", st)
	}
}
