package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster/mux"
)

// Group is one raft group on this node. Its methods are safe for
// concurrent use; before the group has started (see Ready) they answer
// ErrNotStarted, false or zero.
type Group struct {
	n   *Node
	id  uint16
	log *slog.Logger

	fsm    raft.FSM
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	// open is what the stores said at Start: the server id to run as
	// (empty: no state, ask the peers) and whether a repair was under way.
	open struct {
		id     raft.ServerID
		repair bool
	}

	ready     chan struct{}
	readyOnce sync.Once
	r         atomic.Pointer[raft.Raft]
	t         atomic.Pointer[transport]
	// self is the raft id the group runs as. Set before ready closes;
	// a repair replaces it.
	self   atomic.Pointer[raft.ServerID]
	leader atomic.Bool
	// stop is closed when the running raft instance is stopped (for a
	// repair, or for good), which ends the goroutines that serve it and
	// the waits on its futures. Guarded by mu; halt holds it for the
	// futures' path, which takes no lock.
	stop chan struct{}
	halt atomic.Pointer[chan struct{}]
	// repairing serialises repairs.
	repairing sync.Mutex
	// changed is when this node last saw the group's leadership pass
	// from one leader to another (unix nanoseconds; 0: never). A first
	// election after start is no change.
	changed atomic.Int64
	// joins counts the join requests sent while in repair.
	joins atomic.Uint64
	// fence batches the leadership proofs reads wait for (ReadFence).
	fence readFence

	mu struct {
		sync.Mutex
		onLeader   []func(bool) // guarded by mu
		onHandOver []HandOver   // guarded by mu
		// seen is closed, and replaced, each time this node learns of
		// a leader, for TransferLeadership to wait on its successor
		// (nil until first asked for).
		seen chan struct{} // guarded by mu
		// transfer is closed when the leadership transfer running on
		// this node ends; nil while none runs (see beginTransfer).
		transfer chan struct{} // guarded by mu
		launched bool          // guarded by mu
		shut     bool          // guarded by mu
	}
}

