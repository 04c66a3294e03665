package jetstream

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Replication is what a clustered engine needs of the node's raft groups:
// group 0 is the meta group (the stream catalog and placement), groups
// 1..Partitions() are the shared partitions that carry replicated streams.
// The cluster package implements it; cmd wires the two.
type Replication interface {
	// NodeID is this node's name (the server name clients see).
	NodeID() string
	// ClusterName is what stream infos report as the cluster's name.
	ClusterName() string
	// Peers are the node ids of the cluster's members, this one included.
	Peers() []string
	// Partitions is the number of partition groups.
	Partitions() int
	// Group is raft group g.
	Group(g uint16) ReplicaGroup
	// Call asks node a question registered with Handle there, about
	// group; the answer is the handler's, or its error.
	Call(node, op string, group uint16, body []byte) ([]byte, error)
	// Handle registers fn to answer op; called by StartCluster only.
	Handle(op string, fn func(from string, group uint16, body []byte) ([]byte, error))
}

// ReplicaGroup is one raft group as the engine uses it.
type ReplicaGroup interface {
	// Apply proposes data; the future's Error is nil once a quorum has
	// stored it and this node's FSM has applied it.
	Apply(data []byte, timeout time.Duration) raft.ApplyFuture
	IsLeader() bool
	// Leader is the current leader's node id, "" when none is known.
	Leader() string
	// Barrier returns once every entry committed before it has been
	// applied here; only a leader may call it.
	Barrier(timeout time.Duration) error
	// ReadFence returns nil once this node is shown to have led the
	// group after the call began (see cluster.Group.ReadFence): an
	// answer read from the leader's memory before it is current.
	ReadFence(timeout time.Duration) error
	// TransferLeadership hands leadership to node to ("" for any other).
	TransferLeadership(to string) error
	// AwaitOtherLeader waits, at most timeout, until this node knows of
	// a leader other than itself, and returns it ("" if none by then).
	AwaitOtherLeader(timeout time.Duration) string
	// Replicas reports the other members as the leader sees them.
	Replicas() []Replica
	// ApplyMarker proposes an entry with no data, only ext as its
	// extensions (the digest check's marker); leader only.
	ApplyMarker(ext []byte, timeout time.Duration) raft.ApplyFuture
	// Members is the names of the group's members, this node's included.
	Members() []string
	// Repair discards this node's copy of the group and rejoins it as a
	// new member, caught up from the leader (see cluster.Group.Repair).
	Repair() error
}

// Replica is one member of a group as its leader last heard from it.
type Replica struct {
	Name    string
	Current bool
	Offline bool
	Active  time.Duration
	Lag     uint64
}

// partitionShift places a replicated stream's id inside its partition's
// range: partition p holds ids [p<<48, (p+1)<<48), so a partition's
// records are contiguous key ranges (its snapshot is a range scan) and an
// id names its group. Ids below 1<<48 are unreplicated (R1) streams.
const partitionShift = 48

// groupOf is the raft group of the stream with id; 0 for R1 streams.
func groupOf(id uint64) uint16 { return uint16(id >> partitionShift) }

// replicateTimeout bounds one proposal's wait for a quorum. Past it the
// entry's fate is unknown: it may still commit.
const replicateTimeout = 5 * time.Second

// errFateUnknown is the outcome of a proposal whose raft entry may or may
// not commit (leadership lost, no quorum in time). Nothing is said to the
// client then: a definite error for a write that later commits would be a
// lie, so the client's own timeout and retry (with Nats-Msg-Id dedup) take
// over, as with nats-server.
var errFateUnknown = &api.Error{Code: 503, ErrCode: api.CodeClusterNotAvailable,
	Description: "JetStream system temporarily unavailable"}

// errNotAppended is the outcome of a proposal that never reached the raft
// log (this node stopped leading before proposing it, or raft refused
// it): it did not happen and cannot happen, so the client is told. A
// publisher hears no responders, which stock clients retry, reaching the
// partition's new leader.
var errNotAppended = &api.Error{Code: 503, ErrCode: api.CodeClusterNotAvailable,
	Description: "JetStream system temporarily unavailable"}

