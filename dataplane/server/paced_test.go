package server

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestPacedHandlerHoldsPublisher: a paced internal subscriber that says
// its work is backed up holds the publishing client's read loop until the
// work drains (here, until the test closes the channel), while an
// internal publish into the same subscriber never waits. A connection
// held so is still closed by a shutdown (startServer's cleanup).
func TestPacedHandlerHoldsPublisher(t *testing.T) {
	s := startServer(t, nil)
	acc := s.GlobalAccount()
	var gate atomic.Pointer[chan struct{}]
	backedUp := make(chan struct{})
	gate.Store(&backedUp)
	seen := make(chan string, 8)
	if _, err := acc.SubscribeInternalPaced("work.>", func(subj, _, _, _ []byte, _ bool) <-chan struct{} {
		seen <- string(subj)
		return *gate.Load()
	}); err != nil {
		t.Fatal(err)
	}

	// The server's own publishes pass.
	acc.Publish("work.internal", "", nil, nil)
	if got := <-seen; got != "work.internal" {
		t.Fatalf("internal publish delivered %q", got)
	}

	nc := connect(t, s)
	if err := nc.Publish("work.1", nil); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != "work.1" {
		t.Fatalf("got %q", got)
	}
	// The read loop now waits: what the client sends next is not read,
	// so a PING after it is not answered, far longer than the brief
	// pause a backlogged subscriber causes (stallWait). (A check that
	// nothing happens can only wait for a while.)
	if err := nc.Publish("work.2", nil); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- nc.FlushTimeout(10 * time.Second) }()
	select {
	case err := <-flushed:
		t.Fatalf("the publisher was read on while the work was backed up (flush: %v)", err)
	case <-time.After(20 * stallWait):
	}
	if len(seen) != 0 {
		t.Fatalf("delivered %q while the work was backed up", <-seen)
	}

	close(backedUp)
	if err := <-flushed; err != nil {
		t.Fatalf("flush after the work drained: %v", err)
	}
	if got := <-seen; got != "work.2" {
		t.Fatalf("got %q", got)
	}

	// Held again at the end: the server's shutdown must still close it.
	again := make(chan struct{})
	gate.Store(&again)
	if err := nc.Publish("work.3", nil); err != nil {
		t.Fatal(err)
	}
	<-seen
}
