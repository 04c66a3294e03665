package jetstream

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestFlowGateRoutedOverdraw: a publish that crossed a route from a
// pausing peer may take the stream's bound once more (what the peer sent
// before its pause arrived), is asked to wait like any other past the
// stall threshold, and is still held to the node's bound.
func TestFlowGateRoutedOverdraw(t *testing.T) {
	g := newFlowGate(flowLimits{streamMsgs: 8, streamBytes: 1 << 20, nodeMsgs: 20, nodeBytes: 1 << 20})
	s, other := &stream{}, &stream{}
	for i := range 8 {
		wait, ok := g.admit(s, 10, false)
		if !ok || (wait != nil) != (i >= 6) {
			t.Fatalf("local publish %d: ok %v, asked to wait %v", i, ok, wait != nil)
		}
	}
	if _, ok := g.admit(s, 10, false); ok {
		t.Fatal("local publish past the stream's bound admitted")
	}
	for i := range 8 {
		if wait, ok := g.admit(s, 10, true); !ok || wait == nil {
			t.Fatalf("routed publish %d past the bound: ok %v, asked to wait %v", i, ok, wait != nil)
		}
	}
	if _, ok := g.admit(s, 10, true); ok {
		t.Fatal("routed publish past twice the stream's bound admitted")
	}
	for range 4 { // to the node's 20
		g.admit(other, 10, true)
	}
	if _, ok := g.admit(other, 10, true); ok {
		t.Fatal("routed publish past the node's bound admitted")
	}
}

func TestFlowGateBounds(t *testing.T) {
	g := newFlowGate(flowLimits{streamMsgs: 8, streamBytes: 1000, nodeMsgs: 12, nodeBytes: 1 << 20})
	a, b, c, d := &stream{}, &stream{}, &stream{}, &stream{}
	admit := func(s *stream, n int64, wantOK bool) <-chan struct{} {
		t.Helper()
		wait, ok := g.admit(s, n, false)
		if ok != wantOK {
			t.Fatalf("admit: ok = %v, want %v", ok, wantOK)
		}
		return wait
	}
	// Up to three quarters of the stream's bound, publishers go on.
	for range 6 {
		if w := admit(a, 10, true); w != nil {
			t.Fatal("publisher asked to wait under the stall threshold")
		}
	}
	// Past it they wait, on one channel, until the bound refuses.
	wa := admit(a, 10, true)
	if wa == nil || admit(a, 10, true) != wa {
		t.Fatal("publisher past the stall threshold not asked to wait on the stream's channel")
	}
	admit(a, 10, false)

	// Another stream fills what is left of the node: past three quarters
	// of the node's bound its publishers wait on the node.
	if w := admit(b, 10, true); w != nil {
		t.Fatal("a stream's first message asked to wait")
	}
	wn := admit(b, 10, true)
	if wn == nil || wn == wa {
		t.Fatal("publisher past the node's stall threshold not asked to wait on the node's channel")
	}
	admit(b, 10, true)
	admit(b, 10, true)
	admit(b, 10, false) // the node is full
	// A stream with nothing queued is let in even so.
	if w := admit(c, 10, true); w != nil {
		t.Fatal("a stream's first message asked to wait")
	}

	// Draining a under its threshold releases its publishers, not the
	// node's.
	g.release(a, 10)
	if isClosed(wa) {
		t.Fatal("stream released above its stall threshold")
	}
	g.release(a, 10)
	if !isClosed(wa) {
		t.Fatal("stream drained under its stall threshold, publishers still waiting")
	}
	if isClosed(wn) {
		t.Fatal("node released above its stall threshold")
	}
	for range 2 {
		g.release(b, 10)
	}
	if !isClosed(wn) {
		t.Fatal("node drained under its stall threshold, publishers still waiting")
	}

	// Bytes bound too; a message larger than the bound gets in alone.
	if w := admit(d, 2000, true); w == nil {
		t.Fatal("stream past its byte threshold not asked to wait")
	}
	admit(d, 1, false)
	g.release(d, 2000)
	if w := admit(d, 900, true); w == nil {
		t.Fatal("stream past its byte threshold not asked to wait")
	}
	admit(d, 101, false)
	if w := admit(d, 100, true); w == nil {
		t.Fatal("stream past its byte threshold not asked to wait")
	}
	g.release(d, 900)
	g.release(d, 100)

	for range 6 {
		g.release(a, 10)
	}
	g.release(b, 10)
	g.release(b, 10)
	g.release(c, 10)
	if len(g.mu.streams) != 0 || g.mu.node != (backlog{}) {
		t.Fatalf("after every release: %d streams, node %+v", len(g.mu.streams), g.mu.node)
	}
}

