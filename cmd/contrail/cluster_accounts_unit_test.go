package main

import (
	"testing"
	"time"
)

// TestAwaitPeersCountsNodesOnce: a node's answer arriving twice counts
// once, so the wait goes on for the peer that has not answered; answers
// without a name (older nodes) count each time; the timeout ends the
// wait with what arrived.
func TestAwaitPeersCountsNodesOnce(t *testing.T) {
	never := make(chan time.Time)
	ch := make(chan string, 8)
	ch <- "n2"
	ch <- "n2"
	ch <- "n3"
	if got := awaitPeers(ch, 2, never); got != 2 || len(ch) != 0 {
		t.Fatalf("n2 twice then n3: %d answers counted, %d left", got, len(ch))
	}

	// Unbuffered: the timeout fires only once both answers were taken.
	one, fired := make(chan string), make(chan time.Time)
	go func() {
		one <- "n2"
		one <- "n2"
		fired <- time.Time{}
	}()
	if got := awaitPeers(one, 2, fired); got != 1 {
		t.Fatalf("n2 twice, then the timeout: %d answers counted, want 1", got)
	}

	ch <- ""
	ch <- ""
	if got := awaitPeers(ch, 2, never); got != 2 {
		t.Fatalf("two unnamed answers: %d counted, want 2", got)
	}
}
