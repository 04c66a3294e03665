package jetstream

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// propKind names what a proposal asks a stream to do.
type propKind uint8

const (
	propMsg propKind = iota + 1
	propDelete
	propPurge
	propExpire
	propCreate
	propUpdate
	propRemove
	propAcked
	propConsumerCreate
	propConsumerState
	propConsumerDelete
	propInterestCheck
	// propSync changes nothing: applied, it shows that everything
	// submitted for the stream before it has been applied.
	propSync
	// propSubjects builds the stream's per-subject summaries, kept up to
	// date from then on (STREAM.INFO's num_subjects).
	propSubjects
	// propColdIntent records an upload about to start (coldKey);
	// propColdCommit commits an uploaded segment (cold); propColdForget
	// removes the pending record of a deleted object (stream seq,
	// coldKey) and belongs to no stream (cold.go, cold_mover.go).
	propColdIntent
	propColdCommit
	propColdForget
	// propColdRewrite replaces the object of segment cold (coldKey, the
	// old one) by a rewritten one.
	propColdRewrite
	// propBatch stores an atomic batch (batch): every message or none.
	propBatch
	// propFastBatch is one message of a fast batch (fast, fastbatch.go).
	propFastBatch
	// propRestoreEnd ends a restore's messages: the stream's last
	// sequence moves to the backup's (rst), past messages deleted at its
	// end, and its sources' progress is the backup's (api_restore.go).
	propRestoreEnd
	// propRestoreDone marks a restore's stream filled: its record loses
	// the restoring mark (api_restore.go).
	propRestoreDone
)

// proposal is one change to one stream, on its way through the apply path.
// It holds its own copies of every byte it carries.
type proposal struct {
	s    *stream
	acct *jsAccount
	kind propKind
	// propMsg
	subject, reply string
	hdr, data      []byte
	// scheduled marks a message a stream's schedule produced, which skips
	// the checks of a client's scheduling headers (schedule.go).
	scheduled bool
	// src, on a propMsg, is where a mirrored or sourced message came
	// from (source.go).
	src *sourcedMsg
	// rst, on a propMsg, is the sequence and time a restored message
	// comes back with; on a propRestoreEnd, the backup's last sequence
	// and its time (api_restore.go).
	rst *restoredMsg
	// propDelete; propInterestCheck: where to start
	seq   uint64
	erase bool
	// propPurge
	purge api.StreamPurgeRequest
	// propUpdate
	cfg *api.StreamConfig
	// propAcked: acknowledged sequences; propConsumer*: the consumer
	seqs []uint64
	cons *consumer
	// propCold*
	coldKey string
	cold    *sealed
	// done receives the outcome once it is durable (or failed); it runs on
	// the applier goroutine and must be quick.
	done func(*proposal, result)
	// held is what a captured message holds of its stream's ingest
	// backlog (flow.go) until done; fixed at capture, since applying may
	// rewrite the subject.
	held int64
	// propBatch: the committed batch. pre, on a propMsg, carries the
	// header checks a batch already ran for it (batch_apply.go). fast,
	// on a propFastBatch: what its reply subject says (fastbatch.go).
	batch *atomicCommit
	pre   *prechecked
	fast  *fastMsg
}

// result is the outcome of a proposal.
type result struct {
	seq    uint64
	dup    bool
	purged uint64
	err    error // *api.Error for refusals, anything else for I/O failure
	// skipped marks a mirrored or sourced message the stream refused (a
	// limit) in the apply step, which moved the source's progress past
	// it in the same batch: it counts as taken (sourcer.applied). Set
	// only with err, which a failed commit does not replace (complete).
	skipped bool
	// val is a counter stream's new total (counter.go), for the PubAck.
	val string
}