func (n *Node) openGroup(g uint16) (*Group, error) {
	fsm, logs, stable, snaps, err := n.cfg.Open(g)
	if err != nil {
		return nil, fmt.Errorf("group %d: open: %w", g, err)
	}
	grp := &Group{n: n, id: g, log: n.log.With("group", g), fsm: fsm, logs: logs, stable: stable, snaps: snaps, ready: make(chan struct{})}
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	id, err := storedID(stable)
	if err != nil {
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	repair, err := storedRepair(stable)
	if err != nil {
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	if id == "" && has {
		id = raft.ServerID(n.cfg.Name)
	}
	if id != "" && nodeName(id) != n.cfg.Name {
		return nil, fmt.Errorf("group %d: the stores belong to server %q, not to node %q", g, id, n.cfg.Name)
	}
	grp.open.id, grp.open.repair = id, repair
	return grp, nil
}

// The heartbeat timeouts of a group's followers and of its leader, at
// timing multiplier 1 (see paceHeartbeats). A follower's is also the
// election timeout.
const (
	followerHeartbeatTimeout = 250 * time.Millisecond
	leaderHeartbeatTimeout   = 500 * time.Millisecond
)

// paceHeartbeats sets r's heartbeat timeout for its new role. raft uses
// the one setting for two things: a follower's patience (it stands for
// election after 1-2 timeouts without word from the leader) and a
// leader's heartbeat interval (a tenth of it). Kept at 250 ms for both,
// each leader would wake every 25-50 ms for each follower of each group
// to send or thin a heartbeat. A leader runs with a longer timeout: its
// heartbeats go every 50-100 ms, still several within the shortest
// patience of its followers (250 ms), which keep the short timeout and
// so notice a lost leader as fast as before. A leader stepping down is
// back on the short timeout as soon as it is told; raft then re-arms its
// follower timer at once.
func (n *Node) paceHeartbeats(r *raft.Raft, leader bool) {
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout = followerHeartbeatTimeout * n.mult
	if leader {
		rc.HeartbeatTimeout = leaderHeartbeatTimeout * n.mult
	}
	// raft wants the election timeout at least the heartbeat timeout; a
	// leader holds no election, and one stepping down is told at once.
	rc.ElectionTimeout = rc.HeartbeatTimeout
	if err := r.ReloadConfig(rc); err != nil {
		n.log.Warn("raft: heartbeat pacing not applied", "err", err)
	}
}

// raftConfig is the tuned configuration every group runs with.
func (n *Node) raftConfig(g uint16, id raft.ServerID, logs raft.LogStore, lg *hclogAdapter) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = followerHeartbeatTimeout * n.mult
	c.ElectionTimeout = followerHeartbeatTimeout * n.mult
	// The lease is a leader's patience: it steps down once a quorum
	// has not answered for this long. At the followers' patience it
	// spans 2.5-5 of the leader's heartbeat intervals (50-100 ms), so
	// one late answer is not a lost quorum; raft allows no more (the
	// lease may not exceed the heartbeat timeout a node starts with, a
	// follower's). At 150 ms it spanned 1.5-3: on two shared cores, one
	// client publishing 500 KB messages to an R3 stream made leaders
	// step down every few seconds, each time losing the partition's
	// publishes in flight. Failover does not wait for it: followers
	// notice a lost leader by their own timeout.
	c.LeaderLeaseTimeout = followerHeartbeatTimeout * n.mult
	c.CommitTimeout = n.cfg.CommitTimeout
	if g != 0 {
		c.CommitTimeout = n.cfg.PartitionCommitTimeout
	}
	c.MaxAppendEntries = 512
	c.BatchApplyCh = true
	c.TrailingLogs = n.cfg.TrailingLogs
	c.SnapshotThreshold = n.cfg.SnapshotThreshold
	c.SnapshotInterval = n.cfg.SnapshotInterval
	// The FSM is durable: on start it already holds what it applied,
	// so raft must not restore the last snapshot over it.
	c.NoSnapshotRestoreOnStart = true
	c.NoLegacyTelemetry = true
	_, c.RestoreCommittedLogs = logs.(raft.CommitTrackingLogStore)
	c.Logger = lg
	return c
}

// addr resolves a node name to its cluster address.
func (n *Node) addr(name string) (string, bool) {
	a, ok := n.cfg.Peers[name]
	return a, ok
}

// launch starts the group's raft instance as server id, bootstrapping
// the --peers configuration first if asked to.
func (g *Group) launch(id raft.ServerID, bootstrap bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.launchLocked(id, bootstrap)
}

func (g *Group) launchLocked(id raft.ServerID, bootstrap bool) error {
	if g.mu.shut {
		return ErrClosed
	}
	ln, err := g.n.cfg.Mux.Listen(mux.KindRaft, g.id)
	if err != nil {
		return fmt.Errorf("group %d: %w", g.id, err)
	}
	lg := newHclog(g.log, "raft").(*hclogAdapter)
	t := newTransport(newStreamLayer(ln, g.id, id, g.n.addr), g.id, lg)
	repair, err := storedRepair(g.stable)
	if err != nil {
		t.Close()
		return fmt.Errorf("group %d: %w", g.id, err)
	}
	t.SetRepair(repair)
	t.thin = heartbeatThin * g.n.mult
	t.draining.Store(g.n.draining.Load())
	r, err := raft.NewRaft(g.n.raftConfig(g.id, id, g.logs, lg), g.fsm, g.logs, g.stable, g.snaps, t)
	if err != nil {
		t.Close()
		return fmt.Errorf("group %d: start raft: %w", g.id, err)
	}
	if bootstrap {
		if err := r.BootstrapCluster(g.n.bootConfig()).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			r.Shutdown()
			return fmt.Errorf("group %d: bootstrap: %w", g.id, err)
		}
	}
	g.self.Store(&id)
	g.t.Store(t)
	g.r.Store(r)
	g.mu.launched = true
	g.stop = make(chan struct{})
	g.halt.Store(&g.stop)
	g.readyOnce.Do(func() { close(g.ready) })
	// Every change of leader this node learns of, as raft sees it, not
	// as sampled: a stepdown and a stepdown back between two looks at
	// the leader are two changes.
	obs := make(chan raft.Observation, 16)
	r.RegisterObserver(raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	g.n.wg.Add(1)
	go g.watchLeader(r, obs, g.stop)
	if repair {
		// Step 2 of the repair (start.go, rejoin): raft runs under the
		// new incarnation with the vote gate closed; a restart in the
		// middle of a repair logs this again under the stored id.
		g.log.Info("repair: raft started in repair, not voting; asking the leader to admit this incarnation", "id", id)
		g.n.wg.Add(1)
		go g.rejoin(r, g.stable, g.stop)
	}
	return nil
}

// selfID is the raft id the group runs as, "" before it starts.
func (g *Group) selfID() raft.ServerID {
	if p := g.self.Load(); p != nil {
		return *p
	}
	return ""
}

// bootConfig is the fresh cluster's configuration: every --peers node a
// voter under its plain name.
func (n *Node) bootConfig() raft.Configuration {
	var c raft.Configuration
	for name := range n.cfg.Peers {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(name), Address: raft.ServerAddress(name)})
	}
	return c
}

