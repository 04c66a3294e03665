package jetstream

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Delivery times on the engine's clock: the tests set the clock and run
// a delivery pass themselves (consumer.deliver, which sends before it
// returns), so what is due, and what is not yet, is decided without
// waiting on real time.

// testClock is a settable clock: an offset from a fixed base.
type testClock struct{ ns atomic.Int64 }

var clockBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *testClock) now() time.Time       { return clockBase.Add(time.Duration(c.ns.Load())) }
func (c *testClock) set(at time.Duration) { c.ns.Store(int64(at)) }

// clockEngine starts an engine on c's clock.
func clockEngine(t *testing.T) (*Engine, *fakeAccount, *testClock) {
	t.Helper()
	clk := &testClock{}
	e, acc, _ := openEngine(t, vfs.NewMem(), func(o *Options) { o.Now = clk.now })
	return e, acc, clk
}

// passAt sets the clock to at and runs a delivery pass.
func passAt(clk *testClock, c *consumer, at time.Duration) {
	clk.set(at)
	c.deliver()
}

// quiet fails if anything arrived on ch: a pass just ran at the current
// clock and sent whatever was due.
func quiet(t *testing.T, ch chan delivery, when string) {
	t.Helper()
	select {
	case d := <-ch:
		t.Fatalf("%s: got %+v, want nothing", when, d)
	default:
	}
}

// wantDelivery waits for the delivery count dc of stream sequence 1.
func wantDelivery(t *testing.T, ch chan delivery, dc string) {
	t.Helper()
	if d := next(t, ch); !strings.HasPrefix(d.reply, "$JS.ACK.S.C."+dc+".1.") {
		t.Fatalf("want delivery %s of seq 1, got %+v", dc, d)
	}
}

func TestBackoffRedeliveryOnClock(t *testing.T) {
	e, acc, clk := clockEngine(t)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, MaxDeliver: 3,
		BackOff: []time.Duration{50 * time.Millisecond, 250 * time.Millisecond}})
	publish(t, acc, "s.a", nil, []byte("x"))
	c := consumerOf(t, e, "A", "S", "C")
	got := inbox(t, acc, "_INBOX.b")
	maxed := inbox(t, acc, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C")
	// One request, waiting throughout: each redelivery reaches it.
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.b", nil, []byte(`{"batch":10}`))
	wantDelivery(t, got, "1")
	for _, step := range []struct {
		early, due time.Duration
		dc         string
	}{
		{49 * time.Millisecond, 50 * time.Millisecond, "2"},   // backoff[0] after the first
		{299 * time.Millisecond, 300 * time.Millisecond, "3"}, // backoff[1] after the second
	} {
		passAt(clk, c, step.early)
		quiet(t, got, "before "+step.due.String())
		passAt(clk, c, step.due)
		wantDelivery(t, got, step.dc)
	}
	// The last backoff step repeats; at max_deliver the message is given
	// up with the advisory, not delivered again.
	passAt(clk, c, 549*time.Millisecond)
	quiet(t, maxed, "before 550ms")
	passAt(clk, c, 550*time.Millisecond)
	next(t, maxed)
	quiet(t, got, "at max_deliver")
}

func TestPushRedeliversEveryAckWait(t *testing.T) {
	e, acc, clk := clockEngine(t)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	got := inbox(t, acc, "push.c")
	maxed := inbox(t, acc, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C")
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, DeliverSubject: "push.c",
		AckWait: time.Second, MaxDeliver: 4})
	publish(t, acc, "s.a", nil, []byte("x"))
	c := consumerOf(t, e, "A", "S", "C")
	wantDelivery(t, got, "1")
	for i, dc := range []string{"2", "3", "4"} {
		due := time.Duration(i+1) * time.Second
		passAt(clk, c, due-time.Millisecond)
		quiet(t, got, "before "+due.String())
		passAt(clk, c, due)
		wantDelivery(t, got, dc)
	}
	passAt(clk, c, 4*time.Second)
	next(t, maxed)
	passAt(clk, c, 10*time.Second)
	quiet(t, got, "after max_deliver")
}