// applier is the apply path of one store, and the node's one group-commit
// mechanism. One goroutine (run) takes the proposals submitted meanwhile,
// a bounded share of each account's (takeLocked), and applies them, each
// stream's in submission order and under its stream's lock, into one
// batch; a second goroutine (commitLoop) commits each batch with one fsync
// and only then completes its proposals. While one group is being synced
// the next one is applied, and grows with whatever arrives until the
// commit step is free for it, so publishes share fsyncs and the disk is
// kept busy, and an acknowledgement never precedes durability.
//
// Invariants: a proposal's done runs only after everything it wrote was
// synced, or with an error; batches commit in the order they were applied;
// after a failed commit the applier refuses all further work, because
// memory and disk may then disagree. A group is one atomic batch and
// nothing else is ever committed: apply steps that must read the group's
// own writes read them through the batch (see visible), and the group's
// last writes are the state summaries of the streams it changed (see
// writeStates), so whatever a crash keeps is a prefix of whole groups,
// each with the summaries that describe it.
type applier struct {
	e            *Engine
	st           *store.Store
	syncInterval time.Duration
	// max is the server's limit on what this store's streams hold (0: no
	// limit); used is what they hold now.
	max  int64
	used atomic.Int64
	// nodeUsed, when set, is what max is checked against in place of
	// used: the file store's appliers (R1 and each led partition) share
	// one store and so one limit (see cluster_usage.go).
	nodeUsed func() int64

	mu struct {
		sync.Mutex
		// ready lists the streams with proposals waiting, in the order
		// they are taken; queued holds each one's waiting proposals.
		ready   []*streamQueue           // guarded by mu
		queued  map[*stream]*streamQueue // guarded by mu
		closing bool                     // guarded by mu
		// inflight counts batches handed to commitLoop and not yet
		// committed; idle is signalled when it drops to zero.
		inflight int        // guarded by mu
		fail     error      // the first commit failure; guarded by mu
		idle     *sync.Cond // on mu
	}
	work chan struct{} // capacity 1: the queue became non-empty
	jobs chan *commitJob
	// busy counts the groups handed to commitLoop and not yet finished
	// (committed and completed); free (capacity 1) is signalled as each
	// one finishes. Together they let the apply goroutine grow the next
	// group while the commit step is busy (run). Unused by a partition's
	// applier.
	busy  atomic.Int32
	free  chan struct{}
	batch *store.Batch // the group being applied; run goroutine only
	// rd is what apply steps read: the store, or once a step of this
	// group has asked to read its writes (visible), the store through the
	// group's batch. Run goroutine only.
	rd *store.Store
	// states holds the state summary of each stream the group changed, as
	// its latest proposal left it, and slot finds a stream's entry. A
	// summary is written once per group, not once per message. Run
	// goroutine only.
	states []pendingState
	slot   map[*stream]int
	// served and shares are takeLocked's scratch: the streams it took
	// from that have more waiting, and what each owner took. Run
	// goroutine only (under mu).
	served []*streamQueue
	shares map[any]takeShare
	// passed counts the streams the last take left out because their
	// account's share went to its other streams. Run goroutine only
	// (under mu).
	passed int
	// committed pairs each of those streams with its last sequence, to
	// publish as durable once the group commits.
	committed []streamSeq // run goroutine only
	done      chan struct{}

	// Lazy sync's clock (syncInterval > 0): now and after default to the
	// time package; tests set them before the first proposal.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
	// onCommit, when set (tests only), runs after every group's commit,
	// before the next: the crash tests take a crash image there.
	// beforeCommit (tests only) runs before each group's commit, so a
	// test can hold a group in flight with none of its writes in the
	// store; onWait (tests only) runs when an apply step starts waiting
	// for the groups in flight (visible).
	onCommit, beforeCommit, onWait func()
	// group, for a partition's applier, is the raft group whose commit
	// replaces the local one (replicate); nil for the node's own stores.
	group ReplicaGroup
	g     uint16 // the partition group's number
	// garbage is set by an apply step that queued an object for the
	// tier's deleter (cold.go), which is told once the group commits.
	// Run goroutine only.
	garbage bool
	// lost is set once a partition's applier must write nothing more:
	// leadership ended or an entry's fate became unknown.
	lost atomic.Bool
	// gen numbers the group being applied (from 1; run goroutine only),
	// and doneGen is the newest group whose commit succeeded. Groups
	// commit in order, so every group up to doneGen is in the store:
	// what a stream removed in them is gone from it (see
	// stream.committedLiveLocked).
	gen     uint64
	doneGen atomic.Uint64
}

// pendingState is a stream's state summary waiting for the group's
// commit; removed marks a stream deleted later in the group, whose
// summary must not be written.
type pendingState struct {
	s       *stream
	st      store.StreamState
	removed bool
}

// commitJob is one applied group on its way to stable storage.
type commitJob struct {
	batch     *store.Batch
	group     []*proposal
	results   []result
	committed []streamSeq
	// garbage says the group queued objects for the tier's deleter.
	garbage bool
	gen     uint64 // the group's number (applier.gen)
}

