package main

import (
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The publish path: PubAcks, deduplication, and the Nats-Expected-*
// headers, through both nats.go APIs.

func TestJSPublishAck(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	createStream(t, c.js, jetstream.StreamConfig{Name: "ACKS", Subjects: []string{"acks.>"}})

	ack := jsPublish(t, c.js, "acks.a", "1")
	if ack.Stream != "ACKS" || ack.Sequence != 1 || ack.Duplicate || ack.Domain != "" {
		t.Errorf("first PubAck %+v", ack)
	}
	ack = jsPublish(t, c.js, "acks.b.c", "2", jetstream.WithMsgID("id-2"))
	if ack.Sequence != 2 || ack.Duplicate {
		t.Errorf("PubAck with a msg id %+v", ack)
	}
	ack = jsPublish(t, c.js, "acks.b.c", "2 again", jetstream.WithMsgID("id-2"))
	if ack.Sequence != 2 || !ack.Duplicate {
		t.Errorf("duplicate PubAck %+v, want seq 2 duplicate", ack)
	}
	if m := getRawByName(t, c.js, "ACKS", 2); string(m.Data) != "2" {
		t.Errorf("a duplicate replaced the message: %q", m.Data)
	}

	// The raw PubAck, byte for byte as nats-server writes it.
	resp, err := c.nc.Request("acks.raw", []byte("x"), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Data) != `{"stream":"ACKS","seq":3}` {
		t.Errorf("raw PubAck %q", resp.Data)
	}

	// Publishing where no stream listens.
	if _, err := c.js.Publish(ctx, "nobody.home", []byte("x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("publish without a stream: %v, want ErrNoStreamResponse", err)
	}

	// The legacy JetStreamContext sees the same.
	legacy, err := c.nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	pa, err := legacy.Publish("acks.legacy", []byte("l"), nats.MsgId("legacy-1"))
	if err != nil || pa.Stream != "ACKS" || pa.Sequence != 4 || pa.Duplicate {
		t.Errorf("legacy publish: %+v %v", pa, err)
	}
	pa, err = legacy.Publish("acks.legacy", []byte("l"), nats.MsgId("legacy-1"))
	if err != nil || pa.Sequence != 4 || !pa.Duplicate {
		t.Errorf("legacy duplicate publish: %+v %v", pa, err)
	}
	_, err = legacy.Publish("acks.legacy", []byte("l"), nats.ExpectStream("OTHER"))
	wantLegacyErr(t, "legacy expected stream", err, 10060)
}

func TestJSPublishExpectations(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	createStream(t, c.js, jetstream.StreamConfig{Name: "EXP", Subjects: []string{"exp.*"}})

	jsPublish(t, c.js, "exp.a", "1", jetstream.WithMsgID("m1"))                     // 1
	jsPublish(t, c.js, "exp.b", "2", jetstream.WithExpectStream("EXP"))             // 2
	jsPublish(t, c.js, "exp.a", "3", jetstream.WithExpectLastSequence(2))           // 3
	jsPublish(t, c.js, "exp.b", "4", jetstream.WithExpectLastSequencePerSubject(2)) // 4
	jsPublish(t, c.js, "exp.c", "5", jetstream.WithExpectLastSequencePerSubject(0)) // 5: a new subject
	jsPublish(t, c.js, "exp.c", "6", jetstream.WithExpectLastSequenceForSubject(3, "exp.a"), jetstream.WithMsgID("m6"))
	jsPublish(t, c.js, "exp.c", "7", jetstream.WithExpectLastMsgID("m6"), jetstream.WithMsgID("m7")) // 7

	fail := func(what string, code jetstream.ErrorCode, opts ...jetstream.PublishOpt) {
		t.Helper()
		_, err := c.js.Publish(ctxT(t), "exp.a", []byte("refused"), opts...)
		wantJSErr(t, what, err, code)
	}
	fail("wrong stream", 10060, jetstream.WithExpectStream("NOT"))
	fail("wrong last sequence", 10071, jetstream.WithExpectLastSequence(6))
	fail("wrong last subject sequence", 10071, jetstream.WithExpectLastSequencePerSubject(1))
	fail("wrong last subject sequence for another subject", 10071, jetstream.WithExpectLastSequenceForSubject(1, "exp.b"))
	fail("wrong last msg id", 10070, jetstream.WithExpectLastMsgID("m6"))
	// The last message's id is what counts: one without an id resets it.
	jsPublish(t, c.js, "exp.a", "8") // 8
	fail("last msg id after a message without one", 10070, jetstream.WithExpectLastMsgID("m7"))

	// The error text names what was expected.
	_, err := c.js.Publish(ctxT(t), "exp.a", nil, jetstream.WithExpectLastSequence(1))
	var withAPI interface{ APIError() *jetstream.APIError }
	if !errors.As(err, &withAPI) || withAPI.APIError().Description != "wrong last sequence: 8" {
		t.Errorf("wrong last sequence error: %v", err)
	}
	// Nothing refused was stored.
	if st := streamInfo(t, c.js, "EXP").State; st.Msgs != 8 || st.LastSeq != 8 {
		t.Errorf("state %+v, want the 8 accepted messages", st)
	}

	// The legacy API's options map to the same headers.
	legacy, err := c.nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := legacy.Publish("exp.a", []byte("9"), nats.ExpectLastSequence(8), nats.ExpectLastSequencePerSubject(8)); err != nil {
		t.Errorf("legacy expectations met: %v", err)
	}
	_, err = legacy.Publish("exp.a", nil, nats.ExpectLastSequence(1))
	wantLegacyErr(t, "legacy wrong last sequence", err, 10071)
	_, err = legacy.Publish("exp.a", nil, nats.ExpectLastMsgId("zzz"))
	wantLegacyErr(t, "legacy wrong last msg id", err, 10070)
}

func TestJSDuplicateWindow(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	createStream(t, c.js, jetstream.StreamConfig{Name: "DW", Subjects: []string{"dw"}, Duplicates: time.Second})
	start := time.Now()
	first := jsPublish(t, c.js, "dw", "1", jetstream.WithMsgID("same"))
	// Within the window the id is a duplicate; once it passed, the same id
	// stores a new message.
	var last *jetstream.PubAck
	waitFor(t, 10*time.Second, "the duplicate window to pass", func() bool {
		last = jsPublish(t, c.js, "dw", "again", jetstream.WithMsgID("same"))
		if last.Duplicate && last.Sequence != first.Sequence {
			t.Fatalf("duplicate names seq %d, want %d", last.Sequence, first.Sequence)
		}
		return !last.Duplicate
	})
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Errorf("the id was accepted again after %v, inside the 1s window", elapsed)
	}
	if last.Sequence != 2 {
		t.Errorf("new message after the window got seq %d, want 2", last.Sequence)
	}
}

// TestJSDedupSurvivesRestart: Nats-Msg-Id records and the last message's id
// outlive a clean shutdown and a crash.
func TestJSDedupSurvivesRestart(t *testing.T) {
	t.Parallel()
	o := nodeOpts{}
	n, c := jsNode(t, o)
	createStream(t, c.js, jetstream.StreamConfig{Name: "DD", Subjects: []string{"dd.*"}, Duplicates: time.Hour})
	for i := 1; i <= 3; i++ {
		jsPublish(t, c.js, "dd.x", "msg "+strconv.Itoa(i), jetstream.WithMsgID("id-"+strconv.Itoa(i)))
	}

	n = restartNode(t, n, o, syscall.SIGTERM)
	c = jsConnect(t, "contrail", n.URL)
	ack := jsPublish(t, c.js, "dd.x", "msg 2 again", jetstream.WithMsgID("id-2"))
	if !ack.Duplicate || ack.Sequence != 2 {
		t.Errorf("after a restart, a repeated id: %+v, want duplicate of seq 2", ack)
	}
	// The last message's id was recovered too.
	if ack := jsPublish(t, c.js, "dd.y", "4", jetstream.WithExpectLastMsgID("id-3"), jetstream.WithMsgID("id-4")); ack.Sequence != 4 {
		t.Errorf("expected last msg id after restart: %+v", ack)
	}

	n = restartNode(t, n, o, syscall.SIGKILL)
	c = jsConnect(t, "contrail", n.URL)
	for _, id := range []string{"id-1", "id-4"} {
		ack := jsPublish(t, c.js, "dd.z", "again", jetstream.WithMsgID(id))
		if !ack.Duplicate {
			t.Errorf("after kill -9, id %s was not recognised: %+v", id, ack)
		}
	}
	_, err := c.js.Publish(ctxT(t), "dd.z", nil, jetstream.WithExpectLastMsgID("id-3"))
	wantJSErr(t, "expected last msg id after kill -9", err, 10070)
	if st := streamInfo(t, c.js, "DD").State; st.Msgs != 4 {
		t.Errorf("state %+v, want 4 messages", st)
	}
}

// getRawByName fetches one message of a stream by name.
func getRawByName(t testing.TB, js jetstream.JetStream, stream string, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	return getRaw(t, s, seq)
}

// wantLegacyErr is wantJSErr for the legacy JetStreamContext's errors.
func wantLegacyErr(t testing.TB, what string, err error, code nats.ErrorCode) {
	t.Helper()
	var withAPI interface{ APIError() *nats.APIError }
	if !errors.As(err, &withAPI) || withAPI.APIError() == nil {
		t.Errorf("%s: got %v (%T), want an API error with err_code %d", what, err, err, code)
		return
	}
	if got := withAPI.APIError().ErrorCode; got != code {
		t.Errorf("%s: got err_code %d (%v), want %d", what, got, err, code)
	}
}
