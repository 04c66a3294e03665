package cluster

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// ReadFence passes on the leader, for many readers at once (they share
// rounds), and fails on a follower; a leader cut off from both followers
// fails it too, instead of vouching for its state.
func TestReadFence(t *testing.T) {
	c := startThree(t)
	const g = 1
	leader := c.leader(g)
	grp := c.node(leader).Group(g)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- grp.ReadFence(5 * time.Second)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("fence on the leader: %v", err)
		}
	}
	for _, name := range c.running() {
		if name == leader {
			continue
		}
		if err := c.node(name).Group(g).ReadFence(time.Second); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("fence on follower %s: %v, want ErrNotLeader", name, err)
		}
	}
	for _, name := range c.running() {
		if name != leader {
			c.kill(name)
		}
	}
	if err := grp.ReadFence(5 * time.Second); err == nil {
		t.Fatal("a leader without followers passed the fence")
	}
}