// markDirty records s's current state summary for the group's commit and
// clears s.mu.dirty. Called with s.mu held at the end of every proposal
// that changed the state, so the recorded summary is the state the
// stream's last proposal in the group left, which is what the group's
// writes imply.
func (ap *applier) markDirty(s *stream) {
	s.mu.dirty = false
	if i, ok := ap.slot[s]; ok {
		ap.states[i].st = s.mu.state
		return
	}
	ap.slot[s] = len(ap.states)
	ap.states = append(ap.states, pendingState{s: s, st: s.mu.state})
}

// forgetState drops s's pending summary: s was removed in this group, and
// a summary written after its DeleteStream would bring a record back.
// Called with s.mu held.
func (ap *applier) forgetState(s *stream) {
	if i, ok := ap.slot[s]; ok {
		ap.states[i].removed = true
	}
}

// writeStates adds the pending state summaries to the batch as the group's
// last writes, notes each stream's last sequence to mark durable once the
// group commits, and starts the next group's list.
func (ap *applier) writeStates() {
	for i, p := range ap.states {
		if !p.removed {
			ap.batch.PutStreamState(p.s.id, p.st)
			ap.committed = append(ap.committed, streamSeq{p.s, p.st.LastSeq})
		}
		ap.states[i] = pendingState{}
	}
	ap.states = ap.states[:0]
	clear(ap.slot)
}

func newApplier(e *Engine, st *store.Store, syncInterval time.Duration, max int64) *applier {
	ap := &applier{e: e, st: st, syncInterval: syncInterval, max: max,
		work: make(chan struct{}, 1), jobs: make(chan *commitJob), free: make(chan struct{}, 1), done: make(chan struct{}),
		slot: map[*stream]int{}, now: time.Now, after: time.After}
	ap.mu.idle = sync.NewCond(&ap.mu.Mutex)
	return ap
}

// failed is the commit failure that stopped the applier, or nil.
func (ap *applier) failed() error {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return ap.mu.fail
}

// full reports whether the store's streams already hold the server's limit.
func (ap *applier) full() bool {
	if ap.max <= 0 {
		return false
	}
	if ap.nodeUsed != nil {
		return ap.nodeUsed() >= ap.max
	}
	return ap.used.Load() >= ap.max
}

// streamQueue is one stream's proposals waiting to be applied, in
// submission order.
type streamQueue struct {
	s     *stream
	props []*proposal
}

// What one account (one stream, on a partition: see shareOwner)
// contributes to a take at most: a take is applied before anything
// submitted after it, so this bounds how long one account's backlog
// delays every other account's work, while still letting a busy stream
// share each fsync among hundreds of messages.
const (
	groupShareMsgs  = 256
	groupShareBytes = 1 << 20
)

// submit queues p; false means the applier is closed (p.done is not run).
func (ap *applier) submit(p *proposal) bool {
	ap.mu.Lock()
	if ap.mu.closing {
		ap.mu.Unlock()
		return false
	}
	first := len(ap.mu.ready) == 0
	q := ap.mu.queued[p.s]
	if q == nil {
		if ap.mu.queued == nil {
			ap.mu.queued = map[*stream]*streamQueue{}
		}
		q = &streamQueue{s: p.s}
		ap.mu.queued[p.s] = q
		ap.mu.ready = append(ap.mu.ready, q)
	}
	q.props = append(q.props, p)
	ap.mu.Unlock()
	if first {
		select {
		case ap.work <- struct{}{}:
		default:
		}
	}
	return true
}

