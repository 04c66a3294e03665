package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Restart recovery and crash safety with the real binary: what was
// acknowledged before a SIGTERM or a kill -9 is there afterwards, byte for
// byte.

// streamSnapshot is everything a client can see of a stream.
type streamSnapshot struct {
	info *jetstream.StreamInfo
	msgs map[uint64]*jetstream.RawStreamMsg // every sequence first..last that holds a message
}

// snapshotStreams reads every stream of the account: its info with details
// and each message in its range.
func snapshotStreams(t testing.TB, js jetstream.JetStream) map[string]streamSnapshot {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]streamSnapshot{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx, jetstream.WithDeletedDetails(true), jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatalf("stream %s info: %v", name, err)
		}
		snap := streamSnapshot{info: info, msgs: map[uint64]*jetstream.RawStreamMsg{}}
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
			case err != nil:
				t.Fatalf("stream %s seq %d: %v", name, seq, err)
			default:
				snap.msgs[seq] = m
			}
		}
		out[name] = snap
	}
	if err := names.Err(); err != nil {
		t.Fatalf("stream names: %v", err)
	}
	return out
}

// sameSnapshot reports every difference between two snapshots of one stream.
func sameSnapshot(t testing.TB, what string, got, want streamSnapshot) {
	t.Helper()
	if !reflect.DeepEqual(got.info.Config, want.info.Config) {
		t.Errorf("%s: config changed:\n got %+v\nwant %+v", what, got.info.Config, want.info.Config)
	}
	if !got.info.Created.Equal(want.info.Created) {
		t.Errorf("%s: created %v, was %v", what, got.info.Created, want.info.Created)
	}
	gs, ws := got.info.State, want.info.State
	if gs.Msgs != ws.Msgs || gs.Bytes != ws.Bytes || gs.FirstSeq != ws.FirstSeq || gs.LastSeq != ws.LastSeq ||
		!gs.FirstTime.Equal(ws.FirstTime) || !gs.LastTime.Equal(ws.LastTime) || gs.NumDeleted != ws.NumDeleted ||
		gs.NumSubjects != ws.NumSubjects || !reflect.DeepEqual(gs.Deleted, ws.Deleted) || !reflect.DeepEqual(gs.Subjects, ws.Subjects) {
		t.Errorf("%s: state changed:\n got %+v\nwant %+v", what, gs, ws)
	}
	if len(got.msgs) != len(want.msgs) {
		t.Errorf("%s: %d messages, was %d", what, len(got.msgs), len(want.msgs))
	}
	for seq, w := range want.msgs {
		g := got.msgs[seq]
		switch {
		case g == nil:
			t.Errorf("%s: seq %d lost", what, seq)
		case g.Subject != w.Subject || !bytes.Equal(g.Data, w.Data) || !reflect.DeepEqual(g.Header, w.Header) || !g.Time.Equal(w.Time):
			t.Errorf("%s: seq %d changed:\n got %s %q %v %v\nwant %s %q %v %v", what, seq,
				g.Subject, g.Data, g.Header, g.Time, w.Subject, w.Data, w.Header, w.Time)
		}
	}
}

