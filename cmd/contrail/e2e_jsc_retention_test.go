package main

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Retention driven by consumers: work queues remove a message once it is
// acknowledged; interest streams once every interested consumer is done.

func TestJSCWorkQueue(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("TenThousandThreePullers", func(t *testing.T) {
		t.Parallel()
		const total = 10000
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "WQ", Retention: jetstream.WorkQueuePolicy})
		mkConsumer(t, js, "WQ", jetstream.ConsumerConfig{Durable: "work", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1})
		pubN(t, js, "WQ.job", "", total/2)

		var mu sync.Mutex
		seen := make(map[string]int, total)
		per := make([]int, 3)
		var problems []string
		// Each puller is a Consume: one long-lived inbox, so no delivery
		// can go to a requester that gave up (as a short Fetch can, when
		// its client-side deadline passes first), and any second
		// delivery is a server fault.
		for w := 0; w < 3; w++ {
			_, wjs := e.conn(t)
			c, err := wjs.Consumer(ctxT(t), "WQ", "work")
			if err != nil {
				t.Fatal(err)
			}
			// Callbacks only record (under mu): they may run after the
			// test's end.
			cc, err := c.Consume(func(m jetstream.Msg) {
				md, err := m.Metadata()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					problems = append(problems, fmt.Sprintf("metadata: %v", err))
					return
				case md.NumDelivered != 1:
					problems = append(problems, fmt.Sprintf("seq %d delivered %d times", md.Sequence.Stream, md.NumDelivered))
				}
				seen[string(m.Data())]++
				per[w]++
				if err := m.Ack(); err != nil {
					problems = append(problems, fmt.Sprintf("ack: %v", err))
				}
			}, jetstream.PullMaxMessages(100), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("puller %d: %v", w, err))
				mu.Unlock()
			}))
			if err != nil {
				t.Fatal(err)
			}
			// The pullers end before the test does, whichever way it ends.
			defer cc.Stop()
		}
		// The second half arrives while the pullers work.
		pubRange(t, js, "WQ.job", "", total/2+1, total)
		waitFor(t, 60*time.Second, "every job seen", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == total
		})
		state := waitState(t, js, "WQ", 30*time.Second, "the work queue to empty", func(s jetstream.StreamState) bool { return s.Msgs == 0 })
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Error(p)
		}
		for i := 1; i <= total; i++ {
			if n := seen[strconv.Itoa(i)]; n != 1 {
				t.Fatalf("job %d seen %d times", i, n)
			}
		}
		if state.FirstSeq != total+1 || state.LastSeq != total {
			t.Errorf("emptied work queue state %+v", state)
		}
		for w, n := range per {
			if n == 0 {
				t.Errorf("puller %d got nothing: %v", w, per)
			}
		}
		ci := consumerInfo(t, js, "WQ", "work")
		if ci.NumAckPending != 0 || ci.NumRedelivered != 0 || ci.AckFloor.Stream != total || ci.NumPending != 0 {
			t.Errorf("consumer after the run: %+v", ci)
		}
	})

	t.Run("TermAndNoneRemove", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "WQT", Retention: jetstream.WorkQueuePolicy})
		pubN(t, js, "WQT.a", "m", 3)
		c := mkConsumer(t, js, "WQT", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
		ms, err := fetch(t, c, 3, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 3 {
			t.Fatalf("fetch: %d %v", len(ms), err)
		}
		// A terminated message is done with, like an acknowledged one.
		ms[0].Term()
		ms[1].Ack()
		waitState(t, js, "WQT", ioTimeout, "terminated and acked removed", func(s jetstream.StreamState) bool { return s.Msgs == 1 && s.FirstSeq == 3 })
		// A nak'ed message stays.
		ms[2].Nak()
		m := next1(t, c, 2*time.Second)
		if meta(t, m).NumDelivered != 2 {
			t.Fatalf("nak'ed message not redelivered")
		}
		if s := streamInfo(t, js, "WQT").State; s.Msgs != 1 {
			t.Fatalf("nak removed the message: %+v", s)
		}
		m.Ack()
		waitState(t, js, "WQT", ioTimeout, "empty", func(s jetstream.StreamState) bool { return s.Msgs == 0 })
	})
}

// runInterest drives one interest-retention session on tgt and returns
// the stream state after each step.
func runInterest(t *testing.T, tgt *jsTarget) []string {
	js := tgt.js
	mkStream(t, js, jetstream.StreamConfig{Name: "INT", Subjects: []string{"int.>"}, Retention: jetstream.InterestPolicy})
	var out []string
	obs := func(step string) {
		// Retention runs after acks; double acks make them processed, but
		// removal may trail by a moment on either server: wait for the
		// state to settle.
		var last jetstream.StreamState
		stable := 0
		waitFor(t, ioTimeout, "state to settle", func() bool {
			s := streamInfo(t, js, "INT").State
			if s.Msgs == last.Msgs && s.FirstSeq == last.FirstSeq {
				stable++
			} else {
				stable = 0
			}
			last = s
			return stable >= 5
		})
		out = append(out, fmt.Sprintf("%s: msgs=%d first=%d last=%d", step, last.Msgs, last.FirstSeq, last.LastSeq))
	}
	jsPublish(t, js, "int.a", "dropped, no interest")
	obs("published with no consumer")
	a := mkConsumer(t, js, "INT", jetstream.ConsumerConfig{Durable: "A", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "int.>"})
	b := mkConsumer(t, js, "INT", jetstream.ConsumerConfig{Durable: "B", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "int.b"})
	for i := 0; i < 4; i++ {
		jsPublish(t, js, "int.a", "a"+strconv.Itoa(i))
		jsPublish(t, js, "int.b", "b"+strconv.Itoa(i))
	}
	obs("published 8")
	ams, err := fetch(t, a, 8, jetstream.FetchMaxWait(2*time.Second))
	if err != nil || len(ams) != 8 {
		t.Fatalf("%s: A fetch: %d %v", tgt.name, len(ams), err)
	}
	for _, m := range ams {
		if err := m.DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	obs("A acked all (int.a only interests A)")
	bms, err := fetch(t, b, 4, jetstream.FetchMaxWait(2*time.Second))
	if err != nil || len(bms) != 4 {
		t.Fatalf("%s: B fetch: %d %v", tgt.name, len(bms), err)
	}
	for _, m := range bms[:2] {
		if err := m.DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	obs("B acked two")
	jsPublish(t, js, "int.b", "b4")
	obs("published one more for B")
	if err := js.DeleteConsumer(ctxT(t), "INT", "B"); err != nil {
		t.Fatal(err)
	}
	obs("B deleted")
	c := mkConsumer(t, js, "INT", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckNonePolicy})
	jsPublish(t, js, "int.c", "c0")
	obs("published for A and C")
	if ms, err := fetch(t, c, 1, jetstream.FetchMaxWait(2*time.Second)); err != nil || len(ms) != 1 {
		t.Fatalf("%s: C fetch: %d %v", tgt.name, len(ms), err)
	}
	am := next1(t, a, 2*time.Second)
	if err := am.DoubleAck(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	obs("C (ack none) got it and A acked it")
	return out
}

func TestJSCInterestRetention(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	a, b := runInterest(t, ours), runInterest(t, ref)
	for i := range b {
		t.Logf("nats-server %s", b[i])
		if i >= len(a) || a[i] != b[i] {
			t.Errorf("interest retention differs at step %d\ncontrail:    %q\nnats-server: %q", i, a, b)
			break
		}
	}
}