// takeLocked takes the next group: from each account with work waiting,
// its oldest proposals up to its share, drawn from its streams in turn
// (see shareOwner). Each stream's proposals stay in submission order;
// different streams' need not (nothing orders them but a submitter that
// waits for the outcome, as API requests do). A stream with more waiting
// keeps its turn for the next group, behind its account's streams that
// got nothing this time, so an account's backlog delays the others by one
// take at most however many streams it spreads over: a group's commit
// answers all of its proposals at once, and a tenant flooding a dozen
// streams would otherwise get a dozen shares of every group and make
// everyone else's acknowledgements wait for all of them.
func (ap *applier) takeLocked() []*proposal {
	var group []*proposal
	ready := ap.mu.ready
	ap.mu.ready = ready[:0] // compacted in place: it never passes the entry read
	served := ap.served[:0]
	ap.passed = 0
	if ap.shares == nil {
		ap.shares = map[any]takeShare{}
	}
	for _, q := range ready {
		owner := ap.shareOwner(q.s)
		sh := ap.shares[owner]
		n := 0
		for n < len(q.props) && sh.msgs < groupShareMsgs && sh.bytes < groupShareBytes {
			sh.bytes += q.props[n].size()
			sh.msgs++
			n++
		}
		ap.shares[owner] = sh
		if n == 0 {
			// Its account's share went to the account's streams ahead of
			// it: it goes first next time.
			ap.mu.ready = append(ap.mu.ready, q)
			ap.passed++
			continue
		}
		group = append(group, q.props[:n]...)
		clear(q.props[:n])
		q.props = q.props[n:]
		if len(q.props) > 0 {
			served = append(served, q)
		} else {
			delete(ap.mu.queued, q.s)
		}
	}
	ap.mu.ready = append(ap.mu.ready, served...)
	clear(ready[len(ap.mu.ready):])
	clear(served)
	ap.served = served[:0]
	clear(ap.shares)
	return group
}

// takeShare is what one owner (shareOwner) has taken in the take being
// made.
type takeShare struct{ msgs, bytes int }

// shareOwner is whose share a stream's proposals count against: its
// account (the usage ledger every stream of an account shares; nil for
// the node's own bookkeeping stream) on the node's stores. On a partition
// it is the stream itself, as it always was: there each take is proposed
// to raft at once as one entry, not grown into a group while a commit
// runs, so an account's share per take would only cut a many-stream
// account's entries into more, smaller ones.
func (ap *applier) shareOwner(s *stream) any {
	if ap.group != nil || s == nil {
		return s
	}
	return s.ledger
}

// size is what a proposal's bytes count for the bounds on groups and
// backlogs: what it carries of a message.
func (p *proposal) size() int {
	n := len(p.subject) + len(p.reply) + len(p.hdr) + len(p.data)
	if p.batch != nil {
		n += int(p.batch.bytes)
	}
	return n
}

// apply submits p and waits for its result.
func (ap *applier) apply(p *proposal) result { return <-ap.start(p) }

// start submits p and returns a channel that gets its result, for a
// caller that waits later or not at all: a refused proposal (the applier
// closed) gets closedResult.
func (ap *applier) start(p *proposal) <-chan result {
	ch := make(chan result, 1)
	p.done = func(_ *proposal, r result) { ch <- r }
	if !ap.submit(p) {
		ch <- ap.closedResult()
	}
	return ch
}

// closedResult is the outcome of a proposal an applier refused because it
// has closed. A partition's applier closes when this node stops leading
// the partition: the proposal was never appended, so a publisher hears no
// responders and retries, reaching the new leader (it was told "JetStream
// not enabled", seen during big object puts when leadership moved).
// Otherwise JetStream is stopping.
func (ap *applier) closedResult() result {
	if ap.group != nil {
		return result{err: errNotAppended}
	}
	return result{err: api.NewNotEnabledError()}
}

func (ap *applier) close() {
	ap.mu.Lock()
	ap.mu.closing = true
	ap.mu.Unlock()
	select {
	case ap.work <- struct{}{}:
	default:
	}
	<-ap.done
}

func (ap *applier) run() {
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		ap.commitLoop()
	}()
	defer close(ap.done)
	ap.batch, ap.rd = ap.st.NewBatch(), ap.st
	ap.gen = 1
	var job *commitJob // applied, not handed to the commit step yet
	size := 0          // the bytes job's proposals carry
	for {
		ap.mu.Lock()
		group := ap.takeLocked()
		passed := ap.passed > 0 // streams left out for their account's share
		closing := ap.mu.closing
		ap.mu.Unlock()
		if len(group) > 0 {
			if job == nil {
				job = &commitJob{results: make([]result, 0, len(group))}
			}
			for _, p := range group {
				job.group = append(job.group, p)
				job.results = append(job.results, ap.applyOne(p))
				size += p.size()
			}
		}
		if job == nil {
			if closing {
				ap.batch.Close()
				close(ap.jobs)
				<-committed
				return
			}
			<-ap.work
			continue
		}
		busy := !closing && ap.group == nil && len(job.group) < groupMaxMsgs && size < groupMaxBytes && ap.busy.Load() > 0
		if !closing && ap.group == nil && passed && (busy || len(job.group) < groupFillMsgs && size < groupFillBytes) {
			// The last take left streams out (an account's past its
			// share): they join this group, up to four shares while the
			// commit step is free and up to the group's bound while it is
			// busy, so one account spread over many streams still shares
			// fsyncs as it did with a share per stream. (One stream's own
			// backlog does not count: its share per group is as before.)
			continue
		}
		if busy {
			// The commit step is still syncing the previous group: what
			// arrives meanwhile joins this one, which it would wait
			// behind anyway, instead of the one after, which would wait
			// for this one's fsync too.
			select {
			case <-ap.work:
				continue
			case <-ap.free:
			}
		}
		ap.handOff(job)
		job, size = nil, 0
	}
}

