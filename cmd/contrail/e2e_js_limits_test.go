package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream limits and the config fields that change what a publish does.

// TestJSMaxAgeExpiresIdleStream: max_age empties a stream on a timer, with
// no further writes to trigger it.
func TestJSMaxAgeExpiresIdleStream(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		name := "AGE" + strings.ToUpper(st.String())
		createStream(t, c.js, jetstream.StreamConfig{Name: name, Subjects: []string{name}, MaxAge: time.Second, Storage: st})
		for i := range 5 {
			jsPublish(t, c.js, name, strconv.Itoa(i))
		}
	}
	start := time.Now()
	for _, name := range []string{"AGEFILE", "AGEMEMORY"} {
		st := waitState(t, c.js, name, 15*time.Second, "max_age expiry", func(s jetstream.StreamState) bool { return s.Msgs == 0 })
		if st.FirstSeq != 6 || st.LastSeq != 5 || st.Bytes != 0 {
			t.Errorf("%s after expiry: %+v, want empty at first_seq 6", name, st)
		}
	}
	if elapsed := time.Since(start); elapsed < 500*time.Millisecond {
		t.Errorf("messages expired after %v, before their max_age of 1s", elapsed)
	}
	// The stream still works after expiring everything.
	if ack := jsPublish(t, c.js, "AGEFILE", "later"); ack.Sequence != 6 {
		t.Errorf("publish after expiry got seq %d, want 6", ack.Sequence)
	}
}

// TestJSMessageTTL: Nats-TTL removes one message when it is due and leaves
// the others; streams without allow_msg_ttl refuse the header.
func TestJSMessageTTL(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	createStream(t, c.js, jetstream.StreamConfig{Name: "TTL", Subjects: []string{"ttl.*"}, AllowMsgTTL: true})
	createStream(t, c.js, jetstream.StreamConfig{Name: "NOTTL", Subjects: []string{"nottl"}})

	jsPublish(t, c.js, "ttl.keep", "stays")                                    // 1
	jsPublish(t, c.js, "ttl.short", "goes", jetstream.WithMsgTTL(time.Second)) // 2
	jsPublish(t, c.js, "ttl.long", "stays", jetstream.WithMsgTTL(time.Hour))   // 3
	m := nats.NewMsg("ttl.never")
	m.Header.Set("Nats-TTL", "never")
	if _, err := c.js.PublishMsg(ctx, m); err != nil { // 4
		t.Fatalf("Nats-TTL never: %v", err)
	}
	if got := getRawByName(t, c.js, "TTL", 2); got.Header.Get("Nats-TTL") != "1s" {
		t.Errorf("stored TTL header %q, want 1s", got.Header.Get("Nats-TTL"))
	}
	st := waitState(t, c.js, "TTL", 15*time.Second, "the 1s TTL", func(s jetstream.StreamState) bool { return s.Msgs == 3 })
	if st.FirstSeq != 1 || st.LastSeq != 4 || st.NumDeleted != 1 {
		t.Errorf("state after the TTL: %+v", st)
	}
	s, _ := c.js.Stream(ctx, "TTL")
	if _, err := s.GetMsg(ctx, 2); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("the expired message is still there: %v", err)
	}
	for _, seq := range []uint64{1, 3, 4} {
		getRaw(t, s, seq)
	}

	_, err := c.js.Publish(ctx, "nottl", nil, jetstream.WithMsgTTL(time.Minute))
	wantJSErr(t, "TTL on a stream without allow_msg_ttl", err, 10166)
	for _, bad := range []string{"500ms", "soon", "-1"} {
		m := nats.NewMsg("ttl.bad")
		m.Header.Set("Nats-TTL", bad)
		_, err := c.js.PublishMsg(ctx, m)
		wantJSErr(t, "Nats-TTL "+bad, err, 10165)
	}
}

