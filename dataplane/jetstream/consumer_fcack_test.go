package jetstream

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// fcConsumerInfo is the consumer's info through the API.
func fcConsumerInfo(t *testing.T, acc *fakeAccount, stream, name string) *api.ConsumerInfo {
	t.Helper()
	var resp api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO."+stream+"."+name, nil, &resp)
	if resp.Error != nil {
		t.Fatalf("consumer info: %v", resp.Error)
	}
	return resp.ConsumerInfo
}

// wantFC reads deliveries up to the next flow control request and returns
// the stream sequences delivered before it and the request's reply.
func wantFC(t *testing.T, ch chan delivery) (seqs []string, reply string) {
	t.Helper()
	for {
		d := next(t, ch)
		switch {
		case strings.Contains(d.hdr, "FlowControl Request"):
			return seqs, d.reply
		case strings.Contains(d.hdr, "Idle Heartbeat"):
		default:
			seqs = append(seqs, strings.Split(d.reply, ".")[5])
		}
	}
}

// fcAnswer is a flow control reply naming the last delivery taken.
func fcAnswer(dseq, sseq uint64) []byte {
	return appendHeaderBlock(nil, "", api.HeaderLastConsumer, strconv.FormatUint(dseq, 10),
		api.HeaderLastStream, strconv.FormatUint(sseq, 10))
}

// TestAckFlowControlRule: a flow_control consumer's deliveries are
// acknowledged only by flow control replies, up to the Nats-Last-Stream
// the reply names, as with ack_policy all; it asks for one when it
// reaches max_ack_pending and when idle with deliveries outstanding; a
// reply without the headers, a stale one, or a plain +ACK acknowledges
// nothing; interest retention drops what is acknowledged.
func TestAckFlowControlRule(t *testing.T) {
	e, acc, clk := clockEngine(t)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Retention: api.InterestPolicy})
	got := inbox(t, acc, "push.c")
	resp := createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckFlowControl,
		DeliverSubject: "push.c", MaxAckPending: 3})
	if cfg := resp.ConsumerInfo.Config; !cfg.FlowControl || cfg.Heartbeat != time.Second || cfg.AckWait != 0 {
		t.Fatalf("defaults: flow_control=%v heartbeat=%v ack_wait=%v", cfg.FlowControl, cfg.Heartbeat, cfg.AckWait)
	}
	for i := 0; i < 5; i++ {
		publish(t, acc, "s.a", nil, []byte("x"))
	}
	c := consumerOf(t, e, "A", "S", "C")

	seqs, fc := wantFC(t, got)
	if strings.Join(seqs, ",") != "1,2,3" {
		t.Fatalf("delivered before the request at max_ack_pending: %v", seqs)
	}
	// An ack on a delivery's reply is not listened to.
	acc.Publish("$JS.ACK.S.C.1.1.1.0.4", "", nil, []byte("+ACK"))
	// An answer without sequences lets delivery go on, but acknowledges
	// nothing: max_ack_pending still holds it.
	acc.Publish(fc, "", nil, nil)
	passAt(clk, c, 0)
	quiet(t, got, "after an answer without sequences")
	if ci := fcConsumerInfo(t, acc, "S", "C"); ci.NumAckPending != 3 || ci.AckFloor.Stream != 0 {
		t.Fatalf("after a bare answer: ack_pending=%d floor=%d", ci.NumAckPending, ci.AckFloor.Stream)
	}

	// Idle a heartbeat with deliveries outstanding: a new request.
	passAt(clk, c, time.Second)
	if seqs, fc2 := wantFC(t, got); len(seqs) != 0 || fc2 == "" {
		t.Fatalf("idle: %v %q", seqs, fc2)
	} else {
		fc = fc2
	}
	// A reply to an older request is ignored.
	acc.Publish(fc+"x", "", fcAnswer(3, 3), nil)
	if ci := fcConsumerInfo(t, acc, "S", "C"); ci.NumAckPending != 3 {
		t.Fatalf("stale answer acknowledged: ack_pending=%d", ci.NumAckPending)
	}
	// The answer acknowledges through the sequences it names.
	acc.Publish(fc, "", fcAnswer(2, 2), nil)
	seqs, fc = wantFC(t, got)
	if strings.Join(seqs, ",") != "4,5" {
		t.Fatalf("delivered after acking 2: %v", seqs)
	}
	ci := fcConsumerInfo(t, acc, "S", "C")
	if ci.NumAckPending != 3 || ci.AckFloor.Stream != 2 || ci.AckFloor.Consumer != 2 || ci.Delivered.Stream != 5 {
		t.Fatalf("after acking 2: ack_pending=%d floor=%+v delivered=%+v", ci.NumAckPending, ci.AckFloor, ci.Delivered)
	}
	waitForCond(t, "interest retention to drop 1-2", func() bool { return streamInfo(t, acc, "S").State.FirstSeq == 3 })

	// An answer at or below the floor is old news.
	acc.Publish(fc, "", fcAnswer(1, 1), nil)
	passAt(clk, c, 2*time.Second)
	if _, fc2 := wantFC(t, got); fc2 != "" {
		fc = fc2
	}
	acc.Publish(fc, "", fcAnswer(5, 5), nil)
	waitForCond(t, "everything acknowledged", func() bool {
		ci := fcConsumerInfo(t, acc, "S", "C")
		return ci.NumAckPending == 0 && ci.AckFloor.Stream == 5 && ci.AckFloor.Consumer == 5
	})
	waitForCond(t, "interest retention to drop all", func() bool { return streamInfo(t, acc, "S").State.Msgs == 0 })
	// Nothing outstanding: idle heartbeats ask nothing.
	passAt(clk, c, 4*time.Second)
	for {
		select {
		case d := <-got:
			if strings.Contains(d.hdr, "FlowControl Request") {
				t.Fatalf("flow control request with nothing outstanding")
			}
			continue
		default:
		}
		break
	}
}