// watchLeader turns raft's leadership signal into the group's callbacks.
// It runs on its own goroutine, so a slow callback delays later
// callbacks, never raft.
func (g *Group) watchLeader(r *raft.Raft, obs <-chan raft.Observation, stop <-chan struct{}) {
	defer g.n.wg.Done()
	ch := r.LeaderCh()
	var known raft.ServerID // the last leader seen, "" before the first
	tell := func(isLeader bool) {
		g.leader.Store(isLeader)
		g.mu.Lock()
		fns := append([]func(bool){}, g.mu.onLeader...)
		g.mu.Unlock()
		for _, fn := range fns {
			fn(isLeader)
		}
	}
	for {
		select {
		case isLeader := <-ch:
			if isLeader {
				g.t.Load().progress.reset()
			}
			g.n.paceHeartbeats(r, isLeader)
			tell(isLeader)
		case o := <-obs:
			lo, _ := o.Data.(raft.LeaderObservation)
			if lo.LeaderID == "" {
				continue
			}
			g.mu.Lock()
			if g.mu.seen != nil {
				close(g.mu.seen)
				g.mu.seen = nil
			}
			g.mu.Unlock()
			if known != "" && lo.LeaderID != known {
				g.changed.Store(time.Now().UnixNano())
			}
			known = lo.LeaderID
		case <-stop:
			// The instance stopped for a repair: whatever it led is
			// no longer led here.
			if g.leader.Load() {
				tell(false)
			}
			return
		case <-g.n.closing:
			return
		}
	}
}

// ErrNoReset is Repair's answer when Config.Reset is not set.
var ErrNoReset = errors.New("cluster: no reset function configured")