func TestJSDiscardPolicies(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	storeFailed := func(what string, err error, desc string) {
		t.Helper()
		wantJSErr(t, what, err, 10077)
		if err == nil || !strings.Contains(err.Error(), desc) {
			t.Errorf("%s: %v, want %q", what, err, desc)
		}
	}

	// max_msgs: old messages go, or new ones are refused.
	createStream(t, c.js, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old"}, MaxMsgs: 3})
	createStream(t, c.js, jetstream.StreamConfig{Name: "NEW", Subjects: []string{"new"}, MaxMsgs: 3, Discard: jetstream.DiscardNew})
	for i := range 5 {
		jsPublish(t, c.js, "old", strconv.Itoa(i))
	}
	if st := streamInfo(t, c.js, "OLD").State; st.Msgs != 3 || st.FirstSeq != 3 || st.LastSeq != 5 {
		t.Errorf("discard old at max_msgs 3: %+v", st)
	}
	for i := range 3 {
		jsPublish(t, c.js, "new", strconv.Itoa(i))
	}
	_, err := c.js.Publish(ctx, "new", []byte("full"))
	storeFailed("discard new at max_msgs", err, "maximum messages exceeded")
	if st := streamInfo(t, c.js, "NEW").State; st.Msgs != 3 || st.LastSeq != 3 {
		t.Errorf("discard new kept %+v", st)
	}

	// max_bytes.
	createStream(t, c.js, jetstream.StreamConfig{Name: "BYTES", Subjects: []string{"bytes"}, MaxBytes: 300, Discard: jetstream.DiscardNew})
	jsPublish(t, c.js, "bytes", strings.Repeat("x", 200))
	_, err = c.js.Publish(ctx, "bytes", []byte(strings.Repeat("y", 200)))
	storeFailed("discard new at max_bytes", err, "maximum bytes exceeded")
	createStream(t, c.js, jetstream.StreamConfig{Name: "BYTESOLD", Subjects: []string{"bytesold"}, MaxBytes: 300})
	for range 4 {
		jsPublish(t, c.js, "bytesold", strings.Repeat("z", 100))
	}
	if st := streamInfo(t, c.js, "BYTESOLD").State; st.Bytes > 300 || st.Msgs == 0 || st.LastSeq != 4 {
		t.Errorf("discard old at max_bytes 300: %+v", st)
	}

	// max_msgs_per_subject, and discard new per subject.
	createStream(t, c.js, jetstream.StreamConfig{Name: "PER", Subjects: []string{"per.*"}, MaxMsgsPerSubject: 2})
	for i := range 5 {
		jsPublish(t, c.js, "per.a", strconv.Itoa(i))
	}
	jsPublish(t, c.js, "per.b", "b")
	info := streamInfo(t, c.js, "PER", jetstream.WithSubjectFilter(">"))
	if st := info.State; st.Msgs != 3 || st.Subjects["per.a"] != 2 || st.Subjects["per.b"] != 1 || st.FirstSeq != 4 {
		t.Errorf("max_msgs_per_subject 2: %+v", st)
	}
	createStream(t, c.js, jetstream.StreamConfig{Name: "PERNEW", Subjects: []string{"pernew.*"}, MaxMsgsPerSubject: 1,
		Discard: jetstream.DiscardNew, DiscardNewPerSubject: true})
	jsPublish(t, c.js, "pernew.a", "1")
	_, err = c.js.Publish(ctx, "pernew.a", []byte("2"))
	storeFailed("discard new per subject", err, "maximum messages per subject exceeded")
	jsPublish(t, c.js, "pernew.b", "other subjects still fit")

	// max_msg_size: headers count.
	createStream(t, c.js, jetstream.StreamConfig{Name: "SIZE", Subjects: []string{"size"}, MaxMsgSize: 16})
	jsPublish(t, c.js, "size", strings.Repeat("s", 16))
	_, err = c.js.Publish(ctx, "size", []byte(strings.Repeat("s", 17)))
	if !errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) {
		t.Errorf("over max_msg_size: %v, want ErrStreamMessageExceedsMaximum", err)
	}
	wantJSErr(t, "over max_msg_size", err, 10054)
	m := nats.NewMsg("size")
	m.Header.Set("K", "v")
	m.Data = []byte(strings.Repeat("s", 10))
	_, err = c.js.PublishMsg(ctx, m)
	wantJSErr(t, "over max_msg_size with headers", err, 10054)

	// Lowering a limit by update applies it at once.
	if _, err := c.js.UpdateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old"}, MaxMsgs: 1}); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, c.js, "OLD").State; st.Msgs != 1 || st.FirstSeq != 5 {
		t.Errorf("after lowering max_msgs to 1: %+v", st)
	}
	// Unless the stream discards new messages: then it keeps what it has
	// (as nats-server does) and refuses more.
	if _, err := c.js.UpdateStream(ctx, jetstream.StreamConfig{Name: "NEW", Subjects: []string{"new"}, MaxMsgs: 1, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, c.js, "NEW").State; st.Msgs != 3 {
		t.Errorf("discard new stream after lowering max_msgs to 1: %+v, want its 3 messages kept", st)
	}
	_, err = c.js.Publish(ctx, "new", []byte("still full"))
	storeFailed("discard new over its lowered max_msgs", err, "maximum messages exceeded")
}

