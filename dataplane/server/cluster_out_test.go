package server

import (
	"bytes"
	"testing"
)

// queueMsg appends one message of n bytes for account to o, as sendMsg
// does, and returns its stall channel.
func queueMsg(o *routeOut, account string, n int, max int64) chan struct{} {
	q := o.acctLocked(account, n)
	q.chunks.cur = append(q.chunks.cur, bytes.Repeat([]byte(account[:1]), n)...)
	return o.addedLocked(q, n, max)
}

// TestRouteOutTakesTurns: one account's backlog delays another
// account's message by at most one turn (protocol operations first, then
// up to routeQuantum of each account), and each account's bytes stay in
// order.
func TestRouteOutTakesTurns(t *testing.T) {
	o := newRouteOut()
	const max = 64 << 20
	for range 64 {
		queueMsg(o, "A", 32<<10, max) // 2 MiB of A
	}
	queueMsg(o, "B", 100, max)
	o.appendCtlLocked([]byte("PING\r\n"))
	turn := o.takeTurnLocked(nil)
	var got []byte
	for _, b := range turn {
		got = append(got, b...)
	}
	if !bytes.HasPrefix(got, []byte("PING\r\n")) {
		t.Fatalf("the turn does not start with the protocol operation")
	}
	if n := bytes.Count(got, []byte("A")); n > routeQuantum+chunkSize {
		t.Fatalf("one turn took %d bytes of A", n)
	}
	if bytes.Count(got, []byte("B")) != 100 {
		t.Fatalf("B's message is not in the first turn")
	}
	var sent int
	for len(turn) > 0 {
		for _, b := range turn {
			sent += len(b)
		}
		turn = o.takeTurnLocked(nil)
	}
	if want := 6 + 64*32<<10 + 100; sent != want || o.mu.pending != 0 {
		t.Fatalf("sent %d of %d bytes, %d left pending", sent, want, o.mu.pending)
	}
	o.unstallLocked(max)
	if len(o.mu.accts) != 0 {
		t.Fatalf("%d idle account queues kept", len(o.mu.accts))
	}
}

// TestRouteOutStallsOnlyTheBackloggedAccount: past its stall threshold
// an account's publishers get a channel to wait on, which closes once its
// backlog drains; another account's publishers never wait.
func TestRouteOutStallsOnlyTheBackloggedAccount(t *testing.T) {
	o := newRouteOut()
	const max = 1 << 20 // stall past 128 KiB
	var stall chan struct{}
	for range 8 {
		if st := queueMsg(o, "A", 32<<10, max); st != nil {
			stall = st
		}
	}
	if stall == nil {
		t.Fatal("256 KiB of A queued and its publisher never told to wait")
	}
	if st := queueMsg(o, "B", 100, max); st != nil {
		t.Fatal("B's publisher told to wait for A's backlog")
	}
	for len(o.takeTurnLocked(nil)) > 0 {
	}
	o.unstallLocked(max)
	select {
	case <-stall:
	default:
		t.Fatal("A's stall not released once its backlog drained")
	}
}

// TestRouteOutPause: while the peer has paused an account, its queued
// messages stay here (the writer skips it), its publishers get the stall
// channel whatever its backlog, and other accounts flow; RESUME releases
// the publishers and the writer sends what was held, in order.
func TestRouteOutPause(t *testing.T) {
	o := newRouteOut()
	const max = 64 << 20
	o.pauseLocked("A", true, max)
	stall := queueMsg(o, "A", 100, max)
	if stall == nil {
		t.Fatal("a paused account's publisher not told to wait")
	}
	if queueMsg(o, "B", 100, max) != nil {
		t.Fatal("B's publisher told to wait for A's pause")
	}
	var got []byte
	for turn := o.takeTurnLocked(nil); len(turn) > 0; turn = o.takeTurnLocked(nil) {
		for _, b := range turn {
			got = append(got, b...)
		}
	}
	if bytes.Count(got, []byte("A")) != 0 || bytes.Count(got, []byte("B")) != 100 {
		t.Fatalf("while A is paused the writer sent %d bytes of A and %d of B", bytes.Count(got, []byte("A")), bytes.Count(got, []byte("B")))
	}
	o.unstallLocked(max)
	select {
	case <-stall:
		t.Fatal("A's publisher released while A is paused")
	default:
	}
	if queueMsg(o, "A", 50, max) != stall {
		t.Fatal("A's next publisher not told to wait on the same channel")
	}
	o.pauseLocked("A", false, max)
	select {
	case <-stall:
	default:
		t.Fatal("A's publisher not released by RESUME")
	}
	got = got[:0]
	for turn := o.takeTurnLocked(nil); len(turn) > 0; turn = o.takeTurnLocked(nil) {
		for _, b := range turn {
			got = append(got, b...)
		}
	}
	if bytes.Count(got, []byte("A")) != 150 || o.mu.pending != 0 {
		t.Fatalf("after RESUME the writer sent %d of A's 150 held bytes, %d left pending", bytes.Count(got, []byte("A")), o.mu.pending)
	}
	// A RESUME for an account never paused changes nothing.
	o.pauseLocked("C", false, max)
	o.unstallLocked(max)
	if len(o.mu.accts) != 0 {
		t.Fatalf("%d idle account queues kept", len(o.mu.accts))
	}
}

// TestRouteOutOverShareStalls: a message past the account's share is
// dropped, and its publisher is told to wait on the same channel as
// below the share (so it does not read and drop as fast as its client
// sends); the channel closes once the writer has drained the queue below
// the stall threshold, and another account is untouched.
func TestRouteOutOverShareStalls(t *testing.T) {
	o := newRouteOut()
	const max = 64 << 20
	if q, _ := o.overShareLocked("A", 100, max); q != nil {
		t.Fatal("an account with nothing queued is over its share")
	}
	var stall chan struct{}
	for o.mu.accts["A"] == nil || o.mu.accts["A"].pending+(1<<20) <= acctShare(max) {
		stall = queueMsg(o, "A", 1<<20, max)
	}
	q, first := o.overShareLocked("A", 1<<20, max)
	if q == nil || !first {
		t.Fatalf("at %d of a %d share: over %v, first %v", o.mu.accts["A"].pending, acctShare(max), q != nil, first)
	}
	if q.stall == nil || q.stall != stall {
		t.Fatal("the dropped message's publisher is not told to wait on the account's stall channel")
	}
	if _, again := o.overShareLocked("A", 1<<20, max); again {
		t.Fatal("the second drop is reported as the first")
	}
	if q, _ := o.overShareLocked("B", 1<<20, max); q != nil {
		t.Fatal("B is over its share because of A's queue")
	}
	for len(o.takeTurnLocked(nil)) > 0 {
		// the writer sends everything queued
	}
	o.unstallLocked(max)
	select {
	case <-stall:
	default:
		t.Fatal("the publisher is not released once the queue has drained")
	}
	if q, _ := o.overShareLocked("A", 1<<20, max); q != nil {
		t.Fatal("a drained account is still over its share")
	}
}