// What one group holds at most, from however many takes were applied
// while the previous group was syncing (a partition's applier hands each
// take to raft at once and is not bounded here).
const (
	groupMaxMsgs  = 4096
	groupMaxBytes = 8 << 20
)

// How far a group is filled from streams the takes left out before it
// goes to a free commit step: four shares. Larger, and every account's
// acknowledgements wait for more of a flooding account's messages to be
// applied (measured: a tenant's async publishes to one stream while
// another floods twelve capped streams had a p50 of 110 ms with per-stream
// shares, 40-50 ms with these); smaller, and an account publishing to many
// streams at once pays an fsync per share.
const (
	groupFillMsgs  = 4 * groupShareMsgs
	groupFillBytes = 4 * groupShareBytes
)

// handOff ends the group being applied: its state summaries become its
// last writes, and the commit step gets it.
func (ap *applier) handOff(job *commitJob) {
	ap.writeStates()
	job.batch = ap.batch
	job.gen = ap.gen
	ap.gen++
	job.garbage, ap.garbage = ap.garbage, false
	job.committed = append([]streamSeq(nil), ap.committed...)
	clear(ap.committed)
	ap.committed = ap.committed[:0]
	ap.batch, ap.rd = ap.st.NewBatch(), ap.st
	ap.mu.Lock()
	ap.mu.inflight++
	ap.mu.Unlock()
	if ap.group == nil {
		// A token left by a group that finished while nothing waited for
		// it would end the next wait early; it is stale now.
		select {
		case <-ap.free:
		default:
		}
		ap.busy.Add(1)
	}
	ap.jobs <- job
}

func (ap *applier) applyOne(p *proposal) result {
	if ap.lost.Load() {
		return result{err: errNotAppended}
	}
	if err := ap.failed(); err != nil {
		return result{err: api.NewStreamStoreFailedError(err)}
	}
	if p.kind == propColdForget {
		ap.batch.ForgetObject(p.seq, p.coldKey)
		return result{}
	}
	s := p.s
	r := func() result {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.applyLocked(p, ap)
	}()
	if p.fast != nil {
		// What a fast batch message's apply step answers goes out now,
		// outside the stream's lock (fastbatch.go).
		s.flushFast(p.acct)
	}
	return r
}

// commitLoop makes each applied group durable, in order: one commit with
// fsync (or, in lazy mode, without), then the durable marks, then the
// proposals' completions.
//
// Lazy mode (syncInterval > 0) fsyncs at most once per interval, with the
// commit of a group that arrives after the interval has passed, and
// otherwise on a timer armed when a commit leaves data unsynced: an
// acknowledged write is on stable storage within the interval whether or
// not anything is written after it.
func (ap *applier) commitLoop() {
	if ap.group != nil {
		ap.replicateLoop()
		return
	}
	ls := lazySync{}
	var due <-chan time.Time // armed while committed data waits for its sync
	for {
		select {
		case job, ok := <-ap.jobs:
			if !ok {
				if ls.dirty {
					ap.syncNow(&ls)
				}
				return
			}
			ap.finish(job, ap.commitJob(job, &ls))
			ap.busy.Add(-1)
			select {
			case ap.free <- struct{}{}:
			default:
			}
		case <-due:
			due = nil
			if ls.dirty {
				ap.syncNow(&ls)
			}
		}
		if ls.dirty && due == nil {
			due = ap.after(max(ap.syncInterval-ap.now().Sub(ls.last), 0))
		}
	}
}

// lazySync is commitLoop's record of lazy mode: when it last synced, and
// whether anything was committed since.
type lazySync struct {
	last  time.Time
	dirty bool
}

// finish completes a committed (or failed) group: releases visible(),
// marks the streams durable, and runs the proposals' completions.
func (ap *applier) finish(job *commitJob, err error) {
	ap.release(job, err)
	ap.complete(job, err)
}