// Repair replaces this node's copy of the group with the leader's, as
// when the node lost it: it hands leadership away if it holds it, stops
// the group's raft instance, has Config.Reset discard the group's state,
// and starts the group again as a new incarnation in repair. Until the
// leader has caught it up (log or snapshot) and made it a voter, it does
// not vote. The members keep a quorum meanwhile only if the others are a
// majority without this node: ask for a repair only then.
func (g *Group) Repair() error {
	if g.n.cfg.Reset == nil {
		return fmt.Errorf("group %d: repair: %w", g.id, ErrNoReset)
	}
	g.repairing.Lock()
	defer g.repairing.Unlock()
	if g.IsLeader() {
		if err := g.TransferLeadership(""); err != nil {
			return fmt.Errorf("group %d: repair: hand the leadership over first: %w", g.id, err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.shut {
		return ErrClosed
	}
	if !g.mu.launched {
		return fmt.Errorf("group %d: repair: %w", g.id, ErrNotStarted)
	}
	g.log.Warn("repair: discarding this node's copy of the group and rejoining", "id", g.selfID())
	close(g.stop)
	err := g.raft().Shutdown().Error()
	g.mu.launched = false
	if err != nil {
		return fmt.Errorf("group %d: repair: stop: %w", g.id, err)
	}
	// From here a failure leaves the group stopped on this node until
	// it restarts: with its state reset, it then rejoins; with the reset
	// not committed, it starts on its old copy, which the next digest
	// check finds again.
	if err := g.n.cfg.Reset(g.id); err != nil {
		return fmt.Errorf("group %d: repair: reset: %w", g.id, err)
	}
	fsm, logs, stable, snaps, err := g.n.cfg.Open(g.id)
	if err != nil {
		return fmt.Errorf("group %d: repair: open: %w", g.id, err)
	}
	g.fsm, g.logs, g.stable, g.snaps = fsm, logs, stable, snaps
	id := newIncarnation(g.n.cfg.Name)
	if err := persistStart(g.stable, id, true); err != nil {
		return fmt.Errorf("group %d: repair: %w", g.id, err)
	}
	return g.launchLocked(id, false)
}

func (g *Group) shutdown() error {
	g.mu.Lock()
	g.mu.shut = true
	launched := g.mu.launched
	g.mu.Unlock()
	if !launched {
		return nil
	}
	g.leader.Store(false)
	err := g.r.Load().Shutdown().Error()
	g.mu.Lock()
	if g.mu.launched {
		g.mu.launched = false
		close(g.stop)
	}
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("group %d: shutdown: %w", g.id, err)
	}
	return nil
}

func (g *Group) raft() *raft.Raft  { return g.r.Load() }
func (g *Group) trans() *transport { return g.t.Load() }

// ID is the group's number: 0 for the meta group, 1..P for partitions.
func (g *Group) ID() uint16 { return g.id }

// Ready is closed once the group's raft instance runs.
func (g *Group) Ready() <-chan struct{} { return g.ready }

// ServerID is the raft id the group runs as on this node: the node name,
// or name#incarnation after a rejoin. Empty before Ready.
func (g *Group) ServerID() string {
	if g.raft() == nil {
		return ""
	}
	return string(g.selfID())
}

// Raft is the group's raft instance, for what this type does not wrap;
// nil before Ready.
func (g *Group) Raft() *raft.Raft { return g.raft() }

// Apply proposes data as one log entry. Only the leader may; the
// future's Response is the FSM's answer once the entry is committed and
// applied here.
func (g *Group) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	halt, r := g.halt.Load(), g.raft()
	if r == nil {
		return errorFuture{ErrNotStarted}
	}
	return Stoppable(r.Apply(data, timeout), *halt)
}

// ApplyLog proposes an entry carrying l's Data and Extensions (raft
// takes only those), as Apply does.
func (g *Group) ApplyLog(l raft.Log, timeout time.Duration) raft.ApplyFuture {
	halt, r := g.halt.Load(), g.raft()
	if r == nil {
		return errorFuture{ErrNotStarted}
	}
	return Stoppable(r.ApplyLog(l, timeout), *halt)
}

// IsLeader reports whether this node leads the group.
func (g *Group) IsLeader() bool {
	r := g.raft()
	return r != nil && r.State() == raft.Leader
}

// Leader is the name of the node leading the group, or "" if none is known.
func (g *Group) Leader() string {
	r := g.raft()
	if r == nil {
		return ""
	}
	_, id := r.LeaderWithID()
	return nodeName(id)
}

// LeaderChangedAt is when this node last saw the group's leadership pass
// from one leader to another; zero if it never did.
func (g *Group) LeaderChangedAt() time.Time {
	if ns := g.changed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// OnLeader registers fn to be told of every change of this node's
// leadership of the group. Calls for one group are serial, in order, on
// a goroutine of their own: fn may block without stalling raft, but it
// delays the group's later calls. If changes come faster than fn returns
// only the latest state may be reported.
func (g *Group) OnLeader(fn func(isLeader bool)) {
	g.mu.Lock()
	g.mu.onLeader = append(g.mu.onLeader, fn)
	g.mu.Unlock()
}

// HandOver readies a group this node leads for a planned hand-over of its
// leadership: it returns, at most wait later, once what the leader
// proposed before is committed, and after is told how the transfer went
// (nil: it happened).
type HandOver func(wait time.Duration) (after func(err error))

// handOverWait bounds the wait for a leader's proposals to commit before
// a planned transfer (times the timing multiplier): a few commit round
// trips normally; past it the transfer goes ahead, and what is still in
// flight has an unknown fate, as in a failover.
const handOverWait = time.Second

// OnHandOver registers fn to run before each planned transfer of the
// group's leadership from this node (TransferLeadership: a balancing
// move, a stepdown, a shutdown). Raft takes no new entries once a
// transfer starts and ends the leader's term with entries in flight,
// whose proposers then never hear their fate: the leader stops proposing
// and lets those commit first.
func (g *Group) OnHandOver(fn HandOver) {
	g.mu.Lock()
	g.mu.onHandOver = append(g.mu.onHandOver, fn)
	g.mu.Unlock()
}

// Barrier waits until every entry committed before it is applied to the
// FSM here; a new leader calls it before serving reads.
func (g *Group) Barrier(timeout time.Duration) error {
	halt, r := g.halt.Load(), g.raft()
	if r == nil {
		return ErrNotStarted
	}
	err := Stoppable(r.Barrier(timeout), *halt).Error()
	if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		// raft refuses a barrier while it hands the leadership over;
		// once the transfer ends this node either leads still (the
		// barrier goes through) or knows it does not.
		if g.awaitTransfer(timeout) {
			err = Stoppable(r.Barrier(timeout), *halt).Error()
		}
	}
	if err != nil {
		return fmt.Errorf("group %d: barrier: %w", g.id, leaderErr(err))
	}
	return nil
}

// transferSlot bounds a leadership transfer's wait for the one running
// before it (times the timing multiplier): longer than a transfer takes
// (handOverWait, raft's own bound of a leader's election timeout, and the
// wait for the successor), so it only ends a wait on a transfer that hung.
const transferSlot = handOverWait + leaderHeartbeatTimeout + followerHeartbeatTimeout + time.Second

// beginTransfer makes the caller the one leadership transfer running on
// this node for the group, waiting (up to transferSlot) for the one
// running before it to end. Invariant: at most one transfer runs per
// group on a node. raft refuses a second transfer while one runs, and
// the refused caller's hand-over hooks would end the running transfer's
// hand-over under it (its partition reloaded mid-transfer, the requests
// it kept answered by nobody). The returned end must be called once the
// transfer is over.
func (g *Group) beginTransfer() (end func(), err error) {
	wait := time.NewTimer(transferSlot * g.n.mult)
	defer wait.Stop()
	for {
		g.mu.Lock()
		if g.mu.transfer == nil {
			mine := make(chan struct{})
			g.mu.transfer = mine
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				g.mu.transfer = nil
				g.mu.Unlock()
				close(mine)
			}, nil
		}
		g.mu.Unlock()
		if err := g.waitTransfer(wait.C); err != nil {
			return nil, err
		}
	}
}