// isNotAppended reports whether err is errNotAppended (by identity).
func isNotAppended(err error) bool { return isSentinel(err, errNotAppended) }

// isFateUnknown reports whether err (a proposal's outcome) must not be
// answered.
func isFateUnknown(err error) bool { return isSentinel(err, errFateUnknown) }

// isSentinel reports whether the first *api.Error in err's chain is
// target itself. It compares identity: *api.Error matches by code, and a
// real 10008 is an answer. A nil err, every successful publish's, returns
// before errors.As, whose target would escape: two allocations per
// acknowledgement otherwise.
func isSentinel(err error, target *api.Error) bool {
	if err == nil {
		return false
	}
	var ae *api.Error
	return errors.As(err, &ae) && ae == target
}

// replyFateUnknown reports whether resp, an API reply, carries
// errFateUnknown and so must not be sent.
func replyFateUnknown(resp any) bool { return replyCarries(resp, isFateUnknown) }

// replyCarries reports whether resp, an API reply, carries an error for
// which is reports true.
func replyCarries(resp any, is func(error) bool) bool {
	e, ok := resp.(interface{ ToError() error })
	return ok && is(e.ToError())
}

// clusterState is a clustered engine's view of the raft groups: the meta
// catalog every node keeps, and the partitions this node leads (each with
// the applier of its current leadership term).
type clusterState struct {
	e *Engine
	// r is set by StartCluster. Invariant: StartCluster runs before any
	// group's raft does (cluster.Open, StartCluster, then Node.Run), so
	// the state machines, which ask r who leads, never see it nil.
	r       Replication
	catalog *metaCatalog

	mu struct {
		sync.Mutex
		// parts holds, for each partition this node leads and has loaded,
		// the applier of this leadership term. Invariant: every stream
		// whose id lies in partition g and is live on this node uses
		// parts[g]; a term's applier is never reused by the next term.
		parts map[uint16]*applier // guarded by mu
		// unserved holds, by partition, meta entries applied while this
		// node did not serve the partition (see keepEntry): take runs
		// them once the partition is loaded here, so a request the
		// previous leader never got to answer is not lost to the
		// hand-over.
		unserved map[uint16][]keptEntry // guarded by mu
		// held holds, by partition, the API requests this node got as
		// the partition's leader before it served it (holdRequest);
		// heldBy and heldBytes count their sizes by account and in all.
		// Invariant: heldBytes is the sum of heldBy, which is the sum
		// of the sizes in held and handing; an account holding nothing
		// is not in heldBy.
		held      map[uint16]*heldQueue // guarded by mu
		heldBy    map[*jsAccount]int    // guarded by mu
		heldBytes int                   // guarded by mu
		// handing has an entry for each partition this node is handing
		// over (HandOver until its after): the API requests refused
		// meanwhile as never appended, to be sent again once the
		// transfer is done (deferRequest). Counted in heldBy and
		// heldBytes like held.
		handing map[uint16][]*heldRequest // guarded by mu
		// forget lists the unfinished restores' streams dropped before
		// the cluster started, for StartCluster to have the catalog
		// forget (forgetRestore). Guarded by mu.
		forget []*assignment
		// metaReady: this node leads the meta group and has applied every
		// entry committed before it became leader, so its catalog can
		// assign ids and check names.
		metaReady bool // guarded by mu
		// since holds, for each group this node leads (meta included),
		// when its leadership began: the cluster block's leader_since.
		since map[uint16]time.Time // guarded by mu
	}
	// accts holds what waits for accounts not registered here.
	accts accountWaits
	// nudging is set while a nudge barrier runs; nudgeAgain asks for
	// another once it ends (see nudgeMeta).
	nudging, nudgeAgain atomic.Bool
	// moves budgets the leadership moves stepdown requests make of the
	// partitions this node leads (stepdown).
	moves moveBudget
	// digests are this node's digests of its partitions' copies, for
	// the digest check (cluster_check.go).
	digests *digests
	// proposeMu serialises meta proposals on the meta leader: each is
	// checked against the catalog its predecessor left.
	proposeMu sync.Mutex
	// lead holds one channel per group for leadership changes (latest
	// wins), each drained by its own worker; set by StartCluster.
	lead atomic.Pointer[[]chan bool]
	// usages holds, by group, each partition's share of this node's
	// store (nil for the meta group); registered as each partition's
	// state machine is made (FSM), before any group runs.
	usages atomic.Pointer[[]*partUsage]
	// reloads, one per group, ask its worker for a fresh term (reload);
	// set by StartCluster before the workers start.
	reloads []chan struct{}
	wg      sync.WaitGroup
	quit    chan struct{}
}