func TestPauseRunsOutOnClock(t *testing.T) {
	e, acc, clk := clockEngine(t)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit})
	c := consumerOf(t, e, "A", "S", "C")
	advs := inbox(t, acc, "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.C")
	until := clockBase.Add(time.Second)
	var resp api.ConsumerPauseResponse
	acc.apiCall(t, "$JS.API.CONSUMER.PAUSE.S.C", api.ConsumerPauseRequest{PauseUntil: until}, &resp)
	if resp.Error != nil || !resp.Paused {
		t.Fatalf("pause: %+v", resp)
	}
	pauseAdvisory := func() map[string]any {
		t.Helper()
		var adv map[string]any
		if err := json.Unmarshal([]byte(next(t, advs).data), &adv); err != nil {
			t.Fatal(err)
		}
		return adv
	}
	if adv := pauseAdvisory(); adv["paused"] != true {
		t.Fatalf("pause advisory: %v", adv)
	}
	publish(t, acc, "s.a", nil, []byte("x"))
	got := inbox(t, acc, "_INBOX.p")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.p", nil, []byte(`{"batch":1}`))
	passAt(clk, c, 999*time.Millisecond)
	quiet(t, got, "paused")
	quiet(t, advs, "paused")
	passAt(clk, c, time.Second)
	adv := pauseAdvisory()
	if adv["paused"] != false || adv["pause_until"] != until.Format(time.RFC3339) {
		t.Fatalf("resume advisory: %v", adv)
	}
	wantDelivery(t, got, "1")
	passAt(clk, c, 2*time.Second)
	quiet(t, advs, "announced once")
}

// TestPullRequestOutlivesInterestGap: a waiting request whose reply loses
// its subscriber for a while (a client reconnecting) is kept by passes
// that owe it nothing, and served once the subscriber is back; one owed a
// heartbeat while nobody listens is dropped.
func TestPullRequestOutlivesInterestGap(t *testing.T) {
	e, acc, clk := clockEngine(t)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit})
	c := consumerOf(t, e, "A", "S", "C")
	waiting := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.mu.waiting)
	}
	unsub, _ := acc.SubscribeInternal("_INBOX.r", func(_, _, _, _ []byte) {})
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.r", nil, []byte(`{"batch":1,"expires":60000000000}`))
	for waiting() != 1 {
		c.deliver() // the request is queued by the API path
	}
	unsub()
	passAt(clk, c, time.Second)
	passAt(clk, c, 2*time.Second)
	if n := waiting(); n != 1 {
		t.Fatalf("request dropped while its requester was away: %d waiting", n)
	}
	got := inbox(t, acc, "_INBOX.r")
	publish(t, acc, "s.a", nil, []byte("x"))
	wantDelivery(t, got, "1")

	// With a heartbeat due and nobody listening, the request goes.
	unsub, _ = acc.SubscribeInternal("_INBOX.h", func(_, _, _, _ []byte) {})
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.h", nil, []byte(`{"batch":1,"expires":60000000000,"idle_heartbeat":1000000000}`))
	for waiting() != 1 {
		c.deliver()
	}
	unsub()
	passAt(clk, c, 2500*time.Millisecond)
	if n := waiting(); n != 1 {
		t.Fatalf("dropped before its heartbeat was due: %d waiting", n)
	}
	passAt(clk, c, 3500*time.Millisecond)
	if n := waiting(); n != 0 {
		t.Fatalf("a request owed a heartbeat nobody hears is kept: %d waiting", n)
	}
}

// TestStreamDeleteEndsConsumers: deleting a stream deletes its
// consumers: their loops end and waiting pull requests hear 409.
func TestStreamDeleteEndsConsumers(t *testing.T) {
	e, acc, _ := clockEngine(t)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "P", AckPolicy: api.AckExplicit, DeliverSubject: "push.p",
		Heartbeat: time.Second})
	pull, push := consumerOf(t, e, "A", "S", "C"), consumerOf(t, e, "A", "S", "P")
	got := inbox(t, acc, "_INBOX.d")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.d", nil, []byte(`{"batch":1}`))
	for {
		pull.mu.Lock()
		n := len(pull.mu.waiting)
		pull.mu.Unlock()
		if n == 1 {
			break
		}
		pull.deliver()
	}
	var resp api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.S", nil, &resp)
	if !resp.Success {
		t.Fatalf("delete: %+v", resp)
	}
	if d := next(t, got); !strings.HasPrefix(d.hdr, "NATS/1.0 409 Consumer Deleted") {
		t.Fatalf("waiting request heard %+v", d)
	}
	for _, c := range []*consumer{pull, push} {
		select {
		case <-c.stopped:
		case <-time.After(5 * time.Second):
			t.Fatalf("consumer %s still running after its stream's delete", c.name)
		}
	}
}
