package cluster

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// pendingFuture is a raft future answered only when answer is closed,
// as one raft left queued at shutdown is never answered.
type pendingFuture struct {
	answer chan struct{}
	err    error
}

func (f *pendingFuture) Error() error  { <-f.answer; return f.err }
func (f *pendingFuture) Response() any { return "applied" }
func (f *pendingFuture) Index() uint64 { return 7 }

// TestStoppableFuture: a future its instance never answers ends with
// ErrRaftShutdown once the instance has stopped; one answered before
// gives its own outcome, however often it is asked.
func TestStoppableFuture(t *testing.T) {
	halt := make(chan struct{})
	lost := Stoppable(&pendingFuture{answer: make(chan struct{})}, halt)
	answered := &pendingFuture{answer: make(chan struct{}), err: raft.ErrLeadershipLost}
	kept := Stoppable(answered, halt)
	close(answered.answer)
	if err := kept.Error(); !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("answered future: %v", err)
	}
	close(halt)
	if err := lost.Error(); !errors.Is(err, raft.ErrRaftShutdown) {
		t.Fatalf("unanswered future after the stop: %v", err)
	}
	if err := kept.Error(); !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("answered future asked again after the stop: %v", err)
	}
	if kept.Response() != "applied" || kept.Index() != 7 {
		t.Fatalf("response %v index %d", kept.Response(), kept.Index())
	}
}
