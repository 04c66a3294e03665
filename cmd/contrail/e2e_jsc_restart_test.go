package main

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Durable consumers across a clean restart (SIGTERM) and a crash
// (kill -9), mid-flight: some messages acknowledged, some delivered and
// not acknowledged, some never delivered.

func TestJSCRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testConsumerRestart(t, tc.sig)
		})
	}
}

func testConsumerRestart(t *testing.T, sig syscall.Signal) {
	const total = 300
	n, tgt := jsNode(t, nodeOpts{})
	js := tgt.js
	mkStream(t, js, jetstream.StreamConfig{Name: "R"})
	pubN(t, js, "R.a", "", total)
	c := mkConsumer(t, js, "R", jetstream.ConsumerConfig{Durable: "pull", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second})
	// A push durable too, bound by a plain subscription.
	mkConsumer(t, js, "R", jetstream.ConsumerConfig{Durable: "push", DeliverSubject: "dlv.push", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second, MaxAckPending: 200})

	// Pull: 1..100 double acked, 101..150 plain acked, 151..200 delivered
	// and not acked, 201..300 never delivered.
	ms, err := fetch(t, c, 200, jetstream.FetchMaxWait(5*time.Second))
	if err != nil || len(ms) != 200 {
		t.Fatalf("fetch: %d %v", len(ms), err)
	}
	for _, m := range ms[:100] {
		if err := m.DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms[100:150] {
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	// Push: the same split. max_ack_pending stops it at 200; the
	// subscription goes before the acks free room for more.
	sub := subscribeSync(t, tgt.nc, "dlv.push")
	var pms []*nats.Msg
	for i := 1; i <= 200; i++ {
		pms = append(pms, nextMsg(t, sub))
	}
	sub.Unsubscribe()
	flush(t, tgt.nc)
	for i, m := range pms[:150] {
		if i < 100 {
			if err := m.AckSync(); err != nil {
				t.Fatal(err)
			}
		} else {
			m.Ack()
		}
	}
	if sig == syscall.SIGTERM {
		// A clean stop must keep even the plain acks: make sure the
		// server has them before it is told to stop.
		waitConsumer(t, js, "R", "pull", ioTimeout, "plain acks processed", func(ci *jetstream.ConsumerInfo) bool { return ci.AckFloor.Stream == 150 })
		waitConsumer(t, js, "R", "push", ioTimeout, "plain acks processed", func(ci *jetstream.ConsumerInfo) bool { return ci.AckFloor.Stream == 150 })
	}

	n2 := restartNode(t, n, nodeOpts{}, sig)
	tgt2 := jsConnect(t, "contrail", n2.URL)
	js2 := tgt2.js

	for _, name := range []string{"pull", "push"} {
		ci := consumerInfo(t, js2, "R", name)
		if ci.Delivered.Stream != 200 || ci.NumPending != 100 {
			t.Errorf("%s after restart: delivered %+v num_pending %d", name, ci.Delivered, ci.NumPending)
		}
		if sig == syscall.SIGTERM && (ci.AckFloor.Stream != 150 || ci.NumAckPending != 50) {
			t.Errorf("%s after a clean restart: ack floor %+v, ack pending %d; want 150 and 50", name, ci.AckFloor, ci.NumAckPending)
		}
		if ci.AckFloor.Stream < 100 {
			t.Errorf("%s after restart: ack floor %d, below the double acks", name, ci.AckFloor.Stream)
		}
	}

	// Everything not acknowledged comes again: 151..200 after their ack
	// wait, 201..300 for the first time. Double-acked ones never come
	// back; plain-acked ones may after a crash (at least once), but not
	// after a clean stop.
	check := func(name string, got map[int]int) {
		for i := 1; i <= total; i++ {
			switch n := got[i]; {
			case i <= 100 && n != 0:
				t.Errorf("%s: double-acked %d redelivered after restart", name, i)
			case i <= 150 && sig == syscall.SIGTERM && n != 0:
				t.Errorf("%s: acked %d redelivered after a clean restart", name, i)
			case i > 150 && n != 1:
				t.Errorf("%s: unacked %d delivered %d times after restart, want once", name, i, n)
			}
		}
	}
	missing := func(got map[int]int) bool {
		for i := 151; i <= total; i++ {
			if got[i] == 0 {
				return true
			}
		}
		return false
	}
	c2, err := js2.Consumer(ctxT(t), "R", "pull")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	deadline := time.Now().Add(20 * time.Second)
	for missing(got) && time.Now().Before(deadline) {
		ms, err := fetch(t, c2, 300, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			v, _ := strconv.Atoi(string(m.Data()))
			got[v]++
			md := meta(t, m)
			if v > 150 && v <= 200 && md.NumDelivered != 2 {
				t.Errorf("pull: redelivered %d has delivery count %d", v, md.NumDelivered)
			}
			if err := m.DoubleAck(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("pull", got)

	psub := subscribeSync(t, tgt2.nc, "dlv.push")
	pgot := map[int]int{}
	for missing(pgot) {
		m, err := psub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("push after restart: %d received: %v", len(pgot), err)
		}
		v, _ := strconv.Atoi(string(m.Data))
		pgot[v]++
		m.AckSync()
	}
	// Anything further would be a duplicate.
	if m, err := psub.NextMsg(300 * time.Millisecond); err == nil {
		v, _ := strconv.Atoi(string(m.Data))
		pgot[v]++
	} else if err != nats.ErrTimeout {
		t.Fatal(err)
	}
	check("push", pgot)
	waitConsumer(t, js2, "R", "pull", ioTimeout, "all acked", func(ci *jetstream.ConsumerInfo) bool {
		return ci.AckFloor.Stream == total && ci.NumAckPending == 0
	})
}