func newClusterState(e *Engine) *clusterState {
	c := &clusterState{e: e, catalog: newMetaCatalog(), digests: newDigests(), quit: make(chan struct{})}
	c.mu.parts = map[uint16]*applier{}
	c.mu.unserved = map[uint16][]keptEntry{}
	c.mu.held = map[uint16]*heldQueue{}
	c.mu.heldBy = map[*jsAccount]int{}
	c.mu.handing = map[uint16][]*heldRequest{}
	c.mu.since = map[uint16]time.Time{}
	return c
}

// StartCluster connects a clustered engine (Options.Clustered) to the
// node's raft groups. Leadership changes reach the engine through
// LeaderChanged from then on. Call it before the groups run: their
// state machines use r from their first entry.
func (e *Engine) StartCluster(r Replication) error {
	c := e.cl
	if c == nil {
		return errors.New("jetstream: StartCluster on an engine not made with Options.Clustered")
	}
	c.mu.Lock()
	c.r = r
	forget := c.mu.forget
	c.mu.forget = nil
	c.mu.Unlock()
	lead := make([]chan bool, r.Partitions()+1)
	c.reloads = make([]chan struct{}, len(lead))
	for g := range c.reloads {
		c.reloads[g] = make(chan struct{}, 1)
	}
	for g := range lead {
		ch := make(chan bool, 1)
		lead[g] = ch
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.leadLoop(uint16(g), ch)
		}()
	}
	c.lead.Store(&lead)
	r.Handle(digestOp, c.serveDigest)
	r.Handle(repairOp, c.serveRepair)
	if e.opts.DigestInterval > 0 {
		c.wg.Add(1)
		go c.checkLoop(e.opts.DigestInterval)
	}
	c.loadCatalogAccounts()
	for _, f := range forget {
		c.forgetRestore(f.Account, f.Name, f.ID)
	}
	c.countReplicas()
	c.wg.Add(1)
	go c.countLoop()
	// A change raft reported before the channels existed was dropped;
	// the current state stands in for it.
	for g := range lead {
		if r.Group(uint16(g)).IsLeader() {
			e.LeaderChanged(uint16(g), true)
		}
	}
	return nil
}

// LeaderChanged tells the engine this node gained or lost leadership of
// group g. It never blocks: raft's goroutines call it.
func (e *Engine) LeaderChanged(g uint16, leader bool) {
	c := e.cl
	if c == nil {
		return
	}
	lead := c.lead.Load()
	if lead == nil || int(g) >= len(*lead) {
		return
	}
	ch := (*lead)[g]
	for {
		select {
		case ch <- leader:
			return
		default:
		}
		select {
		case <-ch: // drop the stale change: only the latest matters
		default:
		}
	}
}

// leadLoop applies group g's leadership changes in order, one at a time.
func (c *clusterState) leadLoop(g uint16, ch chan bool) {
	leading, want := false, false
	var retry <-chan time.Time
	reload := c.reloads[g]
	for {
		select {
		case <-c.quit:
			if leading && g != 0 {
				c.release(g)
			}
			return
		case want = <-ch:
		case <-retry:
			retry = nil
		case <-reload:
			// This node's term ended (an entry of unknown fate, a failed
			// hand-over) but raft still has it lead: drop the term, start
			// a fresh one. Only a term whose applier is lost is dropped:
			// a second request for the same ended term (entryLost's and
			// the hand-over's both) arriving after the fresh term started
			// would otherwise end that one too.
			if ap := c.partition(g); leading && g != 0 && ap != nil && ap.lost.Load() {
				c.release(g)
				leading = false
			}
		}
		if want == leading {
			continue
		}
		switch {
		case g == 0:
			leading = want && c.takeMeta()
			if !leading {
				c.ledSince(0, time.Time{})
			}
		case want:
			leading = c.take(g)
		default:
			c.release(g)
			leading = false
		}
		if want && !leading {
			// Raft says leader but the take failed (a barrier timed
			// out): try again, or the group would stay unserved.
			retry = time.After(retakeAfter)
		}
	}
}

