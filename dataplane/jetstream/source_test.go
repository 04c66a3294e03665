package jetstream

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// applySourced runs one sourced message through the stream's apply path.
func applySourced(t *testing.T, s *stream, subj string, src sourcedMsg) result {
	t.Helper()
	return s.ap.apply(&proposal{s: s, kind: propMsg, acct: s.mu.owner, subject: subj, data: []byte("x"), src: &src})
}

func TestSourcedApplyProgress(t *testing.T) {
	fs := vfs.NewMem()
	e, acc, closeAll := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	s := e.account("A").lookup("S")
	key := (&api.StreamSource{Name: "O"}).IndexName()
	steps := []struct {
		oseq  uint64
		ident string
		dup   bool
	}{
		{1, "id1", false},
		{3, "id1", false},
		{3, "id1", true},  // delivered again after a new consumer
		{2, "id1", true},  // below the progress
		{1, "id2", false}, // the origin was made again
		{2, "id2", false},
	}
	for i, st := range steps {
		r := applySourced(t, s, "s", sourcedMsg{key: key, ident: st.ident, oseq: st.oseq})
		if r.err != nil || r.dup != st.dup {
			t.Fatalf("step %d: %+v", i, r)
		}
	}
	if st := s.snapshotState(); st.Msgs != 4 || st.LastSeq != 4 {
		t.Fatalf("state %+v", st)
	}
	closeAll()

	// The progress is the stream's applied state: it comes back with it.
	e, _, _ = openEngine(t, fs)
	s = e.account("A").lookup("S")
	s.mu.Lock()
	got := s.mu.progress[key]
	s.mu.Unlock()
	if got != (sourceProgress{seq: 2, ident: "id2"}) {
		t.Fatalf("recovered progress %+v", got)
	}
	if r := applySourced(t, s, "s", sourcedMsg{key: key, ident: "id2", oseq: 2}); !r.dup {
		t.Fatalf("taken again after restart: %+v", r)
	}
}

// TestSourcedRefusalSkips: a sourced message the stream refuses (a limit)
// is skipped: the progress moves past it, and the result says so, so the
// sourcer reads on instead of reading it again forever.
func TestSourcedRefusalSkips(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxMsgSize: 1})
	s := e.account("A").lookup("S")
	key := (&api.StreamSource{Name: "O"}).IndexName()
	r := s.ap.apply(&proposal{s: s, kind: propMsg, acct: s.mu.owner, subject: "s", data: []byte("too big"),
		src: &sourcedMsg{key: key, ident: "id1", oseq: 4}})
	if r.err == nil || !r.skipped {
		t.Fatalf("refused sourced message: %+v, want an error and skipped", r)
	}
	s.mu.Lock()
	got := s.mu.progress[key]
	s.mu.Unlock()
	if got != (sourceProgress{seq: 4, ident: "id1"}) {
		t.Fatalf("progress %+v after the refusal", got)
	}
	if r := applySourced(t, s, "s", sourcedMsg{key: key, ident: "id1", oseq: 3}); r.err != nil || !r.dup || r.skipped {
		t.Fatalf("below the progress: %+v", r)
	}
}

func TestMirrorApplyKeepsOriginSequences(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	// A stream made with a mirror starts its sourcer; this one's origin
	// does not exist, so only the messages applied here reach it.
	createStream(t, acc, api.StreamConfig{Name: "M", Mirror: &api.StreamSource{Name: "NONE"}})
	s := e.account("A").lookup("M")
	key := (&api.StreamSource{Name: "NONE"}).IndexName()
	for _, oseq := range []uint64{5, 6, 9} {
		if r := applySourced(t, s, "o", sourcedMsg{key: key, oseq: oseq, ts: int64(oseq) * 1e9, mirror: true}); r.err != nil || r.seq != oseq {
			t.Fatalf("oseq %d: %+v", oseq, r)
		}
	}
	if r := applySourced(t, s, "o", sourcedMsg{key: key, oseq: 7, mirror: true}); !r.dup {
		t.Fatalf("a sequence below the last: %+v", r)
	}
	st := s.snapshotState()
	if st.FirstSeq != 5 || st.LastSeq != 9 || st.Msgs != 3 || st.Deleted != 2 || st.FirstTime != 5e9 {
		t.Fatalf("state %+v", st)
	}
}

