package jetstream

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// commitGate holds groups before their commit while shut, so a group
// stays in flight with none of its writes in the store for as long as a
// test needs. (Pebble makes a batch readable once it is in the memtable,
// before its WAL sync, so holding the sync would not do.)
type commitGate struct {
	shut    atomic.Bool
	mu      sync.Mutex
	opened  chan struct{} // closed when the gate opens
	blocked chan struct{} // a group reached the shut gate
}

func newCommitGate(ap *applier) *commitGate {
	g := &commitGate{opened: make(chan struct{}), blocked: make(chan struct{}, 16)}
	ap.beforeCommit = func() {
		if !g.shut.Load() {
			return
		}
		g.mu.Lock()
		opened := g.opened
		g.mu.Unlock()
		g.blocked <- struct{}{}
		<-opened
	}
	return g
}

func (g *commitGate) close() {
	g.mu.Lock()
	g.opened = make(chan struct{})
	g.mu.Unlock()
	g.shut.Store(true)
}

// open lets the held group commit; opening an open gate does nothing.
func (g *commitGate) open() {
	g.shut.Store(false)
	g.mu.Lock()
	select {
	case <-g.opened:
	default:
		close(g.opened)
	}
	g.mu.Unlock()
}

// An eviction reads the stream's next-oldest message from the store
// without waiting for the group in flight when the store holds it as it
// stands, and waits when a group still in flight removed a message in
// the middle of the stream: reading the store then would make a deleted
// message the stream's first.
func TestEvictionReadsAroundGroupsInFlight(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxMsgs: 3})
	s := attachedStream(e, acc.Name(), "S")
	a := e.account(acc.Name())
	gate := newCommitGate(s.ap)
	t.Cleanup(gate.open) // before the engine closes: a failure may leave it shut

	var wg sync.WaitGroup
	submit := func(p *proposal) {
		wg.Add(1)
		p.s, p.acct = s, a
		p.done = func(_ *proposal, r result) {
			defer wg.Done()
			if r.err != nil {
				t.Errorf("proposal %v: %v", p.kind, r.err)
			}
		}
		s.ap.submit(p)
	}
	publish := func() { submit(&proposal{kind: propMsg, subject: "s", data: []byte("x")}) }
	state := func() (first, last, msgs uint64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.mu.state.FirstSeq, s.mu.state.LastSeq, s.mu.state.Msgs
	}
	// lastIs reports whether seq is the stream's last applied sequence.
	// It never waits for the stream's lock, which an apply step waiting
	// for a group in flight holds.
	lastIs := func(seq uint64) bool {
		if !s.mu.TryLock() {
			return false
		}
		defer s.mu.Unlock()
		return s.mu.state.LastSeq == seq
	}

	// The per-subject summaries are built first (that build reads the
	// whole stream, waiting for every group in flight).
	if r := s.ap.apply(&proposal{s: s, kind: propSubjects}); r.err != nil {
		t.Fatal(r.err)
	}
	for range 3 {
		publish()
	}
	wg.Wait() // 1, 2, 3 committed

	// A group in flight deletes 2, from the middle of the stream. The
	// next group's eviction of 1 must not take 2, which the store still
	// holds, for the new first message.
	waiting := make(chan struct{}, 1)
	s.ap.onWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	gate.close()
	submit(&proposal{kind: propDelete, seq: 2})
	<-gate.blocked
	publish() // 4: three messages, no eviction
	publish() // 5: evicts 1; the next message is 3
	// 5's eviction waits for the delete's commit; applied without
	// waiting, it read 2 from the store.
	waitForCond(t, "5's eviction to wait for the delete in flight", func() bool {
		select {
		case <-waiting:
			return true
		default:
		}
		if lastIs(5) {
			t.Fatal("5's eviction ran with a delete in the middle of the stream still in flight")
		}
		return false
	})
	gate.open()
	wg.Wait()
	if first, last, msgs := state(); first != 3 || last != 5 || msgs != 3 {
		t.Fatalf("after the delete in flight: first %d, last %d, msgs %d; want 3, 5, 3", first, last, msgs)
	}
	if _, ok := apiMsgGet(t, acc, "S", api.MsgGetRequest{Seq: 2}); ok {
		t.Fatal("the deleted message 2 is back")
	}

	// With no removal in the middle in flight, an eviction does not
	// wait: 7 is applied while 6's group is still held.
	gate.close()
	publish() // 6, its group held before its commit
	<-gate.blocked
	publish() // 7: evicts 4 (the next, 5, is committed)
	waitForCond(t, "7 applied with the group before it in flight", func() bool { return lastIs(7) })
	gate.open()
	wg.Wait()
	if first, last, msgs := state(); first != 5 || last != 7 || msgs != 3 {
		t.Fatalf("after the evictions: first %d, last %d, msgs %d; want 5, 7, 3", first, last, msgs)
	}
	for seq := uint64(5); seq <= 7; seq++ {
		if m, ok := apiMsgGet(t, acc, "S", api.MsgGetRequest{Seq: seq}); !ok || m.Sequence != seq {
			t.Fatalf("message %d: %+v, %v", seq, m, ok)
		}
	}
}

// The oldest message remembered from the last eviction is used only
// while it is still the stream's first: after a purge empties the stream
// and new messages fill it past its cap, eviction removes the new oldest,
// not the remembered one.
func TestEvictionAfterPurgeForgetsOldest(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxMsgs: 3})
	pub := func() {
		t.Helper()
		if ack := publish(t, acc, "s", nil, []byte("x")); ack.Error != nil || ack.PubAck == nil || ack.Stream != "S" {
			t.Fatalf("publish: %+v", ack)
		}
	}
	for range 4 {
		pub() // 1-4; 4 evicts 1 and remembers 2 as the oldest
	}
	var pr api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{}, &pr)
	if !pr.Success || pr.Purged != 3 {
		t.Fatalf("purge: %+v", pr)
	}
	for range 4 {
		pub() // 5-8; 8 evicts 5
	}
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if st := info.State; st.FirstSeq != 6 || st.LastSeq != 8 || st.Msgs != 3 {
		t.Fatalf("state %+v, want first 6, last 8, 3 messages", st)
	}
	if _, ok := apiMsgGet(t, acc, "S", api.MsgGetRequest{Seq: 5}); ok {
		t.Fatal("message 5 was not evicted")
	}
	for seq := uint64(6); seq <= 8; seq++ {
		if m, ok := apiMsgGet(t, acc, "S", api.MsgGetRequest{Seq: seq}); !ok || m.Sequence != seq {
			t.Fatalf("message %d: %+v, %v", seq, m, ok)
		}
	}
}