func TestJSStreamGuards(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	cfg := jetstream.StreamConfig{Name: "GUARD", Subjects: []string{"guard.*"}, DenyDelete: true, DenyPurge: true}
	s := createStream(t, c.js, cfg)
	jsPublish(t, c.js, "guard.a", "1")
	jsPublish(t, c.js, "guard.b", "2")
	if err := s.DeleteMsg(ctx, 1); err == nil || !strings.Contains(err.Error(), "message delete not permitted") {
		t.Errorf("delete on deny_delete: %v", err)
	}
	err := s.Purge(ctx)
	wantJSErr(t, "purge on deny_purge", err, 10110)
	// deny_* cannot be lifted.
	lift := cfg
	lift.DenyDelete = false
	_, err = c.js.UpdateStream(ctx, lift)
	wantJSErr(t, "lifting deny_delete", err, 10052)

	// Sealing: by update only; then no writes, deletes or purges.
	seal := cfg
	seal.Sealed = true
	_, err = c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEALEDNEW", Sealed: true})
	wantJSErr(t, "create sealed", err, 10052)
	if _, err := c.js.UpdateStream(ctx, seal); err != nil {
		t.Fatalf("seal: %v", err)
	}
	_, err = c.js.Publish(ctx, "guard.a", []byte("x"))
	wantJSErr(t, "publish to a sealed stream", err, 10109)
	r := apiRequest(t, c.nc, "$JS.API.STREAM.MSG.DELETE.GUARD", `{"seq":1}`)
	wantAPIError(t, "delete on a sealed stream", r, 10109, "")
	r = apiRequest(t, c.nc, "$JS.API.STREAM.PURGE.GUARD", "")
	wantAPIError(t, "purge of a sealed stream", r, 10109, "")
	unseal := seal
	unseal.Sealed = false
	_, err = c.js.UpdateStream(ctx, unseal)
	wantJSErr(t, "unsealing", err, 10052)
	info := streamInfo(t, c.js, "GUARD")
	if !info.Config.Sealed || info.State.Msgs != 2 {
		t.Errorf("sealed stream: config sealed=%v, %d msgs", info.Config.Sealed, info.State.Msgs)
	}
	// A sealed stream can still be read and deleted as a whole.
	getRaw(t, s, 2)
	if err := c.js.DeleteStream(ctx, "GUARD"); err != nil {
		t.Errorf("deleting a sealed stream: %v", err)
	}
}

func TestJSRollup(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	createStream(t, c.js, jetstream.StreamConfig{Name: "ROLL", Subjects: []string{"roll.*"}, AllowRollup: true})
	createStream(t, c.js, jetstream.StreamConfig{Name: "NOROLL", Subjects: []string{"noroll"}})
	for i := range 3 {
		jsPublish(t, c.js, "roll.a", strconv.Itoa(i))
		jsPublish(t, c.js, "roll.b", strconv.Itoa(i))
	}
	rollup := func(subj, kind string) (*jetstream.PubAck, error) {
		m := nats.NewMsg(subj)
		m.Header.Set("Nats-Rollup", kind)
		m.Data = []byte("rollup " + kind)
		return c.js.PublishMsg(ctx, m)
	}
	if _, err := rollup("roll.a", "sub"); err != nil {
		t.Fatal(err)
	}
	info := streamInfo(t, c.js, "ROLL", jetstream.WithSubjectFilter(">"))
	if st := info.State; st.Msgs != 4 || st.Subjects["roll.a"] != 1 || st.Subjects["roll.b"] != 3 {
		t.Errorf("after a subject rollup: %+v", st)
	}
	if last := getRawByName(t, c.js, "ROLL", 7); string(last.Data) != "rollup sub" {
		t.Errorf("rollup message %q", last.Data)
	}
	if _, err := rollup("roll.b", "all"); err != nil {
		t.Fatal(err)
	}
	if st := streamInfo(t, c.js, "ROLL").State; st.Msgs != 1 || st.FirstSeq != 8 {
		t.Errorf("after an all rollup: %+v", st)
	}
	_, err := rollup("noroll", "sub")
	wantJSErr(t, "rollup not allowed", err, 10111)
	_, err = rollup("roll.a", "sideways")
	wantJSErr(t, "bad rollup value", err, 10111)
}