// awaitTransfer waits, at most timeout, until no leadership transfer
// runs on this node for the group, and reports whether none does.
func (g *Group) awaitTransfer(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	return g.waitTransfer(t.C) == nil
}

// waitTransfer waits until the leadership transfer running on this node
// for the group, if any, has ended: nil then, an error if expired fires
// or the node closes first. Another transfer may have begun since.
func (g *Group) waitTransfer(expired <-chan time.Time) error {
	g.mu.Lock()
	running := g.mu.transfer
	g.mu.Unlock()
	if running == nil {
		return nil
	}
	select {
	case <-running:
		return nil
	case <-expired:
		return fmt.Errorf("group %d: %w", g.id, raft.ErrLeadershipTransferInProgress)
	case <-g.n.closing:
		return ErrClosed
	}
}

// TransferLeadership hands the group's leadership to the node named to,
// or if to is empty to the live voter furthest along (transferTarget),
// and waits for the hand-over. A target refused runs no hand-over hook:
// the group is not paused for a move that cannot happen.
func (g *Group) TransferLeadership(to string) (err error) {
	r := g.raft()
	if r == nil {
		return ErrNotStarted
	}
	end, err := g.beginTransfer()
	if err != nil {
		return err
	}
	defer end()
	if !g.IsLeader() {
		// The transfer before this one moved the leadership away.
		return fmt.Errorf("group %d: leadership transfer: %w", g.id, ErrNotLeader)
	}
	target, err := g.transferTarget(r, to)
	if err != nil {
		return err
	}
	g.mu.Lock()
	hooks := append([]HandOver(nil), g.mu.onHandOver...)
	g.mu.Unlock()
	for _, fn := range hooks {
		// Deferred after end: the next transfer starts once this one's
		// hand-over is over.
		after := fn(handOverWait * g.n.mult)
		defer func() { after(err) }()
	}
	if err := r.LeadershipTransferToServer(target.ID, target.Address).Error(); err != nil {
		return fmt.Errorf("group %d: leadership transfer: %w", g.id, leaderErr(err))
	}
	// Raft's transfer is done once this node has stepped down, which
	// its successor's vote request makes it do before the successor has
	// won: what the hand-over's hooks send on afterwards (requests
	// refused meanwhile) must find a leader.
	g.AwaitOtherLeader(followerHeartbeatTimeout * g.n.mult)
	return nil
}

