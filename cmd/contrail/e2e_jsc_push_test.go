package main

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Push consumers: the legacy JetStreamContext subscriptions (async, queue,
// sync, channel), jetstream.PushConsumer, flow control, idle heartbeats,
// delivery only while the deliver subject has interest, and ordered
// consumers in both APIs.

// asyncErrs records the connection's asynchronous errors.
type asyncErrs struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrs) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		a.mu.Lock()
		a.errs = append(a.errs, err)
		a.mu.Unlock()
	})
}

func (a *asyncErrs) check(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, err := range a.errs {
		t.Errorf("asynchronous error: %v", err)
	}
}

func TestJSCPush(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("SubscribeFlowControlHeartbeats", func(t *testing.T) {
		t.Parallel()
		var ae asyncErrs
		nc, js := e.conn(t, ae.option())
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "PS"})
		// 2000 messages of 1 KiB: several flow control rounds.
		body := strings.Repeat("z", 1024)
		futs := make([]jetstream.PubAckFuture, 0, 500)
		for i := 0; i < 2000; i++ {
			f, err := js.PublishAsync("PS.a", []byte(strconv.Itoa(i)+":"+body))
			if err != nil {
				t.Fatal(err)
			}
			if futs = append(futs, f); len(futs) == 500 {
				waitPubAcks(t, futs)
				futs = futs[:0]
			}
		}
		waitPubAcks(t, futs)
		col := newCollector()
		sub, err := ljs.Subscribe("PS.a", func(m *nats.Msg) {
			if err := m.Ack(); err != nil {
				t.Errorf("ack: %v", err)
			}
			col.add(m)
		}, nats.Durable("ps"), nats.ManualAck(), nats.IdleHeartbeat(time.Second), nats.EnableFlowControl(), nats.AckExplicit())
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		ms := col.waitCount(t, 2000, 2*ioTimeout)
		for i, m := range ms[:2000] {
			if !strings.HasPrefix(string(m.Data), strconv.Itoa(i)+":") {
				t.Fatalf("message %d out of order: %.10q", i, m.Data)
			}
		}
		ci, err := sub.ConsumerInfo()
		if err != nil {
			t.Fatal(err)
		}
		if !ci.PushBound || ci.Config.DeliverSubject == "" || !ci.Config.FlowControl || ci.Config.Heartbeat != time.Second {
			t.Errorf("consumer info %+v", ci)
		}
		// Idle for three heartbeat intervals: heartbeats must keep the
		// subscription from being declared inactive.
		until := time.Now().Add(3200 * time.Millisecond)
		for time.Now().Before(until) {
			time.Sleep(50 * time.Millisecond)
		}
		jsPublish(t, js, "PS.a", "after idle")
		ms = col.waitCount(t, 2001, ioTimeout)
		if string(ms[2000].Data) != "after idle" {
			t.Errorf("last message %q", ms[2000].Data)
		}
		waitConsumer(t, js, "PS", "ps", ioTimeout, "all acked", func(ci *jetstream.ConsumerInfo) bool {
			return ci.NumAckPending == 0 && ci.AckFloor.Stream == 2001
		})
		ae.check(t)
	})

	t.Run("QueueSubscribe", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "PQ"})
		col := newCollector()
		var mu sync.Mutex
		per := map[int]int{}
		for i := 0; i < 2; i++ {
			sub, err := ljs.QueueSubscribe("PQ.*", "workers", func(m *nats.Msg) {
				m.Ack()
				mu.Lock()
				per[i]++
				mu.Unlock()
				col.add(m)
			}, nats.Durable("workers"), nats.ManualAck())
			if err != nil {
				t.Fatalf("queue subscribe %d: %v", i, err)
			}
			defer sub.Unsubscribe()
		}
		ci := consumerInfo(t, js, "PQ", "workers")
		if ci.Config.DeliverGroup != "workers" || ci.Config.DeliverSubject == "" {
			t.Fatalf("queue consumer config: %+v", ci.Config)
		}
		pubN(t, js, "PQ.x", "m", 200)
		ms := col.waitCount(t, 200, ioTimeout)
		seen := map[string]int{}
		for _, m := range ms {
			seen[string(m.Data)]++
		}
		for i := 1; i <= 200; i++ {
			if n := seen["m"+strconv.Itoa(i)]; n != 1 {
				t.Errorf("m%d delivered %d times", i, n)
			}
		}
		mu.Lock()
		if per[0] == 0 || per[1] == 0 {
			t.Errorf("one queue member got nothing: %v", per)
		}
		mu.Unlock()
	})

	t.Run("SubscribeSyncAndChan", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "PSY"})
		pubN(t, js, "PSY.a", "m", 5)
		sub, err := ljs.SubscribeSync("PSY.a", nats.Durable("sync"), nats.AckExplicit())
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			m, err := sub.NextMsg(ioTimeout)
			if err != nil {
				t.Fatalf("next %d: %v", i, err)
			}
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Data) != "m"+strconv.Itoa(i) || md.Sequence.Stream != uint64(i) || md.Consumer != "sync" {
				t.Fatalf("message %d: %q %+v", i, m.Data, md)
			}
			if err := m.AckSync(); err != nil {
				t.Fatalf("ack sync: %v", err)
			}
		}
		if ci, _ := sub.ConsumerInfo(); ci == nil || ci.AckFloor.Stream != 5 || ci.NumAckPending != 0 {
			t.Errorf("after sync acks: %+v", ci)
		}
		sub.Unsubscribe()

		ch := make(chan *nats.Msg, 16)
		csub, err := ljs.ChanSubscribe("PSY.a", ch, nats.DeliverAll(), nats.AckNone())
		if err != nil {
			t.Fatal(err)
		}
		defer csub.Unsubscribe()
		var got []string
		for i := 0; i < 5; i++ {
			got = append(got, string(recvChan(t, ch, "channel message").Data))
		}
		wantStrings(t, "channel subscription", got, seqRange("m", 1, 5))
	})

	t.Run("InterestOnly", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PI"})
		pubN(t, js, "PI.a", "m", 5)
		mkConsumer(t, js, "PI", jetstream.ConsumerConfig{Durable: "pi", DeliverSubject: "deliver.pi", AckPolicy: jetstream.AckExplicitPolicy})
		// Nobody listens: nothing is delivered, and the consumer is not
		// push bound. (A wait bounded by a deadline: the point is that
		// nothing happens.)
		deadline := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(deadline) {
			ci := consumerInfo(t, js, "PI", "pi")
			if ci.Delivered.Stream != 0 || ci.PushBound || ci.NumAckPending != 0 {
				t.Fatalf("delivered without interest: %+v", ci)
			}
			time.Sleep(50 * time.Millisecond)
		}
		sub := subscribeSync(t, nc, "deliver.pi")
		for i := 1; i <= 5; i++ {
			m := nextMsg(t, sub)
			if string(m.Data) != "m"+strconv.Itoa(i) {
				t.Fatalf("got %q", m.Data)
			}
			m.Ack()
		}
		if ci := consumerInfo(t, js, "PI", "pi"); !ci.PushBound {
			t.Errorf("push_bound false with a subscriber")
		}
		// Interest goes away; messages published meanwhile wait for it.
		sub.Unsubscribe()
		flush(t, nc)
		pubN(t, js, "PI.a", "n", 3)
		if ci := consumerInfo(t, js, "PI", "pi"); ci.Delivered.Stream != 5 {
			t.Fatalf("delivered %d with no interest", ci.Delivered.Stream)
		}
		sub = subscribeSync(t, nc, "deliver.pi")
		for i := 1; i <= 3; i++ {
			if m := nextMsg(t, sub); string(m.Data) != "n"+strconv.Itoa(i) {
				t.Fatalf("after resubscribe got %q", m.Data)
			}
		}
	})

	t.Run("JetStreamPushConsumer", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PJ"})
		pc, err := js.CreatePushConsumer(ctxT(t), "PJ", jetstream.ConsumerConfig{
			Durable: "pj", DeliverSubject: nats.NewInbox(), AckPolicy: jetstream.AckExplicitPolicy,
			IdleHeartbeat: time.Second, FlowControl: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		var errMu sync.Mutex
		var errs []error
		cc, err := pc.Consume(func(m jetstream.Msg) {
			m.Ack()
			col.add(&nats.Msg{Data: m.Data()})
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		pubN(t, js, "PJ.a", "m", 50)
		ms := col.waitCount(t, 50, ioTimeout)
		wantStrings(t, "push consumer", natsPayloads(ms), seqRange("m", 1, 50))
		// Idle past two heartbeat intervals: no missed-heartbeat errors.
		until := time.Now().Add(2500 * time.Millisecond)
		for time.Now().Before(until) {
			time.Sleep(50 * time.Millisecond)
		}
		errMu.Lock()
		for _, err := range errs {
			t.Errorf("push consume error: %v", err)
		}
		errMu.Unlock()
		// A pull on a push consumer is refused.
		if _, err := js.Consumer(ctxT(t), "PJ", "pj"); !errors.Is(err, jetstream.ErrNotPullConsumer) {
			t.Errorf("Consumer on a push consumer: %v, want ErrNotPullConsumer", err)
		}
	})
}

func TestJSCOrdered(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("JetStreamOrdered", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "OJ"})
		pubN(t, js, "OJ.a", "a", 100)
		pubN(t, js, "OJ.b", "b", 100)
		// Fetch on one ordered consumer, Consume on another (from a11).
		foc, err := js.OrderedConsumer(ctxT(t), "OJ", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"OJ.a"}})
		if err != nil {
			t.Fatal(err)
		}
		ms, err := fetch(t, foc, 10, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "ordered fetch", payloads(ms), seqRange("a", 1, 10))
		m, err := foc.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil || string(m.Data()) != "a11" {
			t.Fatalf("ordered next after fetch: %v", err)
		}
		oc, err := js.OrderedConsumer(ctxT(t), "OJ", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"OJ.a"},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 11})
		if err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		cc, err := oc.Consume(func(m jetstream.Msg) { col.add(&nats.Msg{Data: m.Data()}) },
			jetstream.PullExpiry(time.Second), jetstream.PullHeartbeat(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		col.waitCount(t, 50, ioTimeout)
		// Deleting the server-side consumer mid-stream: the ordered
		// consumer recreates it where it left off, with no gap.
		info, err := oc.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.AckPolicy != jetstream.AckNonePolicy || info.Config.MemoryStorage != true || info.Config.InactiveThreshold == 0 {
			t.Errorf("ordered consumer config %+v", info.Config)
		}
		if err := js.DeleteConsumer(ctxT(t), "OJ", info.Name); err != nil {
			t.Fatal(err)
		}
		for i := 101; i <= 120; i++ {
			jsPublish(t, js, "OJ.a", "a"+strconv.Itoa(i))
		}
		got := col.waitCount(t, 110, 3*ioTimeout)
		wantStrings(t, "ordered consume across a reset", natsPayloads(got)[:110], seqRange("a", 11, 120))
	})

	t.Run("LegacyOrdered", func(t *testing.T) {
		t.Parallel()
		var ae asyncErrs
		nc, js := e.conn(t, ae.option())
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "OL"})
		pubN(t, js, "OL.a", "m", 300)
		col := newCollector()
		sub, err := ljs.Subscribe("OL.a", func(m *nats.Msg) { col.add(m) }, nats.OrderedConsumer(), nats.IdleHeartbeat(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		col.waitCount(t, 300, ioTimeout)
		ci, err := sub.ConsumerInfo()
		if err != nil {
			t.Fatal(err)
		}
		if !ci.Config.FlowControl || ci.Config.AckPolicy != nats.AckNonePolicy || ci.Config.MaxDeliver != 1 {
			t.Errorf("legacy ordered consumer config %+v", ci.Config)
		}
		// Delete it: the subscription notices the silence (no heartbeats)
		// and recreates its consumer after the last sequence it saw.
		if err := ljs.DeleteConsumer("OL", ci.Name); err != nil {
			t.Fatal(err)
		}
		pubN(t, js, "OL.a", "n", 20)
		got := col.waitCount(t, 320, 3*ioTimeout)
		wantStrings(t, "legacy ordered across a reset", natsPayloads(got)[:320], append(seqRange("m", 1, 300), seqRange("n", 1, 20)...))
		ae.check(t)
	})
}

