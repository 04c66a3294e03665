package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestJSCPriorityGroups drives priority groups (ADR-42) through stock
// nats.go against Contrail and nats-server: pinned_client serves one
// client and refuses another's pin, unpinning hands the pin on; overflow
// serves a request only once the consumer is backed up past min_pending.
func TestJSCPriorityGroups(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	for _, tg := range []*jsTarget{ours, ref} {
		t.Run(tg.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := tg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "PG", Subjects: []string{"pg.>"}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if _, err := tg.js.Publish(ctx, "pg.x", []byte(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}

			// Pinned client: the first fetcher gets the pin.
			pinned, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "P", AckPolicy: jetstream.AckExplicitPolicy,
				PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"g"}, PinnedTTL: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := pinned.Fetch(2, jetstream.FetchPriorityGroup("g"), jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var pin string
			n := 0
			for m := range batch.Messages() {
				pin = m.Headers().Get("Nats-Pin-Id")
				m.Ack()
				n++
			}
			if n != 2 || pin == "" {
				t.Fatalf("pinned fetch: %d messages, pin %q, err %v", n, pin, batch.Error())
			}
			info, err := pinned.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.PriorityGroups) != 1 || info.PriorityGroups[0].PinnedClientID != pin {
				t.Fatalf("consumer info priority groups: %+v (pin %q)", info.PriorityGroups, pin)
			}
			// Another client (its own consumer handle, no pin) is not served
			// while the pin holds.
			other, err := s.Consumer(ctx, "P")
			if err != nil {
				t.Fatal(err)
			}
			ob, err := other.Fetch(1, jetstream.FetchPriorityGroup("g"), jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			for range ob.Messages() {
				t.Fatal("an unpinned client was served while another holds the pin")
			}
			// Unpinning lets the next client take a new pin.
			if err := s.UnpinConsumer(ctx, "P", "g"); err != nil {
				t.Fatal(err)
			}
			nb, err := other.Fetch(1, jetstream.FetchPriorityGroup("g"), jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for m := range nb.Messages() {
				if p := m.Headers().Get("Nats-Pin-Id"); p == "" || p == pin {
					t.Errorf("after unpin, pin %q (old %q)", p, pin)
				}
				got++
			}
			if got != 1 {
				t.Fatalf("after unpin: %d messages, err %v", got, nb.Error())
			}
			// A group the consumer does not have is a bad request.
			bad, err := pinned.Fetch(1, jetstream.FetchPriorityGroup("nope"), jetstream.FetchMaxWait(time.Second))
			if err == nil {
				for range bad.Messages() {
				}
				err = bad.Error()
			}
			if err == nil {
				t.Error("fetch with an unknown priority group succeeded")
			}

			// Overflow: min_pending holds a request back until the backlog
			// reaches it.
			over, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "O", AckPolicy: jetstream.AckExplicitPolicy,
				PriorityPolicy: jetstream.PriorityPolicyOverflow, PriorityGroups: []string{"g"}})
			if err != nil {
				t.Fatal(err)
			}
			held, err := over.Fetch(1, jetstream.FetchPriorityGroup("g"), jetstream.FetchMinPending(100), jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			for range held.Messages() {
				t.Fatal("min_pending 100 served with 10 pending")
			}
			if e := held.Error(); e != nil && !errors.Is(e, jetstream.ErrNoMessages) {
				t.Fatalf("held fetch ended with %v", e)
			}
			served, err := over.Fetch(1, jetstream.FetchPriorityGroup("g"), jetstream.FetchMinPending(5), jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			cnt := 0
			for m := range served.Messages() {
				m.Ack()
				cnt++
			}
			if cnt != 1 {
				t.Fatalf("min_pending 5 with 10 pending: %d messages, err %v", cnt, served.Error())
			}
		})
	}
}
