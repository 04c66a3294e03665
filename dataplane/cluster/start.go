package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// How a group without state on this node starts (docs/architecture.md, "Starting
// a group"):
//
//   - if any peer's log for it goes beyond the bootstrap configuration,
//     the cluster exists and this node lost the group (or never had it):
//     it rejoins as a new incarnation, in repair, and never bootstraps;
//   - if a majority of the members (this node included) answers, and none
//     has more than the bootstrap configuration, nothing was committed
//     beyond it on a quorum that could still be missing: the group is
//     bootstrapped with the --peers configuration (the same one the
//     peers that went first hold), so the cluster forms once a majority
//     is up; a member that starts later finds the others' state and
//     joins as a new incarnation;
//   - otherwise (too few answers, none beyond bootstrap) it asks again.
//
// The one hazard a majority leaves: while one member is down, the two
// that answer "nothing" could be a fresh node and one that lost its
// state, with the cluster's log on the silent one. That takes two faults
// at once (a wiped node, and the cluster's only other survivor down) during
// which the operator restarts the wiped node; once every member has state,
// a wiped node always finds a peer that has it, and rejoins.

// stateLevel is how much state a node has for a group.
type stateLevel int

const (
	stateNone stateLevel = iota
	// stateBootstrap: the bootstrap configuration and nothing else, so
	// nothing was ever committed beyond it (a leader's first entry would
	// be index 2).
	stateBootstrap
	// stateInUse: anything more, or an incarnation that rejoined.
	stateInUse
)

// state is what this node answers to a peer's discovery for the group.
func (g *Group) state() stateLevel {
	g.mu.Lock()
	id, launched := g.open.id, g.mu.launched
	if launched {
		id = g.selfID()
	}
	logs, snaps := g.logs, g.snaps
	g.mu.Unlock()
	if id == "" {
		return stateNone
	}
	if id != raft.ServerID(g.n.cfg.Name) {
		return stateInUse
	}
	var last uint64
	if r := g.raft(); r != nil {
		last = r.LastIndex()
	} else {
		var err error
		if last, err = logs.LastIndex(); err != nil {
			return stateInUse
		}
		if snaps, err := snaps.List(); err != nil || len(snaps) > 0 {
			return stateInUse
		}
	}
	if last > 1 {
		return stateInUse
	}
	return stateBootstrap
}

// discover runs discovery rounds until every group in pending started.
func (n *Node) discover(pending []*Group) {
	defer n.wg.Done()
	for {
		answers, _ := n.askStates()
		// This node and those that answered: enough to form a quorum?
		majority := 1+countAnswered(answers) > len(n.cfg.Peers)/2
		n.rounds.Add(1)
		var left []*Group
		for _, g := range pending {
			peerState := stateNone
			for _, st := range answers {
				peerState = max(peerState, st[g.id])
			}
			var err error
			switch {
			case peerState == stateInUse:
				err = g.startRejoin()
			case majority:
				err = g.startBootstrap()
			default:
				left = append(left, g)
				continue
			}
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				n.log.Error("cannot start group", "group", g.id, "err", err)
				left = append(left, g)
			}
		}
		pending = left
		if len(pending) == 0 || !n.sleep(n.retry()) {
			return
		}
	}
}

// countAnswered counts the peers whose discovery answer arrived.
func countAnswered(answers [][]stateLevel) int {
	n := 0
	for _, st := range answers {
		if st != nil {
			n++
		}
	}
	return n
}

func (g *Group) startBootstrap() error {
	id := raft.ServerID(g.n.cfg.Name)
	if err := persistStart(g.stable, id, false); err != nil {
		return fmt.Errorf("group %d: %w", g.id, err)
	}
	g.log.Info("bootstrapping a new cluster: no peer has state for the group")
	return g.launch(id, true)
}

func (g *Group) startRejoin() error {
	id := newIncarnation(g.n.cfg.Name)
	if err := persistStart(g.stable, id, true); err != nil {
		return fmt.Errorf("group %d: %w", g.id, err)
	}
	g.log.Warn("no state for the group but the cluster exists: rejoining as a new incarnation, in repair", "id", id)
	return g.launch(id, false)
}

// rejoin drives the repair of the group on this node: it asks the leader
// to admit its incarnation until the incarnation is a voter, then leaves
// repair. The incarnation is a voter only once the leader saw it caught
// up (admit); it may vote from then on, as it never voted under this id
// before and its log is a prefix of the leader's.
func (g *Group) rejoin(r *raft.Raft, stable raft.StableStore, stop <-chan struct{}) {
	defer g.n.wg.Done()
	added := false
	for {
		select {
		case <-stop:
			return
		default:
		}
		member, voter := g.suffrage(r)
		if member && !voter && !added {
			// Step 3 of the repair as this node sees it: its log holds
			// the configuration that added it, so the leader replicates
			// to it; it stays out of elections until promoted.
			added = true
			g.log.Info("repair: added as nonvoter, catching up", "id", g.selfID(),
				"applied", r.AppliedIndex(), "last", r.LastIndex())
		}
		if voter {
			if err := stable.SetUint64(StableKeyRepair, 0); err != nil {
				g.log.Error("cannot clear the repair marker", "err", err)
			} else {
				g.trans().SetRepair(false)
				g.log.Info("repair done: this node is a voter again", "id", g.selfID())
				return
			}
		} else {
			g.askJoin(r)
		}
		if !g.awaitVoter(r, 2*g.n.retry()) {
			return
		}
	}
}