// TestJSCFlowControlStall drives flow control by hand: the consumer stops
// at a flow control request nobody answers, says so in its heartbeats
// (Nats-Consumer-Stalled), and resumes once the request is answered.
func TestJSCFlowControlStall(t *testing.T) {
	t.Parallel()
	e := jscStart(t)
	nc, js := e.conn(t)
	mkStream(t, js, jetstream.StreamConfig{Name: "FC"})
	body := strings.Repeat("f", 1024)
	pubRange(t, js, "FC.a", body+"#", 1, 600)
	sub := subscribeSync(t, nc, "fc.deliver")
	mkConsumer(t, js, "FC", jetstream.ConsumerConfig{Durable: "fc", DeliverSubject: "fc.deliver", AckPolicy: jetstream.AckNonePolicy,
		FlowControl: true, IdleHeartbeat: 300 * time.Millisecond})
	var fc *nats.Msg
	n := 0
	for fc == nil {
		m := nextMsg(t, sub)
		switch {
		case m.Header.Get("Status") == "100" && strings.Contains(m.Header.Get("Description"), "FlowControl"):
			fc = m
		case m.Header.Get("Status") == "":
			n++
		}
	}
	if n == 0 || n >= 600 || !strings.HasPrefix(fc.Reply, "$JS.FC.FC.fc.") {
		t.Fatalf("flow control request after %d messages, reply %q", n, fc.Reply)
	}
	// Unanswered: only heartbeats, saying what the consumer waits for.
	var stalled string
	for stalled == "" {
		m := nextMsg(t, sub)
		if m.Header.Get("Status") == "" {
			t.Fatalf("delivery went on past an unanswered flow control request")
		}
		if m.Header.Get("Status") == "100" && m.Header.Get("Description") == "Idle Heartbeat" {
			stalled = m.Header.Get("Nats-Consumer-Stalled")
			if stalled == "" {
				t.Fatalf("heartbeat while stalled lacks Nats-Consumer-Stalled: %v", m.Header)
			}
		}
	}
	if stalled != fc.Reply {
		t.Errorf("stalled on %q, flow control reply was %q", stalled, fc.Reply)
	}
	if err := nc.Publish(stalled, nil); err != nil {
		t.Fatal(err)
	}
	for n < 600 {
		m := nextMsg(t, sub)
		switch m.Header.Get("Status") {
		case "":
			n++
		case "100":
			if m.Reply != "" && strings.Contains(m.Header.Get("Description"), "FlowControl") {
				nc.Publish(m.Reply, nil)
			}
		}
	}
}