// recoveryWorkload builds streams that exercise what state recovery must
// restore: deletes, purges, limits, sealing, moved sequences, headers.
func recoveryWorkload(t testing.TB, c *jsTarget) {
	t.Helper()
	ctx := ctxT(t)
	a := createStream(t, c.js, jetstream.StreamConfig{Name: "A", Subjects: []string{"a.>"}, Description: "all sorts",
		Metadata: map[string]string{"k": "v"}, Duplicates: time.Hour})
	for i := range 50 {
		m := nats.NewMsg("a." + strconv.Itoa(i%5))
		m.Header.Set("Nats-Msg-Id", "a-"+strconv.Itoa(i))
		m.Header.Set("X-I", strconv.Itoa(i))
		m.Data = []byte(strings.Repeat(strconv.Itoa(i), i))
		if _, err := c.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{1, 10, 20, 50} {
		if err := a.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Purge(ctx, jetstream.WithPurgeSubject("a.3")); err != nil {
		t.Fatal(err)
	}

	createStream(t, c.js, jetstream.StreamConfig{Name: "B", Subjects: []string{"b.*"}, AllowDirect: true,
		MaxMsgsPerSubject: 2, DenyDelete: true, MaxBytes: 1 << 20, Discard: jetstream.DiscardNew})
	for i := range 9 {
		jsPublish(t, c.js, "b."+strconv.Itoa(i%3), "b"+strconv.Itoa(i))
	}

	createStream(t, c.js, jetstream.StreamConfig{Name: "D", Subjects: []string{"d"}, FirstSeq: 50})
	for i := range 3 {
		jsPublish(t, c.js, "d", "d"+strconv.Itoa(i))
	}
	if _, err := c.js.UpdateStream(ctx, jetstream.StreamConfig{Name: "D", Subjects: []string{"d"}, FirstSeq: 50, Sealed: true}); err != nil {
		t.Fatal(err)
	}

	e := createStream(t, c.js, jetstream.StreamConfig{Name: "E", Subjects: []string{"e.*"}, AllowMsgTTL: true, MaxAge: time.Hour,
		AllowRollup: true})
	jsPublish(t, c.js, "e.a", "old")
	if err := e.Purge(ctx, jetstream.WithPurgeSequence(1000)); err != nil {
		t.Fatal(err)
	}
	jsPublish(t, c.js, "e.a", "ttl", jetstream.WithMsgTTL(time.Hour))
	jsPublish(t, c.js, "e.b", "plain")
	m := nats.NewMsg("e.c")
	m.Header.Set("Nats-Rollup", "sub")
	if _, err := c.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}

	createStream(t, c.js, jetstream.StreamConfig{Name: "EMPTY", Subjects: []string{"empty"}})
	createStream(t, c.js, jetstream.StreamConfig{Name: "MEM", Subjects: []string{"mem"}, Storage: jetstream.MemoryStorage})
	jsPublish(t, c.js, "mem", "volatile")
}

func TestJSRestartRecovery(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			o := nodeOpts{}
			n, c := jsNode(t, o)
			recoveryWorkload(t, c)
			before := snapshotStreams(t, c.js)
			if len(before) != 6 {
				t.Fatalf("workload made %d streams, want 6", len(before))
			}

			n = restartNode(t, n, o, sig)
			c = jsConnect(t, "contrail", n.URL)
			after := snapshotStreams(t, c.js)
			// A memory stream does not outlive its node, as on a single
			// nats-server.
			if _, ok := after["MEM"]; ok {
				t.Errorf("memory stream MEM survived a restart")
			}
			delete(before, "MEM")
			for name, want := range before {
				got, ok := after[name]
				if !ok {
					t.Errorf("stream %s lost", name)
					continue
				}
				sameSnapshot(t, name, got, want)
			}

			// Creating a recovered stream again with its config is a no-op.
			for _, name := range []string{"A", "B", "E"} {
				if _, err := c.js.CreateStream(ctxT(t), before[name].info.Config); err != nil {
					t.Errorf("re-creating %s with its own config after the restart: %v", name, err)
				}
			}
			// The streams carry on where they were.
			if ack := jsPublish(t, c.js, "a.9", "next"); ack.Sequence != 51 {
				t.Errorf("A's next seq %d, want 51", ack.Sequence)
			}
			if ack := jsPublish(t, c.js, "a.x", "dup", jetstream.WithMsgID("a-7")); !ack.Duplicate || ack.Sequence != 8 {
				t.Errorf("A's dedup after restart: %+v", ack)
			}
			if ack := jsPublish(t, c.js, "e.d", "next"); ack.Sequence != 1003 {
				t.Errorf("E's next seq %d, want 1003", ack.Sequence)
			}
			_, err := c.js.Publish(ctxT(t), "d", nil)
			wantJSErr(t, "D is still sealed", err, 10109)
			_, err = c.js.Publish(ctxT(t), "b.0", []byte("b9"))
			if err != nil {
				t.Errorf("B after restart: %v", err)
			}
			if st := streamInfo(t, c.js, "B", jetstream.WithSubjectFilter("b.0")).State; st.Subjects["b.0"] != 2 {
				t.Errorf("B's per-subject limit after restart: %v", st.Subjects)
			}
			// A's TTL-less, max_age-less messages and E's hour-long TTL are
			// still there; the expiry timers were re-armed, not fired.
			if st := streamInfo(t, c.js, "E").State; st.Msgs != 4 {
				t.Errorf("E after restart and a publish: %+v", st)
			}
		})
	}
}