// awaitVoter waits up to d, or until this incarnation is a voter in the
// configuration it knows, and reports whether the node is still open. The
// leader promotes a caught-up incarnation at once, and from then on it
// counts the node as a member that can lead (a stepdown or the balancer
// may pick it), while the node refuses leadership until it has left
// repair: looking often keeps that window short. Raft tells a follower of
// no configuration change, so this polls; only a group in repair does.
func (g *Group) awaitVoter(r *raft.Raft, d time.Duration) bool {
	step := g.n.retry() / 10
	for waited := time.Duration(0); waited < d; waited += step {
		if !g.n.sleep(step) {
			return false
		}
		if _, voter := g.suffrage(r); voter {
			return true
		}
	}
	return true
}

// suffrage reports whether this incarnation is in the group's latest
// configuration as this node knows it, and whether as a voter.
func (g *Group) suffrage(r *raft.Raft) (member, voter bool) {
	for _, s := range r.GetConfiguration().Configuration().Servers {
		if s.ID == g.selfID() {
			return true, s.Suffrage == raft.Voter
		}
	}
	return false, false
}

// askJoin sends the join request to the leader if one is known, else to
// every peer (only the leader acts on it).
func (g *Group) askJoin(r *raft.Raft) {
	g.joins.Add(1)
	req := ctlRequest{Op: opJoin, Group: g.id, ID: string(g.selfID())}
	peers := g.n.others()
	if _, id := r.LeaderWithID(); id != "" && nodeName(id) != g.n.cfg.Name {
		peers = []string{nodeName(id)}
	}
	for _, p := range peers {
		resp, err := g.n.call(p, req)
		if err == nil {
			if resp.Done {
				return
			}
			continue
		}
		if resp.Leader != "" && resp.Leader != p && resp.Leader != g.n.cfg.Name {
			if resp, err := g.n.call(resp.Leader, req); err == nil && resp.Done {
				return
			}
		}
	}
}

// admit is the leader's half of a rejoin, safe to repeat: it removes the
// node's older incarnations, adds the new one as a nonvoter, and makes it
// a voter once it has caught up with the log. It reports
// whether the incarnation is a voter.
func (g *Group) admit(id string) (bool, error) {
	r := g.raft()
	if r == nil || r.State() != raft.Leader {
		return false, ErrNotLeader
	}
	sid := raft.ServerID(id)
	name := nodeName(sid)
	if _, ok := g.n.addr(name); !ok || sid == raft.ServerID(name) {
		return false, fmt.Errorf("group %d: %q may not join", g.id, id)
	}
	if g.n.cfg.Admit != nil {
		if err := g.n.cfg.Admit(g.id, name); err != nil {
			return false, fmt.Errorf("group %d: %q may not join: %w", g.id, id, err)
		}
	}
	var have *raft.Server
	for _, s := range r.GetConfiguration().Configuration().Servers {
		switch {
		case s.ID == sid:
			have = &s
		case nodeName(s.ID) == name:
			g.log.Warn("removing a lost incarnation", "id", s.ID, "successor", sid)
			if err := r.RemoveServer(s.ID, 0, configTimeout).Error(); err != nil {
				return false, fmt.Errorf("group %d: remove %s: %w", g.id, s.ID, leaderErr(err))
			}
		}
	}
	addr := raft.ServerAddress(sid)
	switch {
	case have == nil:
		if err := r.AddNonvoter(sid, addr, 0, configTimeout).Error(); err != nil {
			return false, fmt.Errorf("group %d: add nonvoter %s: %w", g.id, sid, leaderErr(err))
		}
		g.log.Info("rejoining incarnation added as nonvoter", "id", sid)
		return false, nil
	case have.Suffrage == raft.Voter:
		return true, nil
	}
	// Caught up: within one append batch of the commit index, so that a
	// node catching up under steady writes is not chased forever. Raft's
	// safety does not need more: the incarnation never voted, and its log
	// is a prefix of the leader's.
	acked, contact := g.trans().progress.acked(sid)
	if acked+CurrentLag < r.CommitIndex() || time.Since(contact) > CurrentWithin*g.n.mult {
		return false, nil
	}
	if err := r.AddVoter(sid, addr, 0, configTimeout).Error(); err != nil {
		return false, fmt.Errorf("group %d: promote %s: %w", g.id, sid, leaderErr(err))
	}
	g.log.Info("rejoining incarnation caught up: promoted to voter", "id", sid, "index", acked)
	return true, nil
}