// TestCaptureBackPressure holds the apply path (a proposal whose
// completion blocks) and publishes into a stream whose backlog is bounded
// at 8 messages: past 6 the publisher is told to wait, past 8 it is
// refused with nats-server's 429; once the apply path moves, everything
// admitted is acknowledged and the waiting publisher released.
func TestCaptureBackPressure(t *testing.T) {
	mem := store.NewMem()
	e, err := New(Options{Store: store.NewMem(), Memory: mem, ServerVersion: "test", Log: quietLog(), MaxBufferedMsgs: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	acc := newFakeAccount("A")
	if err := e.EnableAccount(acc); err != nil {
		t.Fatal(err)
	}
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: api.MemoryStorage})
	e.mu.Lock()
	a := e.mu.accounts["A"]
	e.mu.Unlock()
	s := a.lookup("S")

	type reply struct {
		hdr string
		ack api.PubAckResponse
	}
	replies := make(chan reply, 16)
	acc.SubscribeInternal("r.>", func(_, _, hdr, msg []byte) {
		var r reply
		r.hdr = string(hdr)
		if err := json.Unmarshal(msg, &r.ack); err != nil {
			t.Errorf("reply %q: %v", msg, err)
		}
		replies <- r
	})

	unblock := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
	})
	s.ap.submit(&proposal{s: s, kind: propSync, done: func(*proposal, result) { <-unblock }})

	capture := s.capture(a)
	var wait <-chan struct{}
	for i := 1; i <= 8; i++ {
		w := capture([]byte("s.x"), []byte("r."+strconv.Itoa(i)), nil, []byte("m"), false)
		if (w != nil) != (i > 6) {
			t.Fatalf("publish %d: asked to wait = %v", i, w != nil)
		}
		if w != nil {
			wait = w
		}
	}
	if w := capture([]byte("s.x"), []byte("r.9"), nil, []byte("m"), false); w != nil {
		t.Fatal("a refused publish asked its publisher to wait")
	}
	r := recv(t, replies)
	if r.hdr != tooManyRequestsHdr || r.ack.Error == nil || r.ack.Error.ErrCode != 10167 || r.ack.PubAck == nil || r.ack.Stream != "S" {
		t.Fatalf("refusal: header %q, %+v", r.hdr, r.ack)
	}
	if isClosed(wait) {
		t.Fatal("publisher released while the backlog is full")
	}

	close(unblock)
	for i := 1; i <= 8; i++ {
		r := recv(t, replies)
		if r.ack.Error != nil || r.ack.Sequence != uint64(i) {
			t.Fatalf("ack %d: %+v", i, r.ack)
		}
	}
	if !isClosed(wait) {
		t.Fatal("backlog drained, publisher still waiting")
	}
	if sb, nb := e.flow.buffered(s); sb != (backlog{}) || nb != (backlog{}) {
		t.Fatalf("after every ack: stream backlog %+v, node %+v", sb, nb)
	}
}