// crashBlock is the random material crash-test payloads are cut from.
var crashBlock = func() []byte {
	r := rand.New(rand.NewPCG(7, 42))
	b := make([]byte, 16<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// crashPayload is the message a crash-test publisher sends as its i-th:
// recognisable, of varying size (1-8 KiB), derived from i alone, and cheap
// to make, so the publisher outruns the node.
func crashPayload(i int) []byte {
	off, size := (i*7919)%(8<<10), 1<<10+(i*104729)%(7<<10)
	return append(fmt.Appendf(nil, "crash-%d-", i), crashBlock[off:off+size]...)
}

func crashIndex(data []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(data, []byte("crash-"))
	if !ok {
		return 0, false
	}
	num, _, ok := bytes.Cut(rest, []byte("-"))
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(string(num))
	return i, err == nil
}

// TestJSCrashDuringAsyncPublish kills -9 the node while thousands of async
// publishes are in flight. Every acknowledged message must be there after
// the restart with identical bytes; the stream holds an unbroken run of
// sequences, each holding the publish with that position.
func TestJSCrashDuringAsyncPublish(t *testing.T) {
	t.Parallel()
	o := nodeOpts{}
	n, setup := jsNode(t, o)
	createStream(t, setup.js, jetstream.StreamConfig{Name: "CRASH", Subjects: []string{"crash.>"}})

	var mu sync.Mutex
	acked := map[uint64]int{} // seq → publish index
	var nacked atomic.Int64
	nc := connect(t, n.URL)
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) {
			i, ok := crashIndex(m.Data)
			if !ok {
				return
			}
			mu.Lock()
			acked[ack.Sequence] = i
			mu.Unlock()
			nacked.Add(1)
		}))
	if err != nil {
		t.Fatal(err)
	}

	published := make(chan int, 1)
	go func() {
		i := 0
		defer func() { published <- i }()
		for ; ; i++ {
			if _, err := js.PublishAsync("crash."+strconv.Itoa(i%16), crashPayload(i)); err != nil {
				return // the node is gone
			}
		}
	}()
	// Kill once plenty is acknowledged and thousands are in flight.
	var pending int
	waitFor(t, 30*time.Second, "2000 acknowledged and 1000 in-flight async publishes", func() bool {
		pending = js.PublishAsyncPending()
		return nacked.Load() >= 2000 && pending >= 1000
	})
	n.signal(syscall.SIGKILL)
	if _, ok := n.wait(stopTimeout); !ok {
		t.Fatal("node did not die")
	}
	sent := recvChan(t, published, "the publisher to notice the dead node")
	// No acknowledgement can arrive any more; take the final set.
	waitFor(t, ioTimeout, "the connection to close", nc.IsClosed)
	mu.Lock()
	final := make(map[uint64]int, len(acked))
	for seq, i := range acked {
		final[seq] = i
	}
	mu.Unlock()
	t.Logf("killed with %d publishes in flight: %d sent, %d acknowledged", pending, sent, len(final))

	n = startNode(t, nodeOpts{dir: n.Dir})
	c := jsConnect(t, "contrail", n.URL)
	st := streamInfo(t, c.js, "CRASH").State
	var maxAcked uint64
	for seq, i := range final {
		maxAcked = max(maxAcked, seq)
		if seq != uint64(i)+1 {
			t.Fatalf("publish %d was acknowledged with seq %d; one connection's publishes are stored in order", i, seq)
		}
	}
	if st.FirstSeq != 1 || st.LastSeq < maxAcked || st.Msgs != st.LastSeq || st.NumDeleted != 0 {
		t.Fatalf("after the crash: %+v; want an unbroken run 1..>=%d", st, maxAcked)
	}
	if st.LastSeq > uint64(sent) {
		t.Fatalf("stream holds %d messages, more than the %d sent", st.LastSeq, sent)
	}
	t.Logf("recovered %d messages (%d acknowledged, %d stored without an acknowledgement)", st.LastSeq, len(final), st.LastSeq-uint64(len(final)))

	// Read every message back, several requests at a time.
	s, err := c.js.Stream(ctxT(t), "CRASH")
	if err != nil {
		t.Fatal(err)
	}
	seqs := make(chan uint64)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range seqs {
				i := int(seq - 1)
				m, err := s.GetMsg(ctxT(t), seq)
				switch {
				case err != nil:
					t.Errorf("seq %d (publish %d, acknowledged %v): %v", seq, i, final[seq] == i, err)
				case m.Subject != "crash."+strconv.Itoa(i%16) || !bytes.Equal(m.Data, crashPayload(i)):
					t.Errorf("seq %d holds %s %d bytes, want publish %d", seq, m.Subject, len(m.Data), i)
				default:
					continue
				}
				if bad.Add(1) > 10 {
					return
				}
			}
		}()
	}
	for seq := uint64(1); seq <= st.LastSeq && bad.Load() <= 10; seq++ {
		seqs <- seq
	}
	close(seqs)
	wg.Wait()

	// And it takes new writes after the last recovered one.
	if ack := jsPublish(t, c.js, "crash.after", "after"); ack.Sequence != st.LastSeq+1 {
		t.Errorf("first publish after recovery got seq %d, want %d", ack.Sequence, st.LastSeq+1)
	}
}

// kvAck is the newest acknowledged value of one key.
type kvAck struct {
	seq  uint64
	data string
}