func TestParseAckReply(t *testing.T) {
	c, d, s, ts, p, ok := parseAckReply("$JS.ACK.O.cons.1.42.7.1700000000000000000.3")
	if !ok || c != "cons" || d != 7 || s != 42 || ts != 1700000000000000000 || p != 3 {
		t.Fatalf("v1: %q %d %d %d %d %v", c, d, s, ts, p, ok)
	}
	c, d, s, _, p, ok = parseAckReply("$JS.ACK.dom.acchash.O.cons.1.42.7.1700000000000000000.3.rnd")
	if !ok || c != "cons" || d != 7 || s != 42 || p != 3 {
		t.Fatalf("v2: %q %d %d %d %v", c, d, s, p, ok)
	}
	for _, bad := range []string{"", "$JS.ACK.O.c.1.x.7.1.3", "foo.bar", "$JS.ACK.O.c.1.2"} {
		if _, _, _, _, _, ok := parseAckReply(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSourceBackoff: failed consumer creates are retried every 2 s at
// first, then ever more slowly up to 2 minutes (with up to a tenth more,
// at random).
func TestSourceBackoff(t *testing.T) {
	for _, tc := range []struct {
		fails int
		base  time.Duration
	}{{0, 2 * time.Second}, {1, 2 * time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{4, 8 * time.Second}, {7, 64 * time.Second}, {8, 2 * time.Minute}, {1000, 2 * time.Minute}} {
		for range 20 {
			got := sourceBackoff(tc.fails)
			hi := tc.base
			if tc.fails > 2 {
				hi += tc.base / 10
			}
			if got < tc.base || got > hi {
				t.Fatalf("sourceBackoff(%d) = %v, want %v..%v", tc.fails, got, tc.base, hi)
			}
		}
	}
}

// TestSourcerRetakesUnappendedMessages: messages a source's stream could
// not append (its partition's leadership moved, here the applier's lost
// flag) are read again once it can, through the flow_control durable the
// source names; that consumer's ack floor never passes what the stream
// holds meanwhile. Before, such a refusal counted as taken: the sourcer
// read on, so the stream missed those messages for good (seen on a
// cluster whose partition was reloaded while its origin failed over).
func TestSourcerRetakesUnappendedMessages(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "ORIGIN", Subjects: []string{"o"}})
	var cr api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.CREATE.ORIGIN.SC", api.ConsumerCreateRequest{Stream: "ORIGIN", Config: api.ConsumerConfig{
		Durable: "SC", DeliverSubject: "dsrc.sc", AckPolicy: api.AckFlowControl, MaxAckPending: 3,
		FlowControl: true, Heartbeat: time.Second}}, &cr)
	if cr.Error != nil {
		t.Fatalf("consumer create: %v", cr.Error)
	}
	// S's applier (memory storage) is not ORIGIN's (file), so only S's
	// appends are refused below.
	createStream(t, acc, api.StreamConfig{Name: "S", Storage: api.MemoryStorage, Sources: []*api.StreamSource{{Name: "ORIGIN",
		Consumer: &api.StreamSourceDurable{Name: "SC", DeliverSubject: "dsrc.sc"}}}})
	s := e.account("A").lookup("S")
	held := func(n uint64) func() bool { return func() bool { return holdsDurably(s, n) } }
	for range 5 {
		publish(t, acc, "o", nil, []byte("x"))
	}
	waitForCond(t, "S to hold 5", held(5))

	s.ap.lost.Store(true)
	for range 5 {
		publish(t, acc, "o", nil, []byte("x"))
	}
	// Wait until the sourcer has had deliveries refused and decided
	// (nothing in flight). max_ack_pending 3 brings a flow control
	// request with 6..8 while they are in flight; answering it would
	// acknowledge them.
	s.mu.Lock()
	sr := s.mu.sourcers[0]
	s.mu.Unlock()
	waitForCond(t, "deliveries refused", func() bool {
		sr.mu.Lock()
		defer sr.mu.Unlock()
		return sr.mu.sseq > 5 && sr.mu.cname == "" && sr.mu.inflight == 0
	})
	var ci api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.ORIGIN.SC", nil, &ci)
	if ci.Error != nil || ci.AckFloor.Stream > 5 {
		t.Fatalf("ack floor %+v (error %v) passed what S holds (5)", ci.AckFloor, ci.Error)
	}
	s.ap.lost.Store(false)
	publish(t, acc, "o", nil, []byte("x"))
	waitForCond(t, "S to hold 1..11", held(11))
	checkSourcedInOrder(t, s, 11)
}

