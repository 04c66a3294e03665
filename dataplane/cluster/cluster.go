// Package cluster runs a node's raft groups: the meta group (0) and the
// shared partitions (1..P), each a hashicorp/raft instance whose traffic
// shares the node's one cluster port through package mux.
//
// The caller supplies each group's FSM and stores; this package decides
// how the group starts (bootstrap of a fresh cluster, restart, or rejoin
// of a node that lost its state), keeps a node that lost its state out of
// elections until it is repaired, reports each follower's progress to
// the leader, and spreads partition leadership over the nodes.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster/mux"
)

// MetaGroup is the raft group that holds cluster-wide metadata.
const MetaGroup uint16 = 0

// DefaultPartitions is P, the number of shared partition groups: one
// per node of a three-node cluster. Each group's heartbeats cost an idle
// node more than anything else it does (docs/architecture.md,
// "Topology"), and on a three-node cluster three partitions still give
// every node one to lead.
const DefaultPartitions = 3

// Sentinel errors callers branch on.
var (
	// ErrNotLeader is returned by calls only a group's leader may make.
	ErrNotLeader = errors.New("cluster: not the group leader")
	// ErrNotStarted is returned while a group waits to learn whether
	// to bootstrap or rejoin.
	ErrNotStarted = errors.New("cluster: group not started")
	// ErrClosed is returned once the node is shut down.
	ErrClosed = errors.New("cluster: node closed")
	// ErrSelfTransfer is a leadership transfer to the node that asks:
	// refused before the group's hand-over hooks pause anything.
	ErrSelfTransfer = errors.New("cluster: leadership transfer to this node")
	// ErrNotLive is a leadership transfer with no other voter that
	// answered the leader lately to hand over to (transferTarget).
	ErrNotLive = errors.New("cluster: no other voter answering the leader")
	// ErrNotCurrent is the answer to a balancing move towards a member
	// the group's leader does not see as a current voter.
	ErrNotCurrent = errors.New("cluster: transfer target is not a current voter of the group")
	// ErrFenceTimeout is a read fence that was not proved in time: the
	// group commits nothing meanwhile, or too slowly.
	ErrFenceTimeout = errors.New("cluster: read fence timed out")
)

// OpenFunc returns a group's FSM and stores. The stores keep the group's
// state across restarts; an FSM must skip entries at or below the index
// it has already applied (raft replays the log above the last snapshot
// on start, and NoSnapshotRestoreOnStart is set).
type OpenFunc func(group uint16) (raft.FSM, raft.LogStore, raft.StableStore, raft.SnapshotStore, error)

// Config is what a Node needs from its caller.
type Config struct {
	// Name is this node's name; its raft ids are derived from it.
	Name string
	// Peers maps every node's name, this one's included, to its
	// cluster address.
	Peers map[string]string
	// Mux is the cluster port. The node listens on KindRaft channels
	// 0..Partitions and on KindControl channel 0.
	Mux *mux.Mux
	// Partitions is P (default DefaultPartitions).
	Partitions int
	// Open is called once per group, in order, by Start.
	Open OpenFunc
	// Log receives the node's and raft's logging (default slog.Default).
	Log *slog.Logger
	// TimingMultiplier scales raft's heartbeat, election and lease
	// timeouts and the thresholds that follow from them: 1 on a LAN,
	// about 4 on busy cloud VMs. Default 1.
	TimingMultiplier int
	// CommitTimeout is how long the meta group's leader with nothing
	// new to send waits before telling its followers the commit index
	// again (default 500 ms). Followers apply an entry only once they
	// learn it is committed, so this bounds how far a follower's FSM
	// trails the leader's after the last write of a burst; while writes
	// flow every append carries the commit index, and an entry carrying
	// a request is followed by a barrier that carries it at once (the
	// engine's nudge), so no answer waits for this. Commits on the
	// leader do not wait for it: new entries are sent at once.
	CommitTimeout time.Duration
	// PartitionCommitTimeout is CommitTimeout for the partitions
	// (default 500 ms). A partition's followers serve nothing from what
	// they applied (its leader answers; a new leader first applies
	// everything committed), so their lag after a burst costs nothing.
	// Long, it halves a partition's idle traffic with the heartbeat
	// thinning (see heartbeatThin).
	PartitionCommitTimeout time.Duration
	// TrailingLogs is how many entries a snapshot leaves in the log
	// (default 1024). Snapshots are cheap on the Pebble store, so a
	// follower further behind than this is sent one.
	TrailingLogs uint64
	// SnapshotThreshold is how many new entries start a snapshot
	// (default 1024).
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks the threshold (default 30 s).
	SnapshotInterval time.Duration
	// BalanceInterval is how often the meta leader evens out partition
	// leadership (default 1 s × TimingMultiplier; negative: never).
	BalanceInterval time.Duration
	// Admit, if set, says whether a node that lost its state may rejoin
	// a group under a new incarnation (for example, refuse a node that
	// was removed from the cluster). Names outside Peers are refused
	// whatever it says.
	Admit func(group uint16, name string) error
	// Reset, if set, discards everything this node holds of a group (its
	// raft log and stable values, snapshots and the state its FSM keeps)
	// and marks it for repair, durably. Group.Repair calls it while the
	// group is stopped, then Open again.
	Reset func(group uint16) error
}

func (c *Config) setDefaults() {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.TimingMultiplier == 0 {
		c.TimingMultiplier = 1
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 500 * time.Millisecond
	}
	if c.PartitionCommitTimeout == 0 {
		c.PartitionCommitTimeout = 500 * time.Millisecond
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 1024
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 1024
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 30 * time.Second
	}
	if c.BalanceInterval == 0 {
		c.BalanceInterval = time.Second * time.Duration(c.TimingMultiplier)
	}
}

