package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream in operator mode: every account has its own streams,
// consumers and API, and no request from one account can name, read or
// change another's.

// jsAccount makes a JetStream-enabled account with a user and connects.
func (w *opWorld) jsAccount(t testing.TB, n *node, name string) (*opAccount, *jsTarget) {
	t.Helper()
	a := w.account(name, func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() })
	creds, _ := a.user(strings.ToLower(name), nil)
	return a, jsConnect(t, name, n.URL, nats.UserCredentials(creds))
}

func TestOpJetStreamSameNamesAreSeparate(t *testing.T) {
	w := newOpWorld(t)
	n := w.startOpNode(t)
	_, a := w.jsAccount(t, n, "A")
	_, b := w.jsAccount(t, n, "B")
	for _, tg := range []*jsTarget{a, b} {
		createStream(t, tg.js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	}
	jsPublish(t, a.js, "orders.1", "a1")
	jsPublish(t, a.js, "orders.2", "a2")
	jsPublish(t, b.js, "orders.1", "b1")
	if st := streamInfo(t, a.js, "ORDERS").State; st.Msgs != 2 {
		t.Fatalf("A's ORDERS holds %d messages, want 2", st.Msgs)
	}
	if st := streamInfo(t, b.js, "ORDERS").State; st.Msgs != 1 {
		t.Fatalf("B's ORDERS holds %d messages, want 1", st.Msgs)
	}
	m := getRaw(t, mustStream(t, b.js, "ORDERS"), 1)
	if string(m.Data) != "b1" {
		t.Fatalf("B read %q from its ORDERS", m.Data)
	}
}

func mustStream(t testing.TB, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.Stream(ctxT(t), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s
}

// TestOpJetStreamCrossAccountMatrix tries every JetStream API subject from
// account B against account A's stream and consumer (the class of
// CVE-2025-30215: an API that names another account's assets). Each must
// be refused or see nothing, and A's assets must be unchanged after.
func TestOpJetStreamCrossAccountMatrix(t *testing.T) {
	w := newOpWorld(t)
	n := w.startOpNode(t)
	accA, a := w.jsAccount(t, n, "A")
	_, b := w.jsAccount(t, n, "B")
	createStream(t, a.js, jetstream.StreamConfig{Name: "SECRET", Subjects: []string{"secret.>"}, AllowDirect: true})
	for i := range 3 {
		jsPublish(t, a.js, fmt.Sprintf("secret.%d", i), "classified")
	}
	cons, err := a.js.CreateOrUpdateConsumer(ctxT(t), "SECRET", jetstream.ConsumerConfig{Durable: "READER", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	A := accA.pub
	probes := []struct{ subj, body string }{
		{"$JS.API.INFO", ""},
		{"$JS.API.STREAM.INFO.SECRET", ""},
		{"$JS.API.STREAM.UPDATE.SECRET", `{"name":"SECRET","subjects":["secret.>"],"max_msgs":1}`},
		{"$JS.API.STREAM.DELETE.SECRET", ""},
		{"$JS.API.STREAM.PURGE.SECRET", ""},
		{"$JS.API.STREAM.MSG.GET.SECRET", `{"seq":1}`},
		{"$JS.API.STREAM.MSG.DELETE.SECRET", `{"seq":1}`},
		{"$JS.API.STREAM.LEADER.STEPDOWN.SECRET", ""},
		{"$JS.API.STREAM.NAMES", ""},
		{"$JS.API.STREAM.LIST", ""},
		{"$JS.API.STREAM.SNAPSHOT.SECRET", `{"deliver_subject":"_INBOX.snap"}`},
		{"$JS.API.STREAM.RESTORE.SECRET", `{"config":{"name":"SECRET"}}`},
		{"$JS.API.STREAM.PEER.REMOVE.SECRET", `{"peer":"x"}`},
		{"$JS.API.CONSUMER.INFO.SECRET.READER", ""},
		{"$JS.API.CONSUMER.NAMES.SECRET", ""},
		{"$JS.API.CONSUMER.LIST.SECRET", ""},
		{"$JS.API.CONSUMER.DELETE.SECRET.READER", ""},
		{"$JS.API.CONSUMER.PAUSE.SECRET.READER", `{"pause_until":"2099-01-01T00:00:00Z"}`},
		{"$JS.API.CONSUMER.UNPIN.SECRET.READER", `{"group":"g"}`},
		{"$JS.API.CONSUMER.LEADER.STEPDOWN.SECRET.READER", ""},
		{"$JS.API.CONSUMER.CREATE.SECRET.STEAL", `{"stream_name":"SECRET","config":{"name":"STEAL","ack_policy":"none"}}`},
		{"$JS.API.CONSUMER.DURABLE.CREATE.SECRET.STEAL", `{"stream_name":"SECRET","config":{"durable_name":"STEAL","ack_policy":"none"}}`},
		{"$JS.API.CONSUMER.MSG.NEXT.SECRET.READER", `{"batch":1,"no_wait":true}`},
		{"$JS.API.DIRECT.GET.SECRET", `{"seq":1}`},
		{"$JS.API.DIRECT.GET.SECRET.secret.1", ""},
		{"$JS.API.ACCOUNT.PURGE." + A, ""},
		{"$JS.API.ACCOUNT.STREAM.MOVE." + A + ".SECRET", `{}`},
		{"$JS.API.ACCOUNT.STREAM.CANCEL_MOVE." + A + ".SECRET", ""},
		{"$JS.API.SERVER.REMOVE", `{"peer":"x"}`},
		{"$JS.API.META.LEADER.STEPDOWN", ""},
		{"$JS.ACK.SECRET.READER.1.1.1.0.0", ""},
		{"$KV.SECRET.x", ""},
		{"secret.99", "injected"},
	}
	for _, p := range probes {
		msg, err := b.nc.Request(p.subj, []byte(p.body), 2*time.Second)
		if err != nil {
			if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) {
				continue // nobody in B answers: nothing of A was reached
			}
			t.Fatalf("%s: %v", p.subj, err)
		}
		body := string(msg.Data)
		for _, leak := range []string{"classified", "READER", A} {
			if strings.Contains(body, leak) {
				t.Errorf("%s from B: reply mentions A's %q: %s", p.subj, leak, body)
			}
		}
		if strings.Contains(body, `"SECRET"`) && !strings.Contains(body, `"error"`) {
			t.Errorf("%s from B: reply names A's stream without an error: %s", p.subj, body)
		}
	}

	// A's assets are untouched and still its own.
	st := streamInfo(t, a.js, "SECRET")
	if st.State.Msgs != 3 || st.Config.MaxMsgs != -1 {
		t.Fatalf("A's stream changed: %d msgs, max_msgs %d", st.State.Msgs, st.Config.MaxMsgs)
	}
	ci, err := cons.Info(ctxT(t))
	if err != nil || ci.NumPending != 3 || ci.Delivered.Consumer != 0 {
		t.Fatalf("A's consumer changed: %+v %v", ci, err)
	}
	names := mustStream(t, a.js, "SECRET").ConsumerNames(ctxT(t))
	var got []string
	for nm := range names.Name() {
		got = append(got, nm)
	}
	if len(got) != 1 || got[0] != "READER" {
		t.Fatalf("A's consumers are %v", got)
	}
	// A works its stream while B listens on every JetStream and inbox
	// subject: nothing reaches B.
	snoop := subscribeSync(t, b.nc, "$JS.>")
	snoopInbox := subscribeSync(t, b.nc, "_INBOX.>")
	flush(t, b.nc)
	mustAPI(t, a.nc, "$JS.API.STREAM.INFO.SECRET", "")
	msgs, err := cons.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		m.Ack()
	}
	flush(t, a.nc)
	roundTripOn(t, b.nc)
	for _, s := range []*nats.Subscription{snoop, snoopInbox} {
		for {
			m, err := s.NextMsg(20 * time.Millisecond)
			if err != nil {
				break
			}
			if strings.Contains(string(m.Data), "classified") || strings.Contains(m.Subject, "SECRET") {
				t.Fatalf("B overheard A's JetStream traffic on %q: %s", m.Subject, m.Data)
			}
		}
	}
}

// roundTripOn proves a connection's earlier traffic has been processed
// (a PING/PONG), without needing publish rights.
func roundTripOn(t testing.TB, nc *nats.Conn) {
	t.Helper()
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}
