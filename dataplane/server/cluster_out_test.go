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
