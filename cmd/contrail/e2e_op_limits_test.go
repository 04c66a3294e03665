package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream limits from account JWTs, through stock clients, changed live
// by claim updates.

func TestOpJetStreamNotEnabled(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("NOJS", nil)
	n := w.startOpNode(t)
	creds, _ := a.user("u", nil)
	tg := jsConnect(t, "NOJS", n.URL, nats.UserCredentials(creds))
	_, err := tg.js.AccountInfo(ctxT(t))
	wantJSErr(t, "account info", err, 10039)
	_, err = tg.js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}})
	wantJSErr(t, "stream create", err, 10039)
	wantAPIError(t, "stream names", apiRequest(t, tg.nc, "$JS.API.STREAM.NAMES", ""), 10039, "JetStream not enabled for account")
}

func TestOpJetStreamLimitsLive(t *testing.T) {
	w := newOpWorld(t)
	n := w.startOpNode(t)
	sysCreds, _ := w.sys.user("sys", nil)
	sys := connectCreds(t, n.URL, sysCreds)
	a := w.account("A", func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: 1 << 20, DiskStorage: 64 << 10, Streams: 1, Consumer: 1, MaxAckPending: 100}
	})
	creds, _ := a.user("u", nil)
	tg := jsConnect(t, "A", n.URL, nats.UserCredentials(creds))
	ctx := ctxT(t)

	info, err := tg.js.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := info.Limits; l.MaxStreams != 1 || l.MaxConsumers != 1 || l.MaxStore != 64<<10 || l.MaxMemory != 1<<20 {
		t.Fatalf("account info limits: %+v", l)
	}

	s := createStream(t, tg.js, jetstream.StreamConfig{Name: "ONE", Subjects: []string{"one.>"}})
	_, err = tg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TWO", Subjects: []string{"two.>"}})
	wantJSErr(t, "second stream", err, 10027)
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C1", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C2", AckPolicy: jetstream.AckExplicitPolicy})
	wantJSErr(t, "second consumer", err, 10026)
	_, err = tg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big"}, MaxBytes: 1 << 20})
	if err == nil {
		t.Fatal("a stream reserving more than the account's storage was created")
	}

	// Storage: fill the account's 64 KiB, then a publish is refused and
	// nothing more is stored.
	payload := strings.Repeat("x", 8<<10)
	var refused error
	for range 16 {
		if _, err := tg.js.Publish(ctx, "one.fill", []byte(payload)); err != nil {
			refused = err
			break
		}
	}
	var apiErr *jetstream.APIError
	if !errors.As(refused, &apiErr) || apiErr.ErrorCode != 10002 {
		t.Fatalf("publishing past the storage limit: %v, want err_code 10002", refused)
	}
	before := streamInfo(t, tg.js, "ONE").State.Msgs
	tg.js.Publish(ctx, "one.fill", []byte(payload))
	if after := streamInfo(t, tg.js, "ONE").State.Msgs; after != before {
		t.Fatalf("a full account stored a message: %d → %d", before, after)
	}

	// Raise the limits live: the same connection may now do more.
	a.claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: 1 << 20, DiskStorage: 4 << 20, Streams: 3, Consumer: 5}
	w.pushClaims(t, sys, a)
	createStream(t, tg.js, jetstream.StreamConfig{Name: "TWO", Subjects: []string{"two.>"}})
	if _, err := tg.js.Publish(ctx, "one.fill", []byte(payload)); err != nil {
		t.Fatalf("publish after raising storage: %v", err)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C2", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("second consumer after raising the limit: %v", err)
	}

	// Lower them again: nothing stored is lost, new work is refused.
	a.claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: 1 << 20, DiskStorage: 4 << 20, Streams: 1, Consumer: 5}
	w.pushClaims(t, sys, a)
	_, err = tg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "THREE", Subjects: []string{"three.>"}})
	wantJSErr(t, "stream over a lowered limit", err, 10027)
	if got := streamInfo(t, tg.js, "TWO").Config.Name; got != "TWO" {
		t.Fatal("lowering the limit lost a stream")
	}

	// Turning JetStream off for the account answers 10039; on again, the
	// streams are back with their data.
	msgs := streamInfo(t, tg.js, "ONE").State.Msgs
	a.claims.Limits.JetStreamLimits = jwt.JetStreamLimits{}
	w.pushClaims(t, sys, a)
	_, err = tg.js.AccountInfo(ctx)
	wantJSErr(t, "account info with JetStream off", err, 10039)
	a.claims.Limits.JetStreamLimits = jsLimits()
	w.pushClaims(t, sys, a)
	if got := streamInfo(t, tg.js, "ONE").State.Msgs; got != msgs {
		t.Fatalf("after JetStream off and on: %d messages, want %d", got, msgs)
	}
}

func TestOpJetStreamTieredLimits(t *testing.T) {
	w := newOpWorld(t)
	n := w.startOpNode(t)
	a := w.account("T", func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamTieredLimits = jwt.JetStreamTieredLimits{
			"R1": {MemoryStorage: 1 << 20, DiskStorage: 1 << 20, Streams: 2, Consumer: -1},
		}
	})
	creds, _ := a.user("u", nil)
	tg := jsConnect(t, "T", n.URL, nats.UserCredentials(creds))
	createStream(t, tg.js, jetstream.StreamConfig{Name: "A", Subjects: []string{"a"}})
	createStream(t, tg.js, jetstream.StreamConfig{Name: "B", Subjects: []string{"b"}})
	_, err := tg.js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "C", Subjects: []string{"c"}})
	wantJSErr(t, "third R1 stream", err, 10027)
	info, err := tg.js.AccountInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	r1, ok := info.Tiers["R1"]
	if !ok || r1.Streams != 2 || r1.Limits.MaxStreams != 2 {
		t.Fatalf("account info tiers: %+v", info.Tiers)
	}
}

// TestOpConsumerLimitPerStream: the account JWT's consumer limit bounds
// each stream's consumers, as nats-server enforces it, so an account
// that works on nats-server works here: one consumer on each of two
// streams under a limit of 1, and a second on one stream refused.
func TestOpConsumerLimitPerStream(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: 1 << 20, DiskStorage: 1 << 20, Streams: -1, Consumer: 1}
		})
		var url string
		if ref {
			url = w.startRef(t).URL
		} else {
			url = w.startOpNode(t).URL
		}
		creds, _ := a.user("u", nil)
		tg := jsConnect(t, "A", url, nats.UserCredentials(creds))
		ctx := ctxT(t)
		for _, name := range []string{"ONE", "TWO"} {
			s := createStream(t, tg.js, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name)}})
			if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				t.Fatalf("first consumer of %s: %v", name, err)
			}
		}
		_, err := mustStream(t, tg.js, "ONE").CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
		wantJSErr(t, "second consumer of a stream", err, 10026)
	})
}