// transferTarget is the member a transfer hands the leadership to: the
// node named to if it is live, else (as nats-server's stepdown does, a
// preferred server that is not healthy is passed over) the live voter
// furthest along. Invariant: a target is a voter that answered this
// leadership within CurrentWithin (how far behind it is does not matter:
// raft catches it up before handing over). raft's transfer to a member
// that does not answer runs out a leader's election timeout with the
// group paused by the hand-over, and raft's own pick (the voter furthest
// along) may be a dead one: stepdowns asked in a loop would keep the
// group, and every stream it carries, paused.
func (g *Group) transferTarget(r *raft.Raft, to string) (raft.Server, error) {
	self, pr := g.selfID(), g.trans().progress
	servers := r.GetConfiguration().Configuration().Servers
	// A stepdown right after an election must not find the members
	// silent only because they have not answered yet. Live followers
	// answer a new leader's first heartbeats together: once one has, the
	// one named gets a heartbeat interval or two more (100 ms at
	// multiplier 1). Waiting for it alone would wait out CurrentWithin
	// whenever it is dead.
	var voters, preferredIDs []raft.ServerID
	for _, s := range servers {
		if s.ID != self && s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
			if nodeName(s.ID) == to {
				preferredIDs = append(preferredIDs, s.ID)
			}
		}
	}
	within := CurrentWithin * g.n.mult
	pr.awaitHeard(voters, within, within)
	pr.awaitHeard(preferredIDs, within, leaderHeartbeatTimeout*g.n.mult/5)
	last, now := r.LastIndex(), time.Now()
	var best raft.Server
	var bestLag uint64
	found, named := false, to == ""
	for _, s := range servers {
		preferred := to != "" && nodeName(s.ID) == to
		named = named || preferred
		if s.ID == self {
			if preferred {
				return raft.Server{}, fmt.Errorf("group %d: %q is this node: %w", g.id, to, ErrSelfTransfer)
			}
			continue
		}
		if s.Suffrage != raft.Voter || !pr.answered(s.ID, within, now) {
			continue
		}
		if preferred {
			return s, nil
		}
		if lag := pr.replica(s, last, g.n.mult, now).Lag; !found || lag < bestLag {
			best, bestLag, found = s, lag, true
		}
	}
	switch {
	case !named:
		return raft.Server{}, fmt.Errorf("group %d: %q is not a member", g.id, to)
	case !found:
		return raft.Server{}, fmt.Errorf("group %d: no member to hand the leadership to: %w", g.id, ErrNotLive)
	case to != "":
		g.log.Info("leadership transfer: the preferred member is not live; handing over to another",
			"preferred", to, "to", nodeName(best.ID))
	}
	return best, nil
}

