package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A group's leader runs with the longer heartbeat timeout, its followers
// with the short one (paceHeartbeats); while entries flow the leader's
// heartbeats are answered by its transport (thinned), and no follower
// stands for election meanwhile or while the cluster idles.
func TestHeartbeatsPacedAndThinned(t *testing.T) {
	c := startThree(t)
	const g = 1
	leader := c.node(c.leader(g)).Group(g)
	waitFor(t, 5*time.Second, "the leader paced", func() bool {
		return leader.Raft().ReloadableConfig().HeartbeatTimeout == leaderHeartbeatTimeout
	})
	var followers []*Group
	for _, name := range three {
		if grp := c.node(name).Group(g); grp != leader {
			followers = append(followers, grp)
			if ht := grp.Raft().ReloadableConfig().HeartbeatTimeout; ht != followerHeartbeatTimeout {
				t.Errorf("%s: follower heartbeat timeout %s, want %s", name, ht, followerHeartbeatTimeout)
			}
		}
	}
	term := leader.Raft().Stats()["term"]
	thinned := leader.trans().thinned.Load()
	for i := 0; leader.trans().thinned.Load() == thinned; i++ {
		if i == 2000 {
			t.Fatal("no heartbeat thinned while 2000 entries flowed")
		}
		c.apply(g, fmt.Sprintf("e%d", i))
	}
	// Idle: the followers hear from the leader often enough.
	time.Sleep(2 * time.Second)
	for _, f := range followers {
		if f.Raft().State() != raft.Follower {
			t.Errorf("a follower left the follower state: %s", f.Raft().State())
		}
	}
	if now := leader.Raft().Stats()["term"]; now != term || !leader.IsLeader() {
		t.Fatalf("leadership changed (term %s, then %s)", term, now)
	}
}