// TestJSNoAck: a no_ack stream stores what it captures but never answers.
func TestJSNoAck(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	createStream(t, c.js, jetstream.StreamConfig{Name: "QUIET", Subjects: []string{"quiet"}, NoAck: true})
	createStream(t, c.js, jetstream.StreamConfig{Name: "LOUD", Subjects: []string{"loud"}})
	inbox := nats.NewInbox()
	sub := subscribeSync(t, c.nc, inbox)
	if err := c.nc.PublishRequest("quiet", inbox, []byte("1")); err != nil {
		t.Fatal(err)
	}
	// Both streams use the file store's one apply path, in order: once the
	// later publish to LOUD is acknowledged, QUIET's would have been too.
	jsPublish(t, c.js, "loud", "barrier")
	flush(t, c.nc)
	if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Errorf("no_ack stream answered: %q", m.Data)
	}
	if st := streamInfo(t, c.js, "QUIET").State; st.Msgs != 1 {
		t.Errorf("no_ack stream holds %d messages, want 1", st.Msgs)
	}
}

func TestJSFirstSeqAndStorage(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	for _, st := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		name := "FS" + strings.ToUpper(st.String())
		createStream(t, c.js, jetstream.StreamConfig{Name: name, Subjects: []string{name}, FirstSeq: 1000, Storage: st})
		info := streamInfo(t, c.js, name)
		if info.Config.Storage != st || info.State.FirstSeq != 1000 || info.State.LastSeq != 999 {
			t.Errorf("%s before writes: storage %v state %+v", name, info.Config.Storage, info.State)
		}
		if ack := jsPublish(t, c.js, name, "x"); ack.Sequence != 1000 {
			t.Errorf("%s first message seq %d, want 1000", name, ack.Sequence)
		}
	}
}

// TestJSCapturedHeadersAndPayloads: what is stored is exactly what was
// published: any bytes, empty payloads, many headers, big messages.
func TestJSCapturedHeadersAndPayloads(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	s := createStream(t, c.js, jetstream.StreamConfig{Name: "BYTES", Subjects: []string{"b.>"}})
	payloads := [][]byte{nil, {0}, []byte("\r\n\r\nPUB x 1\r\n"), make([]byte, 512<<10)}
	for i := range payloads[3] {
		payloads[3][i] = byte(i * 7)
	}
	for i, p := range payloads {
		m := nats.NewMsg("b." + strconv.Itoa(i))
		m.Data = p
		m.Header.Set("Idx", strconv.Itoa(i))
		m.Header.Set("Nats-Msg-Id", "p"+strconv.Itoa(i))
		for j := range 20 {
			m.Header.Add("Many", strconv.Itoa(j))
		}
		if _, err := c.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	for i, p := range payloads {
		got := getRaw(t, s, uint64(i+1))
		if string(got.Data) != string(p) || got.Header.Get("Idx") != strconv.Itoa(i) || len(got.Header.Values("Many")) != 20 ||
			got.Header.Get("Nats-Msg-Id") != "p"+strconv.Itoa(i) {
			t.Errorf("message %d came back different (%d bytes, headers %d)", i, len(got.Data), len(got.Header))
		}
	}
}

// TestJSExpiryAfterRestart: max_age and Nats-TTL still expire messages
// stored before a crash; the timers come back with the streams.
func TestJSExpiryAfterRestart(t *testing.T) {
	t.Parallel()
	o := nodeOpts{}
	n, c := jsNode(t, o)
	createStream(t, c.js, jetstream.StreamConfig{Name: "AGE", Subjects: []string{"age"}, MaxAge: time.Second})
	createStream(t, c.js, jetstream.StreamConfig{Name: "TTL", Subjects: []string{"ttl.*"}, AllowMsgTTL: true})
	jsPublish(t, c.js, "age", "old")
	jsPublish(t, c.js, "ttl.a", "goes", jetstream.WithMsgTTL(time.Second))
	jsPublish(t, c.js, "ttl.b", "stays")

	n = restartNode(t, n, o, syscall.SIGKILL)
	c = jsConnect(t, "contrail", n.URL)
	waitState(t, c.js, "AGE", 15*time.Second, "max_age expiry after a restart", func(s jetstream.StreamState) bool { return s.Msgs == 0 })
	st := waitState(t, c.js, "TTL", 15*time.Second, "TTL expiry after a restart", func(s jetstream.StreamState) bool { return s.Msgs == 1 })
	if st.FirstSeq != 2 || st.LastSeq != 2 {
		t.Errorf("TTL stream after expiry: %+v, want only seq 2", st)
	}
}