// AwaitOtherLeader waits, at most timeout, until this node knows of a
// leader of the group other than itself, and returns that leader's node
// id, or "" if none is known by then. A node that stops leading learns
// its successor only once the successor has won (an election or a
// transfer); what it could not answer meanwhile goes to the successor.
func (g *Group) AwaitOtherLeader(timeout time.Duration) string {
	bound := time.NewTimer(timeout)
	defer bound.Stop()
	for {
		g.mu.Lock()
		if g.mu.seen == nil {
			g.mu.seen = make(chan struct{})
		}
		seen := g.mu.seen
		g.mu.Unlock()
		if l := g.Leader(); l != "" && l != g.n.cfg.Name {
			return l
		}
		select {
		case <-seen:
		case <-bound.C:
			return ""
		case <-g.n.closing:
			return ""
		}
	}
}

// member finds the server of the node named name in the latest
// configuration.
func (g *Group) member(name string) (raft.Server, bool) {
	r := g.raft()
	if r == nil {
		return raft.Server{}, false
	}
	for _, s := range r.GetConfiguration().Configuration().Servers {
		if nodeName(s.ID) == name {
			return s, true
		}
	}
	return raft.Server{}, false
}

// Members is the names of the nodes in the group's latest configuration.
func (g *Group) Members() []string {
	r := g.raft()
	if r == nil {
		return nil
	}
	var names []string
	for _, s := range r.GetConfiguration().Configuration().Servers {
		names = append(names, nodeName(s.ID))
	}
	return names
}

// Replicas reports every other member of the group. The leader reports
// what the members' answers showed it; a follower knows only the
// leader's last contact, so it reports the leader current or not and
// leaves the other members not current, without lag.
func (g *Group) Replicas() []Replica {
	r := g.raft()
	if r == nil {
		return nil
	}
	now := time.Now()
	servers := r.GetConfiguration().Configuration().Servers
	out := make([]Replica, 0, len(servers))
	if r.State() == raft.Leader {
		last := r.LastIndex()
		for _, s := range servers {
			if s.ID != g.selfID() {
				out = append(out, g.trans().progress.replica(s, last, g.n.mult, now))
			}
		}
		return out
	}
	_, leader := r.LeaderWithID()
	for _, s := range servers {
		if s.ID == g.selfID() {
			continue
		}
		rep := Replica{Name: nodeName(s.ID), Voter: s.Suffrage == raft.Voter}
		if s.ID == leader {
			rep.Active = sinceContact(now, r.LastContact())
			rep.Current = rep.Active <= CurrentWithin*g.n.mult
			rep.Offline = rep.Active > OfflineAfter*g.n.mult
		}
		out = append(out, rep)
	}
	return out
}

// replica is what this node, leading the group, knows of the member
// named name (see Replicas); false if it does not lead or name is not a
// member.
func (g *Group) replica(name string) (Replica, bool) {
	r := g.raft()
	if r == nil || r.State() != raft.Leader {
		return Replica{}, false
	}
	s, ok := g.member(name)
	if !ok || s.ID == g.selfID() {
		return Replica{}, false
	}
	return g.trans().progress.replica(s, r.LastIndex(), g.n.mult, time.Now()), true
}