// HandOver readies partition g for a planned transfer of its leadership
// away from this node (see cluster.Group.OnHandOver). The term ends with
// it: the partition's applier proposes nothing more (what arrives is
// refused as never appended, which a publisher retries, reaching the new
// leader), and HandOver waits, at most wait, for the entries already
// proposed to commit, so their proposers are answered instead of left
// with an unknown fate. If the transfer then fails while this node still
// leads, a fresh term reloads the partition. Not for the meta group,
// whose entries are answered by whoever applies them.
//
// An API request refused meanwhile (a consumer create, a purge) is not
// told 10008 but kept (deferRequest) and published again into its
// account once the transfer is done, so that whoever serves the
// partition then, the new leader or this node again, answers it: a
// planned move is invisible to API clients as it is to publishers.
func (e *Engine) HandOver(g uint16, wait time.Duration) (after func(err error)) {
	c := e.cl
	if c == nil || g == 0 {
		return func(error) {}
	}
	ap := c.partition(g)
	if ap == nil {
		return func(error) {}
	}
	c.mu.Lock()
	if _, ok := c.mu.handing[g]; !ok {
		c.mu.handing[g] = nil // another transfer's requests are kept
	}
	c.mu.Unlock()
	ap.lost.Store(true)
	if !ap.waitIdle(wait) {
		e.log.Warn("jetstream partition hand-over: entries still in flight", "group", g, "waited", wait)
	}
	return func(err error) {
		c.mu.Lock()
		deferred := c.mu.handing[g]
		delete(c.mu.handing, g)
		if err != nil {
			// Still leading, most likely: the fresh term's take runs
			// them, as a new leader's held requests.
			for _, h := range deferred {
				c.queueHeldLocked(g, h)
			}
			c.mu.Unlock()
			c.reload(g)
			return
		}
		for _, h := range deferred {
			c.unholdLocked(h)
		}
		c.mu.Unlock()
		// The group knows its new leader by now (the transfer waits for
		// it), which holds or serves them.
		for _, h := range deferred {
			h.a.acc.Publish(string(h.subject), string(h.reply), h.hdr, h.msg)
		}
	}
}

// retakeAfter is how long a failed take waits before it is tried again.
const retakeAfter = 250 * time.Millisecond

// reload asks group g's worker to end this node's term and start a new
// one if it still leads. It never blocks.
func (c *clusterState) reload(g uint16) {
	if int(g) < len(c.reloads) {
		select {
		case c.reloads[g] <- struct{}{}:
		default:
		}
	}
}

// takeMeta readies this node's catalog for proposals once it leads the
// meta group and has applied everything committed before.
func (c *clusterState) takeMeta() bool {
	grp := c.r.Group(0)
	if err := grp.Barrier(replicateTimeout); err != nil {
		c.e.log.Warn("jetstream meta leadership: barrier failed", "err", err)
		return false
	}
	c.mu.Lock()
	c.mu.metaReady = grp.IsLeader()
	c.mu.since[0] = time.Now()
	c.mu.Unlock()
	return true
}

// metaLeader reports whether this node may decide meta operations now.
func (c *clusterState) metaLeader() bool {
	c.mu.Lock()
	ready := c.mu.metaReady
	c.mu.Unlock()
	return ready && c.r != nil && c.r.Group(0).IsLeader()
}