// TestGroupsAreFair: a stream with a long queue contributes its share to
// each group, and another account's proposal submitted behind it is in
// the first group all the same.
func TestGroupsAreFair(t *testing.T) {
	ap := &applier{}
	busy, quiet := &stream{ledger: newUsageLedger()}, &stream{ledger: newUsageLedger()}
	for i := range 3*groupShareMsgs + 5 {
		ap.submit(&proposal{s: busy, kind: propMsg, seq: uint64(i)})
	}
	ap.submit(&proposal{s: quiet, kind: propMsg})
	count := func(group []*proposal, s *stream) (n int) {
		for _, p := range group {
			if p.s == s {
				n++
			}
		}
		return n
	}
	g := ap.takeLocked()
	if count(g, busy) != groupShareMsgs || count(g, quiet) != 1 {
		t.Fatalf("first group: %d of the busy stream, %d of the quiet one", count(g, busy), count(g, quiet))
	}
	// Order within a stream is kept across groups.
	var seqs []uint64
	for ; len(g) > 0; g = ap.takeLocked() {
		for _, p := range g {
			if p.s == busy {
				seqs = append(seqs, p.seq)
			}
		}
	}
	if len(seqs) != 3*groupShareMsgs+5 || len(ap.mu.queued) != 0 || len(ap.mu.ready) != 0 {
		t.Fatalf("took %d proposals of the busy stream, %d streams left queued", len(seqs), len(ap.mu.queued))
	}
	for i, seq := range seqs {
		if seq != uint64(i) {
			t.Fatalf("busy stream's proposal %d taken in place %d", seq, i)
		}
	}
	// Bytes bound a share too.
	big := make([]byte, groupShareBytes/4)
	for range 10 {
		ap.submit(&proposal{s: busy, kind: propMsg, data: big})
	}
	if g := ap.takeLocked(); len(g) != 4 {
		t.Fatalf("a group took %d quarter-share messages, want 4", len(g))
	}
}

// TestTakesAreFairPerAccount: an account gets one share per take however
// many streams it floods, taken from its streams in turn; a stream that
// got nothing goes first next time; another account's stream gets a
// share of its own in every take.
func TestTakesAreFairPerAccount(t *testing.T) {
	ap := &applier{}
	flooder, other := newUsageLedger(), newUsageLedger()
	var floods []*stream
	for i := range 4 {
		s := &stream{ledger: flooder, id: uint64(i)}
		floods = append(floods, s)
		for range groupShareMsgs / 2 {
			ap.submit(&proposal{s: s, kind: propMsg})
		}
	}
	quiet := &stream{ledger: other, id: 99}
	for range 10 {
		ap.submit(&proposal{s: quiet, kind: propMsg})
	}
	takes := map[*stream][]int{}
	for take := 0; ; take++ {
		g := ap.takeLocked()
		if len(g) == 0 {
			break
		}
		n := map[*stream]int{}
		for _, p := range g {
			n[p.s]++
		}
		flooded := 0
		for _, s := range floods {
			flooded += n[s]
			takes[s] = append(takes[s], n[s])
		}
		if flooded > groupShareMsgs {
			t.Fatalf("take %d: %d of the flooding account's proposals, its share is %d", take, flooded, groupShareMsgs)
		}
		if take == 0 && n[quiet] != 10 {
			t.Fatalf("first take: %d of the other account's 10 proposals", n[quiet])
		}
	}
	// Two streams fill a share: the first two in the first take, the
	// other two (which waited) in the second.
	want := map[int][]int{0: {128, 0}, 1: {128, 0}, 2: {0, 128}, 3: {0, 128}}
	for i, s := range floods {
		if !slices.Equal(takes[s], want[i]) {
			t.Errorf("stream %d took %v per take, want %v", i, takes[s], want[i])
		}
	}
	if len(ap.mu.ready) != 0 || len(ap.mu.queued) != 0 {
		t.Errorf("%d streams left ready, %d queued", len(ap.mu.ready), len(ap.mu.queued))
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received in 10s")
		panic("unreachable")
	}
}

// TestCaptureReleasesWhatItHeld: applying may rewrite a message (a
// subject transform here); what it gives back to the backlog is what it
// took at capture.
func TestCaptureReleasesWhatItHeld(t *testing.T) {
	e, acc, _ := engineOn(t, store.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: api.MemoryStorage,
		SubjectTransform: &api.SubjectTransform{Source: "t.>", Destination: "a.much.longer.prefix.>"}})
	for i := range 3 {
		if ack := publish(t, acc, "t."+strconv.Itoa(i), nil, []byte("m")); ack.Error != nil {
			t.Fatalf("publish %d: %v", i, ack.Error)
		}
	}
	e.mu.Lock()
	s := e.mu.accounts["A"].lookup("T")
	e.mu.Unlock()
	if sb, nb := e.flow.buffered(s); sb != (backlog{}) || nb != (backlog{}) {
		t.Fatalf("after every ack: stream backlog %+v, node %+v", sb, nb)
	}
}
