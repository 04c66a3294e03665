package main

import (
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Acknowledgements (every kind), ack policies, ack wait and backoff
// redelivery, max_deliver and its advisory, max_ack_pending.

// next1 fetches exactly one message within wait, failing otherwise.
func next1(t testing.TB, c jetstream.Consumer, wait time.Duration) jetstream.Msg {
	t.Helper()
	m, err := c.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return m
}

// noneWithin asserts that a fetch of one gets nothing within wait.
func noneWithin(t testing.TB, c jetstream.Consumer, wait time.Duration, why string) {
	t.Helper()
	ms, err := fetch(t, c, 1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("%s: fetch: %v", why, err)
	}
	if len(ms) > 0 {
		md := meta(t, ms[0])
		t.Fatalf("%s: got seq %d (delivery %d)", why, md.Sequence.Stream, md.NumDelivered)
	}
}

func TestJSCAcks(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("AckNakTerm", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "AK"})
		pubN(t, js, "AK.a", "m", 6)
		c := mkConsumer(t, js, "AK", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second})
		advs := subscribeSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.>")
		ms, err := fetch(t, c, 6, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 6 {
			t.Fatalf("fetch 6: %d, %v", len(ms), err)
		}
		// m1 ack, m2 double ack, m3 nak, m4 nak with delay, m5 term, m6
		// term with reason.
		if err := ms[0].Ack(); err != nil {
			t.Fatal(err)
		}
		if err := ms[1].DoubleAck(ctxT(t)); err != nil {
			t.Fatalf("double ack: %v", err)
		}
		if err := ms[1].Ack(); !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			t.Errorf("second ack: %v", err)
		}
		nakAt := time.Now()
		if err := ms[2].Nak(); err != nil {
			t.Fatal(err)
		}
		if err := ms[3].NakWithDelay(700 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := ms[4].Term(); err != nil {
			t.Fatal(err)
		}
		if err := ms[5].TermWithReason("not for me"); err != nil {
			t.Fatal(err)
		}
		// The plain nak comes back at once, the delayed one after its delay.
		m := next1(t, c, 2*time.Second)
		if md := meta(t, m); md.Sequence.Stream != 3 || md.NumDelivered != 2 || md.Sequence.Consumer != 7 {
			t.Fatalf("after nak: %+v", md)
		}
		m.Ack()
		m = next1(t, c, 3*time.Second)
		if md := meta(t, m); md.Sequence.Stream != 4 || md.NumDelivered != 2 {
			t.Fatalf("after nak with delay: %+v", md)
		}
		if el := time.Since(nakAt); el < 650*time.Millisecond {
			t.Errorf("nak with 700ms delay redelivered after %v", el)
		}
		m.Ack()
		// Terminated ones never come back.
		noneWithin(t, c, 300*time.Millisecond, "after term")
		info := waitConsumer(t, js, "AK", "d", ioTimeout, "all settled", func(ci *jetstream.ConsumerInfo) bool { return ci.NumAckPending == 0 })
		// num_redelivered counts outstanding redeliveries: none now.
		if info.AckFloor.Stream != 6 || info.NumRedelivered != 0 || info.Delivered.Consumer != 8 {
			t.Errorf("info after acks: ack floor %+v, redelivered %d, delivered %+v", info.AckFloor, info.NumRedelivered, info.Delivered)
		}
		// Advisories: two naks, two terminations (one with the reason).
		kinds := map[string]int{}
		var reason string
		for i := 0; i < 4; i++ {
			a := nextMsg(t, advs)
			var doc map[string]any
			if err := json.Unmarshal(a.Data, &doc); err != nil {
				t.Fatal(err)
			}
			kinds[doc["type"].(string)]++
			if r, ok := doc["reason"].(string); ok {
				reason = r
			}
			if doc["stream"] != "AK" || doc["consumer"] != "d" {
				t.Errorf("advisory %s", a.Data)
			}
		}
		if kinds["io.nats.jetstream.advisory.v1.nak"] != 2 || kinds["io.nats.jetstream.advisory.v1.terminated"] != 2 || reason != "not for me" {
			t.Errorf("advisories %v, reason %q", kinds, reason)
		}
	})

	t.Run("InProgress", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "AW"})
		jsPublish(t, js, "AW.a", "slow")
		c := mkConsumer(t, js, "AW", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
		m := next1(t, c, 2*time.Second)
		// Working for twice the ack wait, saying so every 200ms: no
		// redelivery meanwhile.
		until := time.Now().Add(2 * time.Second)
		for time.Now().Before(until) {
			if err := m.InProgress(); err != nil {
				t.Fatal(err)
			}
			noneWithin(t, c, 200*time.Millisecond, "while in progress")
		}
		last := time.Now()
		if err := m.InProgress(); err != nil {
			t.Fatal(err)
		}
		// Silence: it comes back one ack wait after the last progress.
		r := next1(t, c, 3*time.Second)
		if md := meta(t, r); md.NumDelivered != 2 {
			t.Fatalf("redelivery %+v", md)
		}
		if el := time.Since(last); el < 950*time.Millisecond {
			t.Errorf("redelivered %v after the last progress, ack wait is 1s", el)
		}
		if err := r.DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("AckPolicies", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "AP"})
		pubN(t, js, "AP.a", "m", 10)

		none := mkConsumer(t, js, "AP", jetstream.ConsumerConfig{Durable: "none", AckPolicy: jetstream.AckNonePolicy})
		ms, err := fetch(t, none, 10, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 10 {
			t.Fatalf("ack none fetch: %d %v", len(ms), err)
		}
		if ci := consumerInfo(t, js, "AP", "none"); ci.AckFloor.Stream != 10 || ci.NumAckPending != 0 || ci.AckFloor.Consumer != 10 {
			t.Errorf("ack none info: floor %+v pending %d", ci.AckFloor, ci.NumAckPending)
		}

		all := mkConsumer(t, js, "AP", jetstream.ConsumerConfig{Durable: "all", AckPolicy: jetstream.AckAllPolicy, AckWait: 500 * time.Millisecond})
		ms, err = fetch(t, all, 10, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 10 {
			t.Fatalf("ack all fetch: %d %v", len(ms), err)
		}
		if err := ms[4].DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if ci := consumerInfo(t, js, "AP", "all"); ci.AckFloor.Stream != 5 || ci.NumAckPending != 5 {
			t.Errorf("ack all after acking the 5th: floor %+v pending %d", ci.AckFloor, ci.NumAckPending)
		}
		// 6..10 come back after the ack wait; acking the last acks all.
		ms, err = fetch(t, all, 5, jetstream.FetchMaxWait(3*time.Second))
		if err != nil || len(ms) != 5 || meta(t, ms[0]).Sequence.Stream != 6 || meta(t, ms[0]).NumDelivered != 2 {
			t.Fatalf("ack all redelivery: %d %v", len(ms), err)
		}
		if err := ms[4].DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if ci := consumerInfo(t, js, "AP", "all"); ci.AckFloor.Stream != 10 || ci.NumAckPending != 0 {
			t.Errorf("ack all after the last: floor %+v pending %d", ci.AckFloor, ci.NumAckPending)
		}

		ex := mkConsumer(t, js, "AP", jetstream.ConsumerConfig{Durable: "explicit", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		ms, err = fetch(t, ex, 10, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 10 {
			t.Fatalf("explicit fetch: %d %v", len(ms), err)
		}
		// Acking out of order: the floor stops at the first gap.
		for _, i := range []int{0, 1, 3, 4, 9} {
			if err := ms[i].DoubleAck(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		ci := consumerInfo(t, js, "AP", "explicit")
		if ci.AckFloor.Stream != 2 || ci.AckFloor.Consumer != 2 || ci.NumAckPending != 5 {
			t.Errorf("explicit with gaps: floor %+v pending %d", ci.AckFloor, ci.NumAckPending)
		}
		for _, i := range []int{2, 5, 6, 7, 8} {
			if err := ms[i].DoubleAck(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		ci = consumerInfo(t, js, "AP", "explicit")
		if ci.AckFloor.Stream != 10 || ci.NumAckPending != 0 {
			t.Errorf("explicit all acked: floor %+v pending %d", ci.AckFloor, ci.NumAckPending)
		}
	})

	t.Run("AckWaitAndBackoff", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "AB"})
		jsPublish(t, js, "AB.a", "x")
		advs := subscribeSync(t, nc, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.AB.d")
		c := mkConsumer(t, js, "AB", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy,
			BackOff: []time.Duration{300 * time.Millisecond, 900 * time.Millisecond}, MaxDeliver: 3})
		if ci := consumerInfo(t, js, "AB", "d"); ci.Config.AckWait != 300*time.Millisecond {
			t.Errorf("ack wait with backoff: %v, want the first backoff step", ci.Config.AckWait)
		}
		// A pull waiting all along sees each delivery as it happens.
		var times []time.Time
		for i := 1; i <= 3; i++ {
			m := next1(t, c, 3*time.Second)
			times = append(times, time.Now())
			if md := meta(t, m); md.NumDelivered != uint64(i) {
				t.Fatalf("delivery %d: %+v", i, md)
			}
		}
		if d := times[1].Sub(times[0]); d < 250*time.Millisecond || d > 2*time.Second {
			t.Errorf("first redelivery after %v, backoff says 300ms", d)
		}
		if d := times[2].Sub(times[1]); d < 800*time.Millisecond || d > 3*time.Second {
			t.Errorf("second redelivery after %v, backoff says 900ms", d)
		}
		// Third delivery was the last: the advisory follows its ack wait
		// (the last backoff step), and nothing more is delivered.
		a := nextMsg(t, advs)
		var doc map[string]any
		if err := json.Unmarshal(a.Data, &doc); err != nil {
			t.Fatal(err)
		}
		if doc["type"] != "io.nats.jetstream.advisory.v1.max_deliver" || doc["stream"] != "AB" || doc["consumer"] != "d" ||
			doc["stream_seq"] != float64(1) || doc["deliveries"] != float64(3) {
			t.Errorf("max deliveries advisory %s", a.Data)
		}
		if el := time.Since(times[2]); el < 800*time.Millisecond {
			t.Errorf("advisory %v after the last delivery, before its ack wait", el)
		}
		noneWithin(t, c, 500*time.Millisecond, "after max deliver")
		ci := consumerInfo(t, js, "AB", "d")
		if ci.NumAckPending != 0 || ci.NumRedelivered != 1 || ci.Delivered.Consumer != 3 {
			t.Errorf("after max deliver: pending %d redelivered %d delivered %+v", ci.NumAckPending, ci.NumRedelivered, ci.Delivered)
		}
	})

	t.Run("MaxAckPending", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "AM"})
		pubN(t, js, "AM.a", "m", 10)
		c := mkConsumer(t, js, "AM", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy,
			MaxAckPending: 3, AckWait: 400 * time.Millisecond})
		ms, err := fetch(t, c, 10, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "fetch at max ack pending", payloads(ms), seqRange("m", 1, 3))
		// Unacked, their ack wait passes: redeliveries go out even though
		// the consumer is at max_ack_pending.
		ms, err = fetch(t, c, 3, jetstream.FetchMaxWait(3*time.Second))
		if err != nil || len(ms) != 3 {
			t.Fatalf("redeliveries at max ack pending: %d %v", len(ms), err)
		}
		for i, m := range ms {
			if md := meta(t, m); md.Sequence.Stream != uint64(i+1) || md.NumDelivered != 2 {
				t.Errorf("redelivery %d: %+v", i, md)
			}
		}
		// One ack frees one slot.
		if err := ms[0].DoubleAck(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		ms2, err := fetch(t, c, 5, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil || len(ms2) != 1 || string(ms2[0].Data()) != "m4" {
			t.Fatalf("after one ack: %q %v", payloads(ms2), err)
		}
		for _, m := range append(ms[1:], ms2...) {
			if err := m.DoubleAck(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		// (Shorter than the ack wait, or 5..7 would come back too.)
		ms, err = fetch(t, c, 10, jetstream.FetchMaxWait(250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		wantStrings(t, "after acking", payloads(ms), seqRange("m", 5, 7))
	})
}

// TestJSCCompareAdvisories runs the same ack session on both servers and
// compares the advisories' members.
func TestJSCCompareAdvisories(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	run := func(tgt *jsTarget) []string {
		st := mkStream(t, tgt.js, jetstream.StreamConfig{Name: "ADV"})
		pubN(t, tgt.js, "ADV.a", "m", 4)
		advs := subscribeSync(t, tgt.nc, "$JS.EVENT.ADVISORY.CONSUMER.*.ADV.d")
		c := mkConsumer(t, tgt.js, "ADV", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 300 * time.Millisecond, MaxDeliver: 2})
		ms, err := fetch(t, c, 4, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 4 {
			t.Fatalf("%s: fetch: %d %v", tgt.name, len(ms), err)
		}
		ms[0].DoubleAck(ctxT(t))
		ms[1].TermWithReason("why")
		// ms[2] is redelivered once after its ack wait, then hits
		// max_deliver; ms[3] is deleted from the stream while pending.
		if err := st.DeleteMsg(ctxT(t), 4); err != nil {
			t.Fatal(err)
		}
		if m := next1(t, c, 2*time.Second); meta(t, m).NumDelivered != 2 {
			t.Fatalf("%s: no redelivery", tgt.name)
		}
		// Its ack wait passes again: max_deliver reached, it leaves the
		// pending set with the advisory (nats-server notices when it
		// next tries to deliver: a pull is waiting meanwhile).
		noneWithin(t, c, time.Second, "past max deliver")
		waitConsumer(t, tgt.js, "ADV", "d", ioTimeout, "max deliver", func(ci *jetstream.ConsumerInfo) bool { return ci.NumAckPending == 0 })
		if _, err := tgt.js.PauseConsumer(ctxT(t), "ADV", "d", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := tgt.js.DeleteConsumer(ctxT(t), "ADV", "d"); err != nil {
			t.Fatal(err)
		}
		var out []string
		for {
			m, err := advs.NextMsg(time.Second)
			if err != nil {
				break
			}
			var doc map[string]any
			if err := json.Unmarshal(m.Data, &doc); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k, v := range doc {
				switch k {
				case "id", "timestamp", "pause_until":
					v = "MASKED"
				}
				b, _ := json.Marshal(v)
				keys = append(keys, k+"="+string(b))
			}
			sort.Strings(keys)
			subj := strings.Split(m.Subject, ".")
			out = append(out, subj[4]+" "+strings.Join(keys, " "))
		}
		sort.Strings(out)
		return out
	}
	a, b := run(ours), run(ref)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("advisories differ\ncontrail:\n  %s\nnats-server:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
}

func TestJSCConsumerConfigs(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "F", Subjects: []string{"f.>"}})
		for i := 1; i <= 12; i++ {
			jsPublish(t, js, "f."+[]string{"a", "b", "c"}[i%3]+".x", strconv.Itoa(i))
		}
		one := mkConsumer(t, js, "F", jetstream.ConsumerConfig{Durable: "one", FilterSubject: "f.a.*", AckPolicy: jetstream.AckExplicitPolicy})
		many := mkConsumer(t, js, "F", jetstream.ConsumerConfig{Durable: "many", FilterSubjects: []string{"f.b.x", "f.c.>"}, AckPolicy: jetstream.AckExplicitPolicy})
		if ci := consumerInfo(t, js, "F", "one"); ci.NumPending != 4 {
			t.Errorf("one filter num_pending %d, want 4", ci.NumPending)
		}
		if ci := consumerInfo(t, js, "F", "many"); ci.NumPending != 8 {
			t.Errorf("two filters num_pending %d, want 8", ci.NumPending)
		}
		ms, _ := fetch(t, one, 20, jetstream.FetchMaxWait(300*time.Millisecond))
		wantStrings(t, "one filter", payloads(ms), []string{"3", "6", "9", "12"})
		ms, _ = fetch(t, many, 20, jetstream.FetchMaxWait(300*time.Millisecond))
		wantStrings(t, "two filters, in stream order", payloads(ms), []string{"1", "2", "4", "5", "7", "8", "10", "11"})
		for i, m := range ms {
			if md := meta(t, m); md.NumPending != uint64(len(ms)-i-1) {
				t.Errorf("message %d num_pending %d", i, md.NumPending)
			}
		}
		// Updating the filters changes what comes next.
		if _, err := js.UpdateConsumer(ctxT(t), "F", jetstream.ConsumerConfig{Durable: "one", FilterSubjects: []string{"f.a.*", "f.b.*"}, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatalf("update filters: %v", err)
		}
		jsPublish(t, js, "f.b.x", "13")
		jsPublish(t, js, "f.c.x", "14")
		jsPublish(t, js, "f.a.x", "15")
		ms, _ = fetch(t, one, 20, jetstream.FetchMaxWait(300*time.Millisecond))
		wantStrings(t, "updated filters", payloads(ms), []string{"13", "15"})
	})

	t.Run("DeliverPolicies", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "DP"})
		pubN(t, js, "DP.a", "a", 3)
		pubN(t, js, "DP.b", "b", 2)
		var mid time.Time
		{
			si := streamInfo(t, js, "DP")
			mid = si.State.LastTime.Add(time.Millisecond)
		}
		// Published after mid: sequences 6, 7.
		waitFor(t, ioTimeout, "the clock to pass mid", func() bool { return time.Now().After(mid.Add(time.Millisecond)) })
		jsPublish(t, js, "DP.a", "a4")
		jsPublish(t, js, "DP.c", "c1")
		cases := []struct {
			name string
			cfg  jetstream.ConsumerConfig
			want []string
		}{
			{"all", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}, []string{"a1", "a2", "a3", "b1", "b2", "a4", "c1"}},
			{"last", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPolicy}, []string{"c1"}},
			{"last filtered", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPolicy, FilterSubject: "DP.b"}, []string{"b2"}},
			{"new", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}, nil},
			{"by start sequence", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 5}, []string{"b2", "a4", "c1"}},
			{"by start time", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &mid}, []string{"a4", "c1"}},
			{"last per subject", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubject: "DP.>"}, []string{"b2", "a4", "c1"}},
			{"last per subject filtered", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubjects: []string{"DP.a", "DP.b"}}, []string{"b2", "a4"}},
		}
		for i, tc := range cases {
			tc.cfg.Durable = "dp" + strconv.Itoa(i)
			tc.cfg.AckPolicy = jetstream.AckExplicitPolicy
			c := mkConsumer(t, js, "DP", tc.cfg)
			ci := consumerInfo(t, js, "DP", tc.cfg.Durable)
			if ci.NumPending != uint64(len(tc.want)) {
				t.Errorf("%s: num_pending %d, want %d", tc.name, ci.NumPending, len(tc.want))
			}
			ms, err := fetch(t, c, 10, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			wantStrings(t, tc.name, payloads(ms), tc.want)
		}
		// A new-policy consumer gets what comes after it.
		c := mkConsumer(t, js, "DP", jetstream.ConsumerConfig{Durable: "newer", DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy})
		jsPublish(t, js, "DP.a", "later")
		if m := next1(t, c, 2*time.Second); string(m.Data()) != "later" {
			t.Errorf("deliver new got %q", m.Data())
		}
	})

	t.Run("HeadersOnly", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "HO"})
		msg := nats.NewMsg("HO.a")
		msg.Header.Set("X-Thing", "kept")
		msg.Data = []byte(strings.Repeat("p", 1234))
		if _, err := js.PublishMsg(ctxT(t), msg); err != nil {
			t.Fatal(err)
		}
		c := mkConsumer(t, js, "HO", jetstream.ConsumerConfig{Durable: "ho", HeadersOnly: true, AckPolicy: jetstream.AckNonePolicy})
		m := next1(t, c, 2*time.Second)
		if len(m.Data()) != 0 || m.Headers().Get("Nats-Msg-Size") != "1234" || m.Headers().Get("X-Thing") != "kept" {
			t.Fatalf("headers only: data %d bytes, headers %v", len(m.Data()), m.Headers())
		}
	})

	t.Run("InactiveThreshold", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "IT"})
		start := time.Now()
		eph, err := js.CreateConsumer(ctxT(t), "IT", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		name := eph.CachedInfo().Name
		mkConsumer(t, js, "IT", jetstream.ConsumerConfig{Durable: "dur", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: 500 * time.Millisecond})
		// Another ephemeral kept alive by a puller.
		live, err := js.CreateConsumer(ctxT(t), "IT", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := live.Consume(func(m jetstream.Msg) { m.Ack() }, jetstream.PullExpiry(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		gone := func(n string) bool {
			_, err := js.Consumer(ctxT(t), "IT", n)
			return errors.Is(err, jetstream.ErrConsumerNotFound)
		}
		waitFor(t, 5*time.Second, "the idle ephemeral to go", func() bool { return gone(name) })
		if el := time.Since(start); el < 450*time.Millisecond {
			t.Errorf("removed after %v, threshold 500ms", el)
		}
		waitFor(t, 5*time.Second, "the idle durable to go", func() bool { return gone("dur") })
		if gone(live.CachedInfo().Name) {
			t.Errorf("an ephemeral with a puller was removed")
		}
	})

	t.Run("PauseResume", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "PR"})
		c := mkConsumer(t, js, "PR", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
		until := time.Now().Add(800 * time.Millisecond)
		resp, err := js.PauseConsumer(ctxT(t), "PR", "d", until)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Paused || !resp.PauseUntil.Equal(until.UTC().Round(0)) && resp.PauseUntil.Sub(until).Abs() > time.Millisecond {
			t.Errorf("pause response %+v", resp)
		}
		if ci := consumerInfo(t, js, "PR", "d"); !ci.Paused || ci.PauseRemaining <= 0 {
			t.Errorf("info while paused: paused %v remaining %v", ci.Paused, ci.PauseRemaining)
		}
		jsPublish(t, js, "PR.a", "one")
		start := time.Now()
		m := next1(t, c, 3*time.Second)
		if time.Now().Before(until.Add(-20*time.Millisecond)) || string(m.Data()) != "one" {
			t.Errorf("delivered %v into an 800ms pause", time.Since(start))
		}
		// Pause again far ahead, then resume: delivery restarts at once.
		if _, err := js.PauseConsumer(ctxT(t), "PR", "d", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		jsPublish(t, js, "PR.a", "two")
		noneWithin(t, c, 300*time.Millisecond, "while paused")
		if resp, err := js.ResumeConsumer(ctxT(t), "PR", "d"); err != nil || resp.Paused {
			t.Fatalf("resume: %+v %v", resp, err)
		}
		if m := next1(t, c, 2*time.Second); string(m.Data()) != "two" {
			t.Errorf("after resume: %q", m.Data())
		}
	})

	t.Run("CreateUpdateSemantics", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		mkStream(t, js, jetstream.StreamConfig{Name: "CU"})
		cfg := jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, Description: "first"}
		mkConsumer(t, js, "CU", cfg)
		if _, err := js.CreateConsumer(ctxT(t), "CU", cfg); err != nil {
			t.Errorf("create again with the same config: %v", err)
		}
		other := cfg
		other.Description = "second"
		_, err := js.CreateConsumer(ctxT(t), "CU", other)
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			t.Errorf("create with another config: %v, want ErrConsumerExists", err)
		}
		wantJSErr(t, "create with another config", err, jetstream.JSErrCodeConsumerExists)
		if c, err := js.UpdateConsumer(ctxT(t), "CU", other); err != nil || c.CachedInfo().Config.Description != "second" {
			t.Errorf("update: %v", err)
		}
		_, err = js.UpdateConsumer(ctxT(t), "CU", jetstream.ConsumerConfig{Durable: "missing", AckPolicy: jetstream.AckExplicitPolicy})
		if !errors.Is(err, jetstream.ErrConsumerDoesNotExist) {
			t.Errorf("update missing: %v, want ErrConsumerDoesNotExist", err)
		}
		wantJSErr(t, "update missing", err, jetstream.JSErrCodeConsumerDoesNotExist)
		if _, err := js.CreateOrUpdateConsumer(ctxT(t), "CU", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 5}); err != nil {
			t.Errorf("create or update: %v", err)
		}
		_, err = js.CreateOrUpdateConsumer(ctxT(t), "CU", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckAllPolicy})
		wantJSErr(t, "changing the ack policy", err, 10012)
		// Errors: a missing stream and a missing consumer.
		_, err = js.Consumer(ctxT(t), "NOPE", "d")
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("consumer on a missing stream: %v", err)
		}
		_, err = js.CreateConsumer(ctxT(t), "NOPE", cfg)
		wantJSErr(t, "create on a missing stream", err, jetstream.JSErrCodeStreamNotFound)
		_, err = js.Consumer(ctxT(t), "CU", "nope")
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("missing consumer: %v", err)
		}
		wantJSErr(t, "missing consumer", err, jetstream.JSErrCodeConsumerNotFound)
		err = js.DeleteConsumer(ctxT(t), "CU", "nope")
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("delete missing consumer: %v", err)
		}
		// Names and list.
		mkConsumer(t, js, "CU", jetstream.ConsumerConfig{Durable: "e", AckPolicy: jetstream.AckExplicitPolicy})
		s, err := js.Stream(ctxT(t), "CU")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		nl := s.ConsumerNames(ctxT(t))
		for n := range nl.Name() {
			names = append(names, n)
		}
		if nl.Err() != nil {
			t.Fatal(nl.Err())
		}
		sort.Strings(names)
		wantStrings(t, "consumer names", names, []string{"d", "e"})
		var listed []string
		il := s.ListConsumers(ctxT(t))
		for ci := range il.Info() {
			listed = append(listed, ci.Name)
		}
		if il.Err() != nil {
			t.Fatal(il.Err())
		}
		sort.Strings(listed)
		wantStrings(t, "consumer list", listed, []string{"d", "e"})
	})
}