// take loads partition g's streams after this node became its leader:
// once every committed entry is applied here, a new applier (this term's)
// is started and each stream of the partition is read from the store, as
// start-up reads streams, and attached. Streams the catalog assigns to g
// that the partition does not hold yet are created, those it deleted are
// removed (dropOrphans), and the meta entries kept for g (keepEntry) are
// run, answering what the previous leader did not.
func (c *clusterState) take(g uint16) bool {
	grp := c.r.Group(g)
	if err := grp.Barrier(replicateTimeout); err != nil {
		c.e.log.Warn("jetstream partition leadership: barrier failed", "group", g, "err", err)
		return false
	}
	e := c.e
	ap := newApplier(e, e.opts.Store, 0, e.opts.MaxFileStore)
	ap.group, ap.g = grp, g
	ap.nodeUsed = e.fileStoreUsed
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ap.run()
	}()
	lo, hi := uint64(g)<<partitionShift, uint64(g+1)<<partitionShift
	streams, err := e.recoverRange(ap, lo, hi)
	if err != nil {
		e.log.Error("jetstream partition leadership: loading streams failed; stepping down", "group", g, "err", err)
		ap.lost.Store(true)
		ap.close()
		_ = grp.TransferLeadership("")
		return false
	}
	streams = c.dropOrphans(g, streams)
	streams, unfinished := splitUnfinished(streams)
	e.dropUnfinished(unfinished)
	have, cut := map[uint64]bool{}, map[uint64]bool{}
	for _, s := range streams {
		have[s.id] = true
	}
	for _, s := range unfinished {
		// Not made again, empty (materialize), nor restored again from
		// its kept request (the client sends its chunks to the node it
		// first heard from): the catalog forgets it.
		have[s.id], cut[s.id] = true, true
	}
	e.adopt(streams)
	for _, s := range streams {
		if e.account(s.account) == nil {
			c.needAccount(s.account, nil) // held until it registers
		}
	}
	// Only now is the partition served here: a request for one of its
	// streams must find the stream loaded.
	c.mu.Lock()
	c.mu.parts[g] = ap
	kept := c.mu.unserved[g]
	delete(c.mu.unserved, g)
	held := c.takeHeldLocked(g)
	c.mu.Unlock()
	if u := c.usage(g); u != nil {
		u.led.Store(ap)
	}
	now := e.opts.Now()
	restoring := map[uint64]bool{} // restores whose request is kept
	for _, k := range kept {
		if k.ent.Asg.Restore && k.live(now) && !cut[k.ent.Asg.ID] {
			restoring[k.ent.Asg.ID] = true
		}
	}
	for _, asg := range c.catalog.inGroup(g) {
		// A restore whose request is kept runs from it below.
		if !have[asg.ID] && !restoring[asg.ID] {
			c.materialize(asg)
		}
	}
	c.ledSince(g, time.Now())
	for _, k := range kept {
		if k.live(now) && !cut[k.ent.Asg.ID] {
			c.serveEntry(k.ent)
		}
	}
	runHeld(held)
	e.log.Info("jetstream partition led here", "group", g, "streams", len(streams))
	return true
}

// release drops partition g's streams from this node after it stopped
// leading: its applier is closed (what it still held has an unknown
// fate), its consumers stop without writing, and its streams leave their
// accounts. Their data stays in the store, which the group's new leader
// keeps replicating here.
func (c *clusterState) release(g uint16) {
	c.mu.Lock()
	ap := c.mu.parts[g]
	delete(c.mu.parts, g)
	delete(c.mu.since, g)
	c.mu.Unlock()
	if ap == nil {
		return
	}
	if u := c.usage(g); u != nil {
		// Counted now, not at the next tick: until then the node's
		// usage would leave the partition out. An entry applied from
		// here on marks it for the next count again.
		u.dirty.Store(false)
		c.recount(g, u)
		u.led.Store(nil)
	}
	ap.lost.Store(true)
	c.e.dropStreamsOf(ap)
	ap.close()
	c.e.log.Info("jetstream partition no longer led here", "group", g)
}

// partition is the applier of the term in which this node leads g, or
// nil.
func (c *clusterState) partition(g uint16) *applier {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.parts[g]
}

// close stops the leadership workers (releasing led partitions).
func (c *clusterState) close() {
	close(c.quit)
	c.wg.Wait()
}

// clusterInfo is the cluster block of a stream's or consumer's info.
func (c *clusterState) clusterInfo(id uint64) *api.ClusterInfo {
	if c == nil || c.r == nil {
		return nil
	}
	g := groupOf(id)
	if g == 0 {
		return &api.ClusterInfo{Name: c.r.ClusterName(), Leader: c.r.NodeID()}
	}
	return &api.ClusterInfo{Name: c.r.ClusterName(), RaftGroup: fmt.Sprintf("P%d", g), Leader: c.r.Group(g).Leader(),
		LeaderSince: c.leaderSince(g), Replicas: c.clusterPeers(g)}
}