// holdsDurably reports whether s holds exactly messages 1..n, all of
// them committed: a read from the store (checkSourcedInOrder) finds a
// message only once its group has committed, while the stream's state
// counts it from its apply step.
func holdsDurably(s *stream, n uint64) bool {
	st := s.snapshotState()
	return st.Msgs == n && st.LastSeq == n && s.durable.Load() >= n
}

// checkSourcedInOrder fails unless s's messages 1..n are its origin's
// 1..n, in order (by their Nats-Stream-Source headers).
func checkSourcedInOrder(t *testing.T, s *stream, n uint64) {
	t.Helper()
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.get(&api.MsgGetRequest{Seq: seq})
		if err != nil {
			t.Fatalf("%s seq %d: %v", s.name(), seq, err)
		}
		if f := strings.Fields(string(headerValue(m.Header, api.HeaderStreamSource))); len(f) < 2 || f[1] != strconv.FormatUint(seq, 10) {
			t.Fatalf("%s seq %d holds origin message %v", s.name(), seq, f)
		}
	}
}

// TestSourcerAppliedOutcomes: which outcomes of a sourced message's
// proposal count as taken. Taken: stored, a duplicate, or refused by the
// apply step (skipped: the progress moved past it in the same batch);
// the flow control request waiting for it is answered. Anything else
// (never appended, fate unknown, a failed store, an I/O error) replaces
// the consumer with no answer, whatever the stream's progress says in
// memory: on a partition the leader's apply step moves it before the
// entry commits, and an entry lost then is not in the store.
func TestSourcerAppliedOutcomes(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	a := e.account("A")
	s := a.lookup("S")
	var answers atomic.Int64
	unsub, _ := acc.SubscribeInternal("fc.reply", func(_, _, _, _ []byte) { answers.Add(1) })
	defer unsub()
	for _, tc := range []struct {
		name  string
		r     result
		taken bool
	}{
		{"stored", result{seq: 1}, true},
		{"duplicate", result{dup: true}, true},
		{"refused by the apply step", result{err: api.NewMessageTooLargeError(), skipped: true}, true},
		{"never appended", result{err: errNotAppended}, false},
		{"fate unknown", result{err: errFateUnknown}, false},
		{"store failed", result{err: api.NewStreamStoreFailedError(errors.New("disk"))}, false},
		{"I/O error", result{err: errors.New("disk")}, false},
	} {
		sr := newSourcer(s, a, &api.StreamSource{Name: "O"}, false)
		sr.begin("C")
		sr.mu.dseq, sr.mu.sseq, sr.mu.inflight, sr.mu.fcReply = 1, 1, 1, "fc.reply"
		// As the apply step leaves it on a partition's leader before the
		// entry commits.
		s.mu.Lock()
		s.mu.progress[sr.key] = sourceProgress{seq: 1}
		s.mu.Unlock()
		before := answers.Load()
		sr.applied(nil, tc.r)
		answered := answers.Load() > before
		sr.mu.Lock()
		replaced := sr.mu.cname == ""
		sr.mu.Unlock()
		kicked := len(sr.kickCh) == 1
		if answered != tc.taken || replaced == tc.taken || kicked == tc.taken {
			t.Errorf("%s: flow control answered %v, consumer replaced %v (kicked %v); want taken %v",
				tc.name, answered, replaced, kicked, tc.taken)
		}
	}
}
