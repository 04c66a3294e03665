package main

import (
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumers through the legacy nc.JetStream() context: pull
// subscriptions, binding to existing consumers, consumer management and
// its errors.

func TestJSCLegacy(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("PullSubscribe", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "LP"})
		pubN(t, js, "LP.a", "m", 12)
		sub, err := ljs.PullSubscribe("LP.a", "lp", nats.AckExplicit(), nats.AckWait(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		ms, err := sub.Fetch(5, nats.MaxWait(2*time.Second))
		if err != nil || len(ms) != 5 {
			t.Fatalf("fetch 5: %d %v", len(ms), err)
		}
		wantStrings(t, "legacy fetch", natsPayloads(ms), seqRange("m", 1, 5))
		for _, m := range ms {
			if err := m.AckSync(); err != nil {
				t.Fatal(err)
			}
		}
		b, err := sub.FetchBatch(10, nats.MaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []*nats.Msg
		for m := range b.Messages() {
			got = append(got, m)
			m.Ack()
		}
		if b.Error() != nil {
			t.Fatalf("fetch batch: %v", b.Error())
		}
		wantStrings(t, "legacy fetch batch", natsPayloads(got), seqRange("m", 6, 12))
		// Nothing left: Fetch times out.
		if _, err := sub.Fetch(1, nats.MaxWait(300*time.Millisecond)); !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("fetch on nothing: %v, want nats.ErrTimeout", err)
		}
		ci, err := sub.ConsumerInfo()
		if err != nil || ci.Name != "lp" || ci.Delivered.Stream != 12 {
			t.Errorf("consumer info: %+v %v", ci, err)
		}
		// An ephemeral pull subscription.
		esub, err := ljs.PullSubscribe("LP.a", "", nats.DeliverLast())
		if err != nil {
			t.Fatal(err)
		}
		defer esub.Unsubscribe()
		ms, err = esub.Fetch(3, nats.MaxWait(300*time.Millisecond))
		if err != nil || len(ms) != 1 || string(ms[0].Data) != "m12" {
			t.Errorf("ephemeral pull, deliver last: %q %v", natsPayloads(ms), err)
		}
	})

	t.Run("BindAndStartOptions", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "LB"})
		pubN(t, js, "LB.a", "m", 6)
		if _, err := ljs.AddConsumer("LB", &nats.ConsumerConfig{Durable: "bound", DeliverSubject: "lb.deliver", AckPolicy: nats.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		sub, err := ljs.SubscribeSync("", nats.Bind("LB", "bound"))
		if err != nil {
			t.Fatalf("bind: %v", err)
		}
		for i := 1; i <= 6; i++ {
			m := nextMsg(t, sub)
			if string(m.Data) != "m"+strconv.Itoa(i) {
				t.Fatalf("bound subscription got %q", m.Data)
			}
			m.Ack()
		}
		sub.Unsubscribe()
		ssub, err := ljs.SubscribeSync("LB.a", nats.StartSequence(4))
		if err != nil {
			t.Fatal(err)
		}
		defer ssub.Unsubscribe()
		if m := nextMsg(t, ssub); string(m.Data) != "m4" {
			t.Errorf("start sequence 4: %q", m.Data)
		}
		tsub, err := ljs.SubscribeSync("LB.a", nats.DeliverNew())
		if err != nil {
			t.Fatal(err)
		}
		defer tsub.Unsubscribe()
		jsPublish(t, js, "LB.a", "fresh")
		if m := nextMsg(t, tsub); string(m.Data) != "fresh" {
			t.Errorf("deliver new: %q", m.Data)
		}
	})

	t.Run("Management", func(t *testing.T) {
		t.Parallel()
		nc, js := e.conn(t)
		ljs := legacy(t, nc)
		mkStream(t, js, jetstream.StreamConfig{Name: "LM"})
		if _, err := ljs.AddConsumer("NOPE", &nats.ConsumerConfig{Durable: "x", AckPolicy: nats.AckExplicitPolicy}); !errors.Is(err, nats.ErrStreamNotFound) {
			t.Errorf("add consumer on a missing stream: %v", err)
		}
		if _, err := ljs.ConsumerInfo("LM", "nope"); !errors.Is(err, nats.ErrConsumerNotFound) {
			t.Errorf("info of a missing consumer: %v", err)
		}
		if err := ljs.DeleteConsumer("LM", "nope"); !errors.Is(err, nats.ErrConsumerNotFound) {
			t.Errorf("delete of a missing consumer: %v", err)
		}
		for _, n := range []string{"b", "a", "c"} {
			if _, err := ljs.AddConsumer("LM", &nats.ConsumerConfig{Durable: n, AckPolicy: nats.AckExplicitPolicy}); err != nil {
				t.Fatal(err)
			}
		}
		ci, err := ljs.UpdateConsumer("LM", &nats.ConsumerConfig{Durable: "a", AckPolicy: nats.AckExplicitPolicy, MaxDeliver: 7})
		if err != nil || ci.Config.MaxDeliver != 7 {
			t.Errorf("update consumer: %+v %v", ci, err)
		}
		var names []string
		for n := range ljs.ConsumerNames("LM") {
			names = append(names, n)
		}
		sort.Strings(names)
		wantStrings(t, "consumer names", names, []string{"a", "b", "c"})
		var infos []string
		for ci := range ljs.Consumers("LM") {
			infos = append(infos, ci.Name)
		}
		sort.Strings(infos)
		wantStrings(t, "consumers", infos, []string{"a", "b", "c"})
		if err := ljs.DeleteConsumer("LM", "b"); err != nil {
			t.Fatal(err)
		}
		if si, err := ljs.StreamInfo("LM"); err != nil || si.State.Consumers != 2 {
			t.Errorf("stream consumer count after delete: %+v %v", si, err)
		}
	})
}
