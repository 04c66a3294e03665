package jetstream

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// GroupAdmin is what a ReplicaGroup may offer beyond ReplicaGroup for
// health checks and membership changes; the cluster package's groups do
// (cmd's adapter). Without it the engine reports a group healthy once it
// has a leader, and cannot remove servers.
type GroupAdmin interface {
	// AppliedIndex is the index of the last entry applied here.
	AppliedIndex() uint64
	// CommitIndex is the highest index this node knows to be committed.
	CommitIndex() uint64
	// Members is the names of the group's members.
	Members() []string
	// RemoveServer takes the named node out of the group (leader only).
	RemoveServer(name string) error
}

// ClusterSnapshot is the meta group as this node sees it, and what it
// leads: what the monitor reports as JSZ's meta_cluster and
// streams_leader/consumers_leader.
type ClusterSnapshot struct {
	// Name is the cluster's name.
	Name string
	// Leader is the meta leader's name, "" when none is known.
	Leader string
	// Replicas are the meta group's members other than the leader (see
	// clusterPeers).
	Replicas []*api.PeerInfo
	// Size is the number of meta members; QuorumNeeded a majority of it.
	Size, QuorumNeeded int
	// StreamsLeader and ConsumersLeader count the streams (and their
	// consumers) this node leads.
	StreamsLeader, ConsumersLeader int
}

// ClusterSnapshot reports the meta group; nil on an engine that is not
// clustered or not yet connected to its groups.
func (e *Engine) ClusterSnapshot() *ClusterSnapshot {
	c := e.cl
	if c == nil || c.r == nil {
		return nil
	}
	grp := c.r.Group(0)
	size := len(c.r.Peers())
	if ad, ok := grp.(GroupAdmin); ok {
		if m := ad.Members(); len(m) > 0 {
			size = len(m)
		}
	}
	cs := &ClusterSnapshot{Name: c.r.ClusterName(), Leader: grp.Leader(), Replicas: c.clusterPeers(0),
		Size: size, QuorumNeeded: size/2 + 1}
	for _, a := range e.accountList() {
		for _, s := range a.sortedStreams() {
			cs.StreamsLeader++
			s.mu.Lock()
			cs.ConsumersLeader += len(s.mu.cons)
			s.mu.Unlock()
		}
	}
	return cs
}

// accountList is the registered accounts, in no order.
func (e *Engine) accountList() []*jsAccount {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*jsAccount, 0, len(e.mu.accounts))
	for _, a := range e.mu.accounts {
		out = append(out, a)
	}
	return out
}

// ErrNotCurrent matches ClusterHealth's errors (errors.Is): this node
// cannot serve its share of the cluster yet.
var ErrNotCurrent = errors.New("jetstream: not current")

// healthError is a ClusterHealth failure; its text is what /healthz
// shows, as nats-server words it.
type healthError struct{ msg string }

func (e *healthError) Error() string        { return e.msg }
func (e *healthError) Is(target error) bool { return target == ErrNotCurrent }

// PeerHash is the 8-character peer id nats-server shows for the server
// named name (replica lists, meta_cluster.peer).
func PeerHash(name string) string { return peerHash(name) }

// ClusterHealth reports whether this node is a useful member of its
// cluster: every raft group has a leader, and this node has applied
// everything it knows to be committed and hears from the leader. nil on
// a healthy node or one that is not clustered. The messages are
// nats-server's where it has one for the case.
func (e *Engine) ClusterHealth() error {
	c := e.cl
	if c == nil {
		return nil
	}
	if c.r == nil {
		return &healthError{"JetStream has not established contact with a meta leader"}
	}
	for g := 0; g <= c.r.Partitions(); g++ {
		if err := c.groupHealth(uint16(g)); err != nil {
			return err
		}
	}
	return nil
}

// groupHealth is ClusterHealth for one group.
func (c *clusterState) groupHealth(g uint16) error {
	grp := c.r.Group(g)
	noLeader, behind := "JetStream has not established contact with a meta leader", "JetStream is not current with the meta leader"
	if g != 0 {
		noLeader = fmt.Sprintf("JetStream raft group P%d has no leader", g)
		behind = fmt.Sprintf("JetStream raft group P%d is not current", g)
	}
	if grp.Leader() == "" {
		return &healthError{noLeader}
	}
	if !c.caughtUp(grp) {
		return &healthError{behind}
	}
	return nil
}

// applyGrace is how long caughtUp gives a node to apply what it knew
// committed when asked.
const applyGrace = 100 * time.Millisecond

// caughtUp reports whether this node has applied every entry it knows
// committed in grp and (as a follower) hears from the leader. A follower
// that has not been told of any commit yet (just restarted) is not.
func (c *clusterState) caughtUp(grp ReplicaGroup) bool {
	if ad, ok := grp.(GroupAdmin); ok {
		commit := ad.CommitIndex()
		if commit == 0 {
			return false
		}
		// Applying trails committing by a moment on every write; a node
		// that is applying reaches what was committed when asked soon.
		for wait := time.Now().Add(applyGrace); ad.AppliedIndex() < commit; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(wait) {
				return false
			}
		}
	}
	if grp.IsLeader() {
		return true
	}
	leader := grp.Leader()
	for _, rp := range grp.Replicas() {
		if rp.Name == leader {
			return rp.Current
		}
	}
	return false
}

// clusterPeers is the replicas list of group g's cluster block: every
// member but the leader, by name. The leader knows each member's
// progress; a follower knows only its own (current when caught up with
// the leader it hears) and reports the other followers not current.
func (c *clusterState) clusterPeers(g uint16) []*api.PeerInfo {
	grp := c.r.Group(g)
	reps := grp.Replicas()
	var out []*api.PeerInfo
	if grp.IsLeader() {
		for _, rp := range reps {
			out = append(out, &api.PeerInfo{Name: rp.Name, Current: rp.Current, Offline: rp.Offline,
				Active: rp.Active, Lag: rp.Lag, Peer: peerHash(rp.Name)})
		}
	} else {
		leader := grp.Leader()
		self := &api.PeerInfo{Name: c.r.NodeID(), Peer: peerHash(c.r.NodeID())}
		for _, rp := range reps {
			if rp.Name == leader {
				self.Active = rp.Active
				continue
			}
			out = append(out, &api.PeerInfo{Name: rp.Name, Offline: rp.Offline, Active: rp.Active, Peer: peerHash(rp.Name)})
		}
		self.Current = leader != "" && c.caughtUp(grp)
		out = append(out, self)
	}
	slices.SortFunc(out, func(x, y *api.PeerInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// ledSince records that this node's leadership of group g began at t
// (zero: it ended).
func (c *clusterState) ledSince(g uint16, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() {
		delete(c.mu.since, g)
		return
	}
	c.mu.since[g] = t
}

// leaderSince is when this node's current leadership of g began, or nil
// when it does not lead g.
func (c *clusterState) leaderSince(g uint16) *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.since[g]
	if !ok {
		return nil
	}
	t = t.UTC()
	return &t
}
