package cluster

import (
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// maxMovesPerPass bounds the leadership transfers one balancing pass
// starts: each costs the moved partition a short pause in writes.
const maxMovesPerPass = 2

// balanceHold is how long the balancer prefers to leave alone a partition
// whose leader changed by other means than its own moves (an operator's
// stepdown, a failover): it evens out the counts with other partitions
// where it can, so a stepdown is not undone a second later.
const balanceHold = 30 * time.Second

// moveBackoff bounds how long the balancer leaves a partition alone
// after moves of it failed: two passes after the first failure, twice as
// long after each next one, up to this. A move fails mostly under load
// (the target cannot catch up with the leader in an election timeout),
// and while raft tries one it refuses the partition's writes, which the
// applier then has to reload from: retried every pass, a flooded
// partition refused writes for up to an election timeout every second or
// two. A move refused at once (a target not current yet, after a
// restart) is retried soon.
const moveBackoff = balanceHold

// backoff is a partition's pause from balancing after failed moves.
type backoff struct {
	until time.Time
	wait  time.Duration
}

// failedAt is b after one more failed move at now, with interval the
// balancing pass interval.
func (b backoff) failedAt(now time.Time, interval time.Duration) backoff {
	b.wait = min(max(2*b.wait, 2*interval), moveBackoff)
	b.until = now.Add(b.wait)
	return b
}

// heldUntil holds every partition whose leadership passed from one
// leader to another lately, by any means (an operator's stepdown, a
// failover, the balancer's own move), until its hold ends.
func heldUntil(groups []*Group, now time.Time) map[uint16]time.Time {
	held := map[uint16]time.Time{}
	for _, g := range groups {
		if at := g.LeaderChangedAt(); !at.IsZero() && now.Before(at.Add(balanceHold)) {
			held[g.id] = at.Add(balanceHold)
		}
	}
	return held
}

// balance runs on every node and acts while the node leads the meta
// group: every BalanceInterval it evens out partition leadership, so that
// each live node leads about P/N partitions.
func (n *Node) balance() {
	defer n.wg.Done()
	failed := map[uint16]backoff{}
	for n.sleep(n.cfg.BalanceInterval) {
		if n.draining.Load() || !n.groups[MetaGroup].IsLeader() {
			continue
		}
		now := time.Now()
		skip := map[uint16]bool{}
		for g, b := range failed {
			switch {
			case now.Before(b.until):
				skip[g] = true
			case now.Sub(b.until) >= moveBackoff:
				delete(failed, g) // no failure for long: start over
			}
		}
		moves := n.plan(heldUntil(n.groups[1:], now), skip)
		errs := make([]error, len(moves))
		var wg sync.WaitGroup
		for i, m := range moves {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.move(m)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			g := moves[i].group.id
			if err == nil {
				delete(failed, g)
				continue
			}
			failed[g] = failed[g].failedAt(time.Now(), n.cfg.BalanceInterval)
		}
	}
}

// move is one planned leadership transfer.
type move struct {
	group    *Group
	from, to string
}

// plan picks up to maxMovesPerPass transfers from the nodes leading the
// most partitions to those leading the fewest, moving held partitions
// only where no other will do (the one held longest first) and those in
// skip (backing off after failed moves) not at all. Only nodes current
// in the meta group and heard from lately (canLead) receive leadership;
// a pass with a leaderless partition does nothing, as an election is
// under way.
func (n *Node) plan(held map[uint16]time.Time, skip map[uint16]bool) []move {
	count := map[string]int{n.cfg.Name: 0}
	for _, r := range n.groups[MetaGroup].Replicas() {
		if canLead(r, n.mult) {
			count[r.Name] = 0
		}
	}
	led := map[string][]*Group{}
	for _, g := range n.groups[1:] {
		l := g.Leader()
		if l == "" {
			return nil
		}
		led[l] = append(led[l], g)
		if _, ok := count[l]; ok {
			count[l]++
		}
	}
	names := make([]string, 0, len(count))
	for name := range count {
		names = append(names, name)
	}
	var moves []move
	for len(moves) < maxMovesPerPass {
		// Sort by count, then name, so every pass plans alike.
		sort.Slice(names, func(i, j int) bool {
			if count[names[i]] != count[names[j]] {
				return count[names[i]] > count[names[j]]
			}
			return names[i] < names[j]
		})
		from, to := names[0], names[len(names)-1]
		if count[from]-count[to] <= 1 {
			break
		}
		// A partition not held if there is one; else the one whose hold
		// ends first.
		var pick *Group
		at := -1
		for i, g := range led[from] {
			if s, ok := g.member(to); !ok || s.Suffrage != raft.Voter {
				continue
			}
			if skip[g.id] {
				continue
			}
			until, isHeld := held[g.id]
			if !isHeld {
				pick, at = g, i
				break
			}
			if pick == nil || until.Before(held[pick.id]) {
				pick, at = g, i
			}
		}
		if pick == nil {
			break
		}
		led[from] = append(led[from][:at:at], led[from][at+1:]...)
		moves = append(moves, move{group: pick, from: from, to: to})
		count[from]--
		count[to]++
	}
	return moves
}

// canLead reports whether the balancer may hand partitions to the meta
// group member r: a current voter heard from within an election timeout.
// Current alone allows a second of silence (three under the timing
// multiplier of a loaded test run), and a node killed that recently was
// picked: the transfer to it timed out, and the partition refused writes
// meanwhile.
func canLead(r Replica, mult time.Duration) bool {
	return r.Current && r.Voter && r.Active <= followerHeartbeatTimeout*mult
}

// move asks the partition's leader to hand leadership over.
func (n *Node) move(m move) error {
	var err error
	if m.from == n.cfg.Name {
		err = n.transferFor(m.group, m.to)
	} else {
		_, err = n.call(m.from, ctlRequest{Op: opTransfer, Group: m.group.id, To: m.to})
	}
	if err != nil {
		n.log.Info("partition leadership move failed", "group", m.group.id, "from", m.from, "to", m.to, "err", err)
		return err
	}
	n.log.Info("partition leadership moved", "group", m.group.id, "from", m.from, "to", m.to)
	return nil
}