// validate reports every problem at once.
func (c *Config) validate() error {
	var errs []error
	if err := checkName(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("name: %w", err))
	}
	if _, ok := c.Peers[c.Name]; !ok {
		errs = append(errs, fmt.Errorf("peers: this node (%q) is not listed", c.Name))
	}
	for name, addr := range c.Peers {
		if err := checkName(name); err != nil {
			errs = append(errs, fmt.Errorf("peers: %w", err))
		}
		if addr == "" {
			errs = append(errs, fmt.Errorf("peers: %q has no address", name))
		}
	}
	if c.Mux == nil {
		errs = append(errs, errors.New("mux: missing"))
	}
	if c.Open == nil {
		errs = append(errs, errors.New("open: missing"))
	}
	if c.Partitions < 0 || c.Partitions >= 1<<16-1 {
		errs = append(errs, fmt.Errorf("partitions: %d out of range", c.Partitions))
	}
	if c.TimingMultiplier < 0 {
		errs = append(errs, fmt.Errorf("timing multiplier: %d is negative", c.TimingMultiplier))
	}
	return errors.Join(errs...)
}

// checkName accepts names that fit a raft id with its incarnation and
// cannot be confused with one.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty node name")
	case len(name) > 200:
		return fmt.Errorf("node name %q too long", name)
	case strings.ContainsAny(name, "# \t\r\n"):
		return fmt.Errorf("node name %q contains '#' or white space", name)
	}
	return nil
}

// Node runs one node's raft groups.
type Node struct {
	cfg  Config
	mult time.Duration
	log  *slog.Logger
	// groups[g] is group g. Fixed after Open.
	groups []*Group
	ctl    *mux.Listener

	closing  chan struct{}
	closed   sync.Once
	wg       sync.WaitGroup
	draining atomic.Bool
	// rounds counts the discovery rounds run (tests wait on it).
	rounds atomic.Uint64
	// handlers are the registered control operations.
	handlers struct {
		sync.Mutex
		m map[string]Handler
	}
}

// Start opens the node (Open) and runs its groups (Run). It returns
// without waiting for elections.
func Start(cfg Config) (*Node, error) {
	n, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.Run(); err != nil {
		return nil, err
	}
	return n, nil
}

// Open opens every group's stores and serves the control channel, but
// runs no raft yet: no FSM applies an entry and no leadership changes
// until Run. A caller whose state machines need the node (the engine
// asks its groups who leads while it applies) wires it in between.
func Open(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	n := &Node{
		cfg:     cfg,
		mult:    time.Duration(cfg.TimingMultiplier),
		log:     cfg.Log.With("node", cfg.Name),
		closing: make(chan struct{}),
	}
	for g := 0; g <= cfg.Partitions; g++ {
		grp, err := n.openGroup(uint16(g))
		if err != nil {
			n.Close()
			return nil, err
		}
		n.groups = append(n.groups, grp)
	}
	ctl, err := cfg.Mux.Listen(mux.KindControl, 0)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: control channel: %w", err)
	}
	n.ctl = ctl
	n.wg.Add(1)
	go n.serveControl()
	return n, nil
}

// Run starts the groups Open opened: at once for those with state on this
// node, and, for those without, once the peers have said whether the
// cluster already exists (see docs/architecture.md, "Starting a group").
// Call it once; on an error the node is closed.
func (n *Node) Run() error {
	cfg := n.cfg
	var undecided []*Group
	for _, g := range n.groups {
		if g.open.id == "" {
			undecided = append(undecided, g)
			continue
		}
		if err := g.launch(g.open.id, false); err != nil {
			n.Close()
			return err
		}
	}
	if len(undecided) > 0 {
		n.wg.Add(1)
		go n.discover(undecided)
	}
	if cfg.BalanceInterval > 0 {
		n.wg.Add(1)
		go n.balance()
	}
	return nil
}

// Name is this node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Groups returns every group, the meta group first; Groups()[g] is group g.
func (n *Node) Groups() []*Group { return n.groups }

// Group returns group g, or nil if there is none.
func (n *Node) Group(g uint16) *Group {
	if int(g) >= len(n.groups) {
		return nil
	}
	return n.groups[g]
}

// retry is the pause between attempts of the node's background loops
// (discovery, rejoin): an election timeout or two.
func (n *Node) retry() time.Duration { return 250 * time.Millisecond * n.mult }

// sleep waits d or until the node closes, and reports whether it is
// still open.
func (n *Node) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.closing:
		return false
	}
}

// Shutdown is the planned stop: the node hands every group it leads to
// another member (LeadershipTransfer), so the groups need no election,
// then stops. Transfers still running when ctx ends are abandoned.
func (n *Node) Shutdown(ctx context.Context) error {
	n.draining.Store(true)
	for _, g := range n.groups {
		if t := g.trans(); t != nil {
			t.draining.Store(true)
		}
	}
	var wg sync.WaitGroup
	for _, g := range n.groups {
		if !g.IsLeader() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.TransferLeadership(""); err != nil && !errors.Is(err, ErrNotLeader) {
				n.log.Warn("shutdown: leadership transfer failed", "group", g.id, "err", err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return n.Close()
}

// Close stops every group at once, without handing leadership over: the
// other members notice the silence and elect. It closes the node's
// channels on the cluster port, not the mux.
func (n *Node) Close() error {
	var errs []error
	n.closed.Do(func() {
		close(n.closing)
		if n.ctl != nil {
			n.ctl.Close()
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, g := range n.groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := g.shutdown(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		n.wg.Wait()
	})
	return errors.Join(errs...)
}