// maxEntriesInFlight bounds a partition applier's groups proposed and not
// yet committed: enough for raft to gather several into one append (and
// one fsync), few enough that a term's loss strands little.
const maxEntriesInFlight = 64

// replicateLoop is the commit step of a partition's applier, in place of
// commitLoop: each applied group's batch becomes one raft entry, proposed
// at once (so raft batches entries proposed meanwhile into one append),
// and a second goroutine finishes the groups in order as their entries
// commit on a quorum and are applied to this node's store by the
// partition's FSM.
func (ap *applier) replicateLoop() {
	type inFlight struct {
		job *commitJob
		f   raft.ApplyFuture // nil: nothing to replicate, or refused
		err error
	}
	pending := make(chan inFlight, maxEntriesInFlight)
	// Groups are released as their entries commit and completed on
	// another goroutine: completing one may wait for a stream's lock that
	// the apply goroutine holds while it waits in visible() for every
	// group in flight to be released. Invariant: the finisher never waits
	// for the completer. At most maxEntriesInFlight+2 groups are ever in
	// flight (pending's, the one the loop below holds, the finisher's),
	// and the apply goroutine starts no new one while it waits, so the
	// completions buffer always has room.
	completions := make(chan inFlight, maxEntriesInFlight+2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range completions {
			ap.complete(p.job, p.err)
		}
	}()
	go func() {
		defer close(completions)
		for p := range pending {
			if p.err == nil && p.f != nil {
				if p.err = waitEntry(p.f); p.err != nil {
					p.err = ap.entryLost(p.err)
				}
			}
			if p.err == nil && ap.onCommit != nil {
				ap.onCommit()
			}
			ap.release(p.job, p.err)
			completions <- p
		}
	}()
	for job := range ap.jobs {
		p := inFlight{job: job}
		switch {
		case ap.lost.Load():
			p.err = errNotAppended // never proposed
		case job.batch.Count() > 0:
			// A copy: the batch goes back to its pool once the group
			// finishes, while raft's log cache and transport keep it.
			p.f = ap.group.Apply(bytes.Clone(job.batch.Repr()), replicateTimeout)
		}
		pending <- p
	}
	close(pending)
	<-done
}

// commitWait bounds the wait for one entry's commit. hashicorp/raft
// answers every future it dispatched, but not one still queued for its
// leader loop when the group shuts down; and an entry not committed in
// this long has an unknown fate anyway.
const commitWait = 10 * time.Second

// errCommitWait is waitEntry's error for an entry not answered in time.
var errCommitWait = errors.New("jetstream: raft entry not answered in time")

// waitEntry waits for f's outcome, at most commitWait.
func waitEntry(f raft.ApplyFuture) error { return waitEntryOr(f, nil) }

// waitEntryOr is waitEntry that also gives up when stop closes.
func waitEntryOr(f raft.ApplyFuture, stop <-chan struct{}) error {
	ch := make(chan error, 1)
	go func() { ch <- f.Error() }()
	t := time.NewTimer(commitWait)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return errCommitWait
	case <-stop:
		return errCommitWait
	}
}

// entryLost handles a proposal whose entry did not commit in this term:
// it may still commit under the next leader, and this term's memory may
// be ahead of what commits, so the term ends (the next leader, maybe this
// node again, reloads from the store) and nobody is answered.
func (ap *applier) entryLost(err error) error {
	if !ap.lost.Swap(true) {
		ap.e.log.Warn("jetstream partition entry not committed; leaving the partition", "err", err)
		if ap.group.IsLeader() {
			go func() {
				if ap.group.TransferLeadership("") != nil && ap.group.IsLeader() {
					// Nobody took over: lead on with a fresh term
					// rather than with one that answers nothing.
					ap.e.cl.reload(ap.g)
				}
			}()
		}
	}
	if neverAppended(err) {
		return errNotAppended
	}
	return errFateUnknown
}

// neverAppended reports whether raft refused an entry before putting it
// in its log: it can never commit, so the client may be told.
func neverAppended(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout)
}