// release ends job's time in flight, err being its commit's outcome: a
// group that committed becomes doneGen first, so a reader that no longer
// sees it in flight sees it done. It must come before complete, and
// never wait for it: the apply goroutine may wait in visible() holding a
// stream's lock, which completing (a PubAck reads the stream's config)
// takes.
func (ap *applier) release(job *commitJob, err error) {
	if err == nil {
		ap.doneGen.Store(job.gen)
	}
	job.batch.Close()
	ap.mu.Lock()
	ap.mu.inflight--
	if ap.mu.inflight == 0 {
		ap.mu.idle.Broadcast()
	}
	ap.mu.Unlock()
}

// waitIdle waits, at most wait, until no group is in flight, and
// reports whether none is.
func (ap *applier) waitIdle(wait time.Duration) bool {
	expired := false
	t := time.AfterFunc(wait, func() {
		ap.mu.Lock()
		expired = true
		ap.mu.idle.Broadcast()
		ap.mu.Unlock()
	})
	defer t.Stop()
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for ap.mu.inflight > 0 && !expired {
		ap.mu.idle.Wait()
	}
	return ap.mu.inflight == 0
}

// complete marks job's messages durable and answers its proposals.
func (ap *applier) complete(job *commitJob, err error) {
	if err == nil {
		for _, c := range job.committed {
			c.s.markDurable(c.seq)
		}
		if job.garbage && ap.e.tiering != nil {
			ap.e.tiering.garbageQueued()
		}
	}
	for i, p := range job.group {
		r := job.results[i]
		if err != nil && r.err == nil {
			r = result{err: err}
		}
		p.done(p, r)
	}
}

func (ap *applier) commitJob(job *commitJob, ls *lazySync) error {
	if err := ap.failed(); err != nil {
		return api.NewStreamStoreFailedError(err)
	}
	lazy := ap.syncInterval > 0
	sync := !lazy || ap.now().Sub(ls.last) >= ap.syncInterval
	// Commit empties the batch: whether it wrote anything is known only
	// before.
	wrote := job.batch.Count() > 0
	if ap.beforeCommit != nil {
		ap.beforeCommit()
	}
	var err error
	switch {
	case wrote:
		err = job.batch.Commit(sync)
	case sync && ls.dirty:
		err = ap.st.Sync()
	}
	if err != nil {
		return ap.fail(err)
	}
	if ap.onCommit != nil {
		ap.onCommit()
	}
	if sync {
		ls.dirty, ls.last = false, ap.now()
	} else {
		ls.dirty = ls.dirty || wrote
	}
	return nil
}

// syncNow is lazy mode's timed fsync. A failure stops the applier like a
// failed commit: later proposals are refused.
func (ap *applier) syncNow(ls *lazySync) {
	if ap.failed() != nil {
		return
	}
	if err := ap.st.Sync(); err != nil {
		ap.fail(err)
		ls.dirty = false // nothing more can be made durable
		return
	}
	ls.dirty, ls.last = false, ap.now()
}

// fail records the first commit failure, after which the applier refuses
// all work, and returns the error proposals get for it.
func (ap *applier) fail(err error) error {
	ap.mu.Lock()
	if ap.mu.fail == nil {
		ap.mu.fail = err
	}
	ap.mu.Unlock()
	ap.e.log.Error("jetstream store commit failed; refusing further writes", "err", err)
	return api.NewStreamStoreFailedError(err)
}

type streamSeq struct {
	s   *stream
	seq uint64
}

// visible makes the group's writes so far readable by the apply step that
// is about to read (finding the oldest message to drop, a subject's next
// message): that step must see what earlier steps wrote. It waits for the
// groups ahead of this one to commit (reads through the batch see the
// store as committed, plus the batch), then points rd at the store through
// the group's batch. Nothing is committed: the group stays one atomic
// batch. A group that never reads keeps the cheaper write-only batch.
func (ap *applier) visible() error {
	ap.mu.Lock()
	if ap.mu.inflight > 0 && ap.onWait != nil {
		ap.onWait()
	}
	for ap.mu.inflight > 0 {
		ap.mu.idle.Wait()
	}
	err := ap.mu.fail
	ap.mu.Unlock()
	if err != nil {
		return api.NewStreamStoreFailedError(err)
	}
	if ap.batch.Count() > 0 {
		ap.rd = ap.batch.Reader()
	}
	return nil
}