// RemoveServer takes the node named name out of the group for good (the
// leader only). A removed node's next incarnation is refused only if
// Config.Admit refuses it.
func (g *Group) RemoveServer(name string) error {
	r := g.raft()
	if r == nil {
		return ErrNotStarted
	}
	s, ok := g.member(name)
	if !ok {
		return fmt.Errorf("group %d: %q is not a member", g.id, name)
	}
	if err := r.RemoveServer(s.ID, 0, configTimeout).Error(); err != nil {
		return fmt.Errorf("group %d: remove %s: %w", g.id, s.ID, leaderErr(err))
	}
	return nil
}

// configTimeout bounds a membership change's wait to be appended.
const configTimeout = 5 * time.Second

// AppliedIndex is the index of the last entry applied to the FSM here.
func (g *Group) AppliedIndex() uint64 {
	if r := g.raft(); r != nil {
		return r.AppliedIndex()
	}
	return 0
}

// LastIndex is the index of the last entry in the log here.
func (g *Group) LastIndex() uint64 {
	if r := g.raft(); r != nil {
		return r.LastIndex()
	}
	return 0
}

// CommitIndex is the highest index this node knows to be committed.
func (g *Group) CommitIndex() uint64 {
	if r := g.raft(); r != nil {
		return r.CommitIndex()
	}
	return 0
}

// Stats is raft's own report (state, term, indexes, configuration...).
func (g *Group) Stats() map[string]string {
	if r := g.raft(); r != nil {
		return r.Stats()
	}
	return nil
}

// Repairing reports whether the group is not a full member on this node
// yet: it has not started, or it is in repair (it lost its state while
// the cluster exists, and takes no part in elections until the leader
// has caught it up and made it a voter again).
func (g *Group) Repairing() bool {
	t := g.trans()
	return t == nil || t.Repair()
}

// leaderErr maps raft's "not leader" errors to ErrNotLeader.
func leaderErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%w (%w)", ErrNotLeader, err)
	}
	return err
}

// errorFuture is an ApplyFuture that failed before reaching raft.
type errorFuture struct{ err error }

func (f errorFuture) Error() error  { return f.err }
func (f errorFuture) Response() any { return nil }
func (f errorFuture) Index() uint64 { return 0 }

// stoppable is a future of one raft instance that also ends, with
// raft.ErrRaftShutdown, once that instance has stopped (halt closed).
// raft answers every future it has taken, but not one still queued in
// its apply channel when it shuts down (buffered, with BatchApplyCh):
// waiting on such a future would never end, and a node's shutdown
// would hang on a partition's take, blocked in a barrier.
//
// The halt is loaded before the instance: a repair swapping both in
// between pairs a new instance's future with the old, closed halt,
// which ends the wait early (fate unknown, as a lost leadership),
// never late.
type stoppable struct {
	raft.ApplyFuture
	halt <-chan struct{}
	once sync.Once
	done chan struct{}
	err  error // set before done closes
}

// Stoppable wraps f, a future of the raft instance halt belongs to, so
// that waiting on it ends once that instance has stopped. It is the one
// bound on raft's futures: whatever drives a raft.Raft of its own (the
// engine's tests do) wraps its futures with it too.
func Stoppable(f raft.Future, halt <-chan struct{}) raft.ApplyFuture {
	af, ok := f.(raft.ApplyFuture)
	if !ok {
		af = barrierFuture{f}
	}
	return &stoppable{ApplyFuture: af, halt: halt, done: make(chan struct{})}
}

// Error waits for the instance's answer or its stop, whichever comes
// first. The instance's answer is awaited once, on its own goroutine:
// raft's futures are not safe to wait on from two.
func (f *stoppable) Error() error {
	f.once.Do(func() {
		go func() {
			f.err = f.ApplyFuture.Error()
			close(f.done)
		}()
	})
	select {
	case <-f.done:
		return f.err
	case <-f.halt:
		select {
		case <-f.done:
			return f.err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

// barrierFuture gives a plain future (a barrier's) the ApplyFuture
// methods stoppable embeds; it has no response.
type barrierFuture struct{ raft.Future }

func (barrierFuture) Response() any { return nil }
func (barrierFuture) Index() uint64 { return 0 }
