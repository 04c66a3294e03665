package jetstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

type delivery struct {
	subject, reply string
	hdr, data      string
}

// inbox collects what arrives on a subject.
func inbox(t *testing.T, acc *fakeAccount, subj string) chan delivery {
	ch := make(chan delivery, 1024)
	unsub, _ := acc.SubscribeInternal(subj, func(s, r, h, m []byte) {
		ch <- delivery{string(s), string(r), string(h), string(m)}
	})
	t.Cleanup(unsub)
	return ch
}

func next(t *testing.T, ch chan delivery) delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("nothing delivered")
	}
	return delivery{}
}

func createConsumer(t *testing.T, acc *fakeAccount, stream string, cfg api.ConsumerConfig) api.ConsumerInfoResponse {
	t.Helper()
	var resp api.ConsumerInfoResponse
	subj := "$JS.API.CONSUMER.CREATE." + stream
	if cfg.Durable != "" {
		subj += "." + cfg.Durable
	}
	acc.apiCall(t, subj, api.ConsumerCreateRequest{Stream: stream, Config: cfg}, &resp)
	if resp.Error != nil {
		t.Fatalf("consumer create: %v", resp.Error)
	}
	return resp
}

func TestPullAckAndRedelivery(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	for i := range 3 {
		publish(t, acc, fmt.Sprintf("s.%d", i), nil, []byte(fmt.Sprint(i)))
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, AckWait: 200 * time.Millisecond})
	got := inbox(t, acc, "_INBOX.pull")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.pull", nil, []byte(`{"batch":3}`))
	var first delivery
	for i := range 3 {
		d := next(t, got)
		if d.subject != fmt.Sprintf("s.%d", i) || d.data != fmt.Sprint(i) {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		if !strings.HasPrefix(d.reply, "$JS.ACK.S.C.1.") {
			t.Fatalf("ack subject %q", d.reply)
		}
		if i == 0 {
			first = d
		} else {
			acc.Publish(d.reply, "", nil, []byte("+ACK"))
		}
	}
	// The unacknowledged first message comes back after its ack wait.
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.pull", nil, []byte(`{"batch":1,"expires":5000000000}`))
	d := next(t, got)
	if d.data != "0" || !strings.HasPrefix(d.reply, "$JS.ACK.S.C.2.1.") {
		t.Fatalf("redelivery: %+v (first was %+v)", d, first)
	}
	acc.Publish(d.reply, "", nil, nil)
	var info api.ConsumerInfoResponse
	deadline := time.Now().Add(5 * time.Second)
	for {
		acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &info)
		if info.NumAckPending == 0 || time.Now().After(deadline) {
			break
		}
	}
	// num_redelivered counts outstanding redeliveries (nats-server's
	// rule): the redelivered message is acknowledged now.
	if info.NumAckPending != 0 || info.AckFloor.Stream != 3 || info.NumRedelivered != 0 {
		t.Fatalf("state: pending %d floor %+v redelivered %d", info.NumAckPending, info.AckFloor, info.NumRedelivered)
	}
}

func TestNoWaitStatus(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit})
	got := inbox(t, acc, "_INBOX.nw")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.nw", nil, []byte(`{"batch":5,"no_wait":true}`))
	if d := next(t, got); !strings.HasPrefix(d.hdr, "NATS/1.0 404 No Messages") {
		t.Fatalf("want 404, got %+v", d)
	}
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.nw", nil, []byte(`{"batch":5,"expires":100000000}`))
	if d := next(t, got); !strings.HasPrefix(d.hdr, "NATS/1.0 408 Request Timeout") || !strings.Contains(d.hdr, "Nats-Pending-Messages: 5") {
		t.Fatalf("want 408, got %+v", d)
	}
}

func TestWorkQueueRemovesOnAck(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "Q", Subjects: []string{"q"}, Retention: api.WorkQueuePolicy})
	for i := range 10 {
		publish(t, acc, "q", nil, []byte(fmt.Sprint(i)))
	}
	createConsumer(t, acc, "Q", api.ConsumerConfig{Durable: "W", AckPolicy: api.AckExplicit})
	got := inbox(t, acc, "_INBOX.wq")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.Q.W", "_INBOX.wq", nil, []byte(`{"batch":10}`))
	for range 10 {
		d := next(t, got)
		acc.Publish(d.reply, "", nil, []byte("+ACK"))
	}
	deadline := time.Now().Add(5 * time.Second)
	var info api.StreamInfoResponse
	for {
		acc.apiCall(t, "$JS.API.STREAM.INFO.Q", nil, &info)
		if info.State.Msgs == 0 || time.Now().After(deadline) {
			break
		}
	}
	if info.State.Msgs != 0 || info.State.FirstSeq != 11 {
		t.Fatalf("work queue not emptied: %+v", info.State)
	}
}

func TestConsumerSurvivesRestart(t *testing.T) {
	fs := vfs.NewMem()
	_, acc, closeAll := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	for i := range 4 {
		publish(t, acc, "s", nil, []byte(fmt.Sprint(i)))
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, AckWait: time.Hour})
	got := inbox(t, acc, "_INBOX.r")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.r", nil, []byte(`{"batch":2}`))
	d := next(t, got)
	acc.request(t, d.reply, nil, []byte("+ACK")) // double ack: processed before the reply
	next(t, got)                                 // delivered, never acked
	var info api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &info)
	closeAll()

	_, acc2, _ := openEngine(t, fs)
	acc2.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &info)
	if info.Error != nil || info.Delivered.Stream != 2 || info.AckFloor.Stream != 1 || info.NumAckPending != 1 {
		b, _ := json.Marshal(info)
		t.Fatalf("restored consumer: %s", b)
	}
}