// TestJSCrashKVLastBySubject is the user's reproduction of a crash that
// reused sequences: four nats.go clients publish asynchronously to a
// stream with max_msgs_per_subject 1 over 100 keys, the node is killed -9
// at a random moment and restarted, a few times over. After every restart
// each key's last-by-subject message (by DIRECT.GET, as a KV get, and by
// MSG.GET) is on that key, at or after its newest acknowledged sequence,
// holding that value or one published later to the same key; the next
// publish takes a fresh sequence. CONTRAIL_SOAK=1 runs more cycles.
func TestJSCrashKVLastBySubject(t *testing.T) {
	t.Parallel()
	cycles := 3
	if os.Getenv("CONTRAIL_SOAK") != "" {
		cycles = 15
	}
	const keys, clients = 100, 4
	n, setup := jsNode(t, nodeOpts{})
	createStream(t, setup.js, jetstream.StreamConfig{Name: "KV", Subjects: []string{"kv.>"},
		MaxMsgsPerSubject: 1, AllowDirect: true})
	acked := map[string]kvAck{} // key → newest acknowledged value, over every cycle
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(10, 2))
	for cycle := range cycles {
		var nacked atomic.Int64
		conns := make([]*nats.Conn, clients)
		var wg sync.WaitGroup
		for w := range clients {
			conns[w] = connect(t, n.URL)
			js, err := jetstream.New(conns[w],
				jetstream.WithPublishAsyncMaxPending(256),
				jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) {
					mu.Lock()
					if cur := acked[m.Subject]; ack.Sequence > cur.seq {
						acked[m.Subject] = kvAck{ack.Sequence, string(m.Data)}
					}
					mu.Unlock()
					nacked.Add(1)
				}))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for i := 0; !conns[w].IsClosed(); i++ {
					key := fmt.Sprintf("kv.%d", (i*7+w*31)%keys)
					// A stalled window or the dying node: try again until
					// the connection is gone.
					_, _ = js.PublishAsync(key, fmt.Appendf(nil, "%s|c%d|w%d|%d", key, cycle, w, i))
				}
			})
		}
		killAt := int64(200 + rng.IntN(3000))
		waitFor(t, 60*time.Second, fmt.Sprintf("%d acknowledged publishes", killAt), func() bool { return nacked.Load() >= killAt })
		n.signal(syscall.SIGKILL)
		if _, ok := n.wait(stopTimeout); !ok {
			t.Fatal("node did not die")
		}
		for _, nc := range conns {
			waitFor(t, ioTimeout, "the connection to close", nc.IsClosed)
		}
		wg.Wait()
		t.Logf("cycle %d: killed after %d acknowledgements", cycle, nacked.Load())

		n = startNode(t, nodeOpts{dir: n.Dir})
		c := jsConnect(t, "contrail", n.URL)
		s, err := c.js.Stream(ctxT(t), "KV")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		want := maps.Clone(acked)
		mu.Unlock()
		bad := 0
		var maxAcked uint64
		for key, a := range want {
			maxAcked = max(maxAcked, a.seq)
			direct, err := s.GetLastMsgForSubject(ctxT(t), key)
			if err != nil {
				t.Errorf("cycle %d: %s (acknowledged %d %q): direct get: %v", cycle, key, a.seq, a.data, err)
				bad++
				continue
			}
			r := mustAPI(t, c.nc, "$JS.API.STREAM.MSG.GET.KV", fmt.Sprintf(`{"last_by_subj":%q}`, key))
			var got struct {
				Message struct {
					Subject string `json:"subject"`
					Seq     uint64 `json:"seq"`
					Data    []byte `json:"data"`
				} `json:"message"`
			}
			if err := json.Unmarshal(r.raw, &got); err != nil {
				t.Fatal(err)
			}
			for _, m := range []struct {
				how, subj string
				seq       uint64
				data      []byte
			}{{"direct get", direct.Subject, direct.Sequence, direct.Data}, {"msg get", got.Message.Subject, got.Message.Seq, got.Message.Data}} {
				onKey := m.subj == key && strings.HasPrefix(string(m.data), key+"|")
				if !onKey || m.seq < a.seq || m.seq == a.seq && string(m.data) != a.data {
					t.Errorf("cycle %d: %s by %s is seq %d on %s %q; acknowledged seq %d %q", cycle, key, m.how, m.seq, m.subj, m.data, a.seq, a.data)
					bad++
				}
			}
		}
		if bad > 0 {
			t.Fatalf("cycle %d: %d of %d key checks wrong", cycle, bad, len(want))
		}
		info := streamInfo(t, c.js, "KV").State
		if info.LastSeq < maxAcked || info.Msgs > keys+1 { // the keys and kv.fresh
			t.Fatalf("cycle %d: after the crash %+v, newest acknowledged seq %d", cycle, info, maxAcked)
		}
		ack := jsPublish(t, c.js, "kv.fresh", "kv.fresh|after")
		if ack.Sequence != info.LastSeq+1 {
			t.Fatalf("cycle %d: the publish after the crash took seq %d, want %d", cycle, ack.Sequence, info.LastSeq+1)
		}
		mu.Lock()
		acked["kv.fresh"] = kvAck{ack.Sequence, "kv.fresh|after"}
		mu.Unlock()
	}
}
