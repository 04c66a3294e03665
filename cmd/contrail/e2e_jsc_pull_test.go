package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Pull consumers through nats.go's jetstream package: Fetch, FetchNoWait,
// FetchBytes, Next, Consume and Messages, and the status messages that end
// pull requests.

func TestJSCPullFetch(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("Fetch", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PF"})
		pubN(t, js, "PF.a", "m", 10)
		c := mkConsumer(t, js, "PF", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		ms, err := fetch(t, c, 5, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "first fetch", payloads(ms), seqRange("m", 1, 5))
		for i, m := range ms {
			md := meta(t, m)
			if md.Sequence.Stream != uint64(i+1) || md.Sequence.Consumer != uint64(i+1) || md.NumDelivered != 1 ||
				md.NumPending != uint64(10-i-1) || md.Stream != "PF" || md.Consumer != "d" {
				t.Errorf("message %d metadata %+v", i+1, md)
			}
			if m.Subject() != "PF.a" {
				t.Errorf("subject %q", m.Subject())
			}
		}
		ackAll(t, ms)
		// Five remain; asking for ten delivers them and then waits out
		// the expiry (408), which Fetch treats as the end, not an error.
		start := time.Now()
		ms, err = fetch(t, c, 10, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatalf("fetch to expiry: %v", err)
		}
		wantStrings(t, "second fetch", payloads(ms), seqRange("m", 6, 10))
		if el := time.Since(start); el < 400*time.Millisecond || el > 3*time.Second {
			t.Errorf("fetch returned after %v, want about the 500ms expiry", el)
		}
		ackAll(t, ms)
		info := waitConsumer(t, js, "PF", "d", ioTimeout, "everything acked", func(ci *jetstream.ConsumerInfo) bool {
			return ci.NumAckPending == 0 && ci.AckFloor.Stream == 10
		})
		if info.Delivered.Stream != 10 || info.Delivered.Consumer != 10 || info.NumPending != 0 || info.NumWaiting != 0 {
			t.Errorf("info after all acked: %+v", info)
		}
	})

	t.Run("FetchNoWait", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PNW"})
		pubN(t, js, "PNW.a", "m", 3)
		c := mkConsumer(t, js, "PNW", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		start := time.Now()
		b, err := c.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := drainBatch(b)
		if err != nil {
			t.Fatalf("no-wait fetch: %v", err)
		}
		wantStrings(t, "no-wait fetch", payloads(ms), seqRange("m", 1, 3))
		ackAll(t, ms)
		b, err = c.FetchNoWait(5)
		if err != nil {
			t.Fatal(err)
		}
		ms, err = drainBatch(b)
		if err != nil || len(ms) != 0 {
			t.Fatalf("no-wait fetch on nothing: %d messages, %v", len(ms), err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("no-wait fetches took %v: the server must answer 404 at once", el)
		}
	})

	t.Run("FetchBytes", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PFB"})
		body := strings.Repeat("x", 100)
		for i := 0; i < 20; i++ {
			jsPublish(t, js, "PFB.a", body)
		}
		c := mkConsumer(t, js, "PFB", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		// Each delivery counts subject, ack reply, headers and data, as
		// nats.go counts them: 500 bytes hold three 100-byte messages.
		b, err := c.FetchBytes(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ms, err := drainBatch(b)
		if err != nil {
			t.Fatalf("fetch bytes: %v", err)
		}
		total := 0
		for _, m := range ms {
			total += len(m.Subject()) + len(m.Reply()) + len(m.Data())
		}
		if len(ms) != 3 || total > 500 {
			t.Fatalf("fetch bytes 500: %d messages of %d bytes in all, want 3", len(ms), total)
		}
		ackAll(t, ms)
		// Nothing else went out: the next four are 4, 5, 6, 7.
		ms, err = fetch(t, c, 4, jetstream.FetchMaxWait(time.Second))
		if err != nil || len(ms) != 4 || meta(t, ms[0]).Sequence.Stream != 4 || meta(t, ms[3]).Sequence.Stream != 7 {
			t.Fatalf("after fetch bytes: %d messages (%v)", len(ms), err)
		}
		for _, m := range ms {
			if md := meta(t, m); md.NumDelivered != 1 {
				t.Errorf("seq %d delivered %d times: a fetch-bytes request got more than it asked for", md.Sequence.Stream, md.NumDelivered)
			}
		}
		// A request too small for the next message ends at once: nats.go
		// returns an empty batch.
		start := time.Now()
		b, err = c.FetchBytes(50, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ms, err = drainBatch(b)
		if len(ms) != 0 || err != nil {
			t.Fatalf("fetch bytes 50: %d messages, %v", len(ms), err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("too-small fetch bytes took %v; the server must answer 409 at once", el)
		}
	})

	t.Run("Next", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PN"})
		pubN(t, js, "PN.a", "m", 2)
		c := mkConsumer(t, js, "PN", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		for i := 1; i <= 2; i++ {
			m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
			if err != nil {
				t.Fatalf("next %d: %v", i, err)
			}
			if string(m.Data()) != "m"+strconv.Itoa(i) {
				t.Fatalf("next %d: %q", i, m.Data())
			}
			m.Ack()
		}
		_, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("next on nothing: %v, want nats.ErrTimeout", err)
		}
		// Next waits for a message published meanwhile.
		got := make(chan string, 1)
		go func() {
			m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			m.Ack()
			got <- string(m.Data())
		}()
		waitConsumer(t, js, "PN", "d", ioTimeout, "the pull request waiting", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 1 })
		jsPublish(t, js, "PN.a", "late")
		if g := recvChan(t, got, "next"); g != "late" {
			t.Fatalf("next got %q", g)
		}
	})

	t.Run("ExceededMaxWaiting", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PMW"})
		c := mkConsumer(t, js, "PMW", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, MaxWaiting: 2})
		var batches []jetstream.MessageBatch
		for i := 0; i < 2; i++ {
			b, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			batches = append(batches, b)
		}
		waitConsumer(t, js, "PMW", "d", ioTimeout, "two waiting", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 2 })
		b, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ms, err := drainBatch(b)
		if len(ms) != 0 || err == nil || !strings.Contains(err.Error(), "Exceeded MaxWaiting") {
			t.Fatalf("third fetch: %d messages, %v; want the 409 Exceeded MaxWaiting error", len(ms), err)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("the 409 came late")
		}
		// The two waiting ones still get messages.
		pubN(t, js, "PMW.a", "m", 2)
		var got []string
		for _, b := range batches {
			ms, err := drainBatch(b)
			if err != nil || len(ms) != 1 {
				t.Fatalf("waiting fetch: %d messages, %v", len(ms), err)
			}
			got = append(got, payloads(ms)...)
		}
		wantStrings(t, "waiting fetches, in arrival order", got, []string{"m1", "m2"})
	})

	t.Run("ConsumerDeleted", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PCD"})
		c := mkConsumer(t, js, "PCD", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		b, err := c.Fetch(1, jetstream.FetchMaxWait(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		waitConsumer(t, js, "PCD", "d", ioTimeout, "the pull waiting", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 1 })
		if err := js.DeleteConsumer(ctxT(t), "PCD", "d"); err != nil {
			t.Fatal(err)
		}
		ms, err := drainBatch(b)
		if len(ms) != 0 || !errors.Is(err, jetstream.ErrConsumerDeleted) {
			t.Fatalf("fetch on deleted consumer: %d messages, %v; want ErrConsumerDeleted", len(ms), err)
		}
	})

	t.Run("SeveralWaiting", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PSW"})
		mkConsumer(t, js, "PSW", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		// Three raw requests of two each wait; six messages fill them in
		// the order they arrived.
		type res struct {
			i    int
			msgs []*nats.Msg
			st   *nats.Msg
		}
		out := make(chan res, 3)
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			inbox := nats.NewInbox()
			sub, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.PSW.d", inbox, []byte(`{"batch":2,"expires":5000000000}`)); err != nil {
				t.Fatal(err)
			}
			flush(t, nc)
			waitConsumer(t, js, "PSW", "d", ioTimeout, "request queued", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == i+1 })
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				defer sub.Unsubscribe()
				var r res
				r.i = i
				for len(r.msgs) < 2 {
					m, err := sub.NextMsg(ioTimeout)
					if err != nil {
						break
					}
					if m.Header.Get("Status") != "" {
						r.st = m
						break
					}
					r.msgs = append(r.msgs, m)
				}
				out <- r
			}(i)
		}
		pubN(t, js, "PSW.a", "m", 6)
		wg.Wait()
		close(out)
		got := map[int][]string{}
		for r := range out {
			if r.st != nil {
				t.Errorf("request %d got status %s", r.i, status(r.st))
			}
			got[r.i] = natsPayloads(r.msgs)
		}
		for i := 0; i < 3; i++ {
			wantStrings(t, fmt.Sprintf("request %d", i), got[i], seqRange("m", 2*i+1, 2*i+2))
		}
		if ci := consumerInfo(t, js, "PSW", "d"); ci.NumWaiting != 0 {
			t.Errorf("num_waiting %d after all were served", ci.NumWaiting)
		}
	})

	t.Run("AbandonedRequest", func(t *testing.T) {
		t.Parallel()
		// A pull request whose requester went away (its inbox has no
		// subscriber any more) must not swallow messages: nats-server drops
		// it, and the next puller gets the message at once.
		nc, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PAB"})
		c := mkConsumer(t, js, "PAB", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.PAB.d", inbox, []byte(`{"batch":1,"expires":30000000000}`)); err != nil {
			t.Fatal(err)
		}
		waitConsumer(t, js, "PAB", "d", ioTimeout, "request queued", func(ci *jetstream.ConsumerInfo) bool { return ci.NumWaiting == 1 })
		sub.Unsubscribe()
		flush(t, nc)
		jsPublish(t, js, "PAB.a", "one")
		m, err := c.Next(jetstream.FetchMaxWait(3 * time.Second))
		if err != nil {
			t.Fatalf("next after an abandoned request: %v (the message went to a requester that left)", err)
		}
		if string(m.Data()) != "one" || meta(t, m).NumDelivered != 1 {
			t.Fatalf("got %q delivered %d times", m.Data(), meta(t, m).NumDelivered)
		}
	})
}

func TestJSCPullConsume(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("ConsumeWithHeartbeats", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "CC"})
		pubN(t, js, "CC.a", "a", 30)
		c := mkConsumer(t, js, "CC", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		col := newCollector()
		var errMu sync.Mutex
		var errs []error
		cc, err := c.Consume(func(m jetstream.Msg) {
			m.Ack()
			col.add(&nats.Msg{Subject: m.Subject(), Data: m.Data()})
		}, jetstream.PullMaxMessages(7), jetstream.PullExpiry(4*time.Second), jetstream.PullHeartbeat(2*time.Second),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		col.waitCount(t, 30, ioTimeout)
		// Idle across two expiries: the pulls are renewed and the
		// heartbeats keep nats.go from declaring the server gone. nats.go
		// allows twice the heartbeat between signs of life, and a renewed
		// pull's first heartbeat comes one heartbeat after it arrives: the
		// margin is one heartbeat, 2 s, which a loaded race-built CI run
		// needs (1 s was once not enough there).
		idleUntil := time.Now().Add(8500 * time.Millisecond)
		for time.Now().Before(idleUntil) {
			time.Sleep(50 * time.Millisecond)
		}
		pubN(t, js, "CC.b", "b", 30)
		ms := col.waitCount(t, 60, ioTimeout)
		wantStrings(t, "consumed", natsPayloads(ms), append(seqRange("a", 1, 30), seqRange("b", 1, 30)...))
		errMu.Lock()
		for _, err := range errs {
			t.Errorf("consume error handler: %v", err)
		}
		errMu.Unlock()
		waitConsumer(t, js, "CC", "d", ioTimeout, "all acked", func(ci *jetstream.ConsumerInfo) bool {
			return ci.AckFloor.Stream == 60 && ci.NumAckPending == 0
		})
	})

	t.Run("ConsumeMaxBytes", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "CB"})
		pubN(t, js, "CB.a", "a", 100)
		c := mkConsumer(t, js, "CB", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		col := newCollector()
		cc, err := c.Consume(func(m jetstream.Msg) {
			m.Ack()
			col.add(&nats.Msg{Subject: m.Subject(), Data: m.Data()})
		}, jetstream.PullMaxBytes(1024), jetstream.PullExpiry(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		ms := col.waitCount(t, 100, ioTimeout)
		wantStrings(t, "consumed", natsPayloads(ms), seqRange("a", 1, 100))
	})

	t.Run("Messages", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "CM"})
		pubN(t, js, "CM.a", "m", 20)
		c := mkConsumer(t, js, "CM", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		it, err := c.Messages(jetstream.PullMaxMessages(3), jetstream.PullExpiry(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := 0; i < 25; i++ {
			if i == 20 {
				pubN(t, js, "CM.a", "n", 5)
			}
			m, err := it.Next()
			if err != nil {
				t.Fatalf("iterator next %d: %v", i, err)
			}
			got = append(got, string(m.Data()))
			if err := m.DoubleAck(ctxT(t)); err != nil {
				t.Fatalf("double ack: %v", err)
			}
		}
		it.Stop()
		wantStrings(t, "iterated", got, append(seqRange("m", 1, 20), seqRange("n", 1, 5)...))
		if _, err := it.Next(); !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			t.Errorf("next after stop: %v", err)
		}
		ci := consumerInfo(t, js, "CM", "d")
		if ci.AckFloor.Stream != 25 || ci.NumAckPending != 0 {
			t.Errorf("after iterating: ack floor %d, ack pending %d", ci.AckFloor.Stream, ci.NumAckPending)
		}
	})

	t.Run("CompetingConsume", func(t *testing.T) {
		t.Parallel()
		// Two Consume calls on one durable share its messages: each
		// message goes to exactly one of them.
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "CX"})
		c := mkConsumer(t, js, "CX", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		col := newCollector()
		for i := 0; i < 2; i++ {
			cc, err := c.Consume(func(m jetstream.Msg) {
				m.Ack()
				col.add(&nats.Msg{Data: m.Data()})
			}, jetstream.PullMaxMessages(10), jetstream.PullExpiry(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Stop()
		}
		pubN(t, js, "CX.a", "m", 200)
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
	})
}
