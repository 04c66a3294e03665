package jetstream

import (
	"fmt"
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
	// done receives the outcome once it is durable (or failed); it runs on
	// the applier goroutine and must be quick.
	done func(*proposal, result)
	// held is what a captured message holds of its stream's ingest
	// backlog (flow.go) until done; fixed at capture, since applying may
	// rewrite the subject.
	held int64
}

// result is the outcome of a proposal.
type result struct {
	seq    uint64
	dup    bool
	purged uint64
	err    error // *api.Error for refusals, anything else for I/O failure
}

// applier is the apply path of one store. One goroutine (run) takes the
// proposals submitted meanwhile, a bounded share of each stream's
// (takeLocked), and applies them, each stream's in submission order and
// under its stream's lock, into one batch; a second goroutine (commitLoop)
// commits each batch with one fsync and only then completes its
// proposals. While one group is being synced the next one is applied, so
// publishes share fsyncs and the disk is kept busy, and an acknowledgement
// never precedes durability.
//
// Invariant: a proposal's done runs only after everything it wrote was
// synced, or with an error; batches commit in the order they were applied;
// after a failed commit the applier refuses all further work, because
// memory and disk may then disagree.
type applier struct {
	e            *Engine
	st           *store.Store
	syncInterval time.Duration
	// max is the server's limit on what this store's streams hold (0: no
	// limit); used is what they hold now.
	max  int64
	used atomic.Int64

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
	work  chan struct{} // capacity 1: the queue became non-empty
	jobs  chan *commitJob
	batch *store.Batch // the group being applied; run goroutine only
	// wroteVisible records that visible() committed part of the current
	// group without fsync; run goroutine only.
	wroteVisible bool
	// states lists streams whose state summary changed in this group; the
	// summary is written once per group, not once per message.
	states []*stream // run goroutine only
	// committed pairs each of those streams with its last sequence, to
	// publish as durable once the group commits.
	committed []streamSeq // run goroutine only
	done      chan struct{}
}

// commitJob is one applied group on its way to stable storage.
type commitJob struct {
	batch     *store.Batch
	group     []*proposal
	results   []result
	committed []streamSeq
	// needSync: visible() wrote part of the group without fsync, so the
	// group must sync even if its batch is empty.
	needSync bool
}

// markDirty queues s's state summary for the group's commit. Called with
// s.mu held.
func (ap *applier) markDirty(s *stream) {
	if !s.mu.stateQueued {
		s.mu.stateQueued = true
		ap.states = append(ap.states, s)
	}
}

// writeStates adds the queued state summaries to the batch.
func (ap *applier) writeStates() {
	for i, s := range ap.states {
		s.mu.Lock()
		if !s.mu.removed {
			ap.batch.PutStreamState(s.id, s.mu.state)
			ap.committed = append(ap.committed, streamSeq{s, s.mu.state.LastSeq})
		}
		s.mu.dirty, s.mu.stateQueued = false, false
		s.mu.Unlock()
		ap.states[i] = nil
	}
	ap.states = ap.states[:0]
}

func newApplier(e *Engine, st *store.Store, syncInterval time.Duration, max int64) *applier {
	ap := &applier{e: e, st: st, syncInterval: syncInterval, max: max,
		work: make(chan struct{}, 1), jobs: make(chan *commitJob), done: make(chan struct{})}
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
func (ap *applier) full() bool { return ap.max > 0 && ap.used.Load() >= ap.max }

// streamQueue is one stream's proposals waiting to be applied, in
// submission order.
type streamQueue struct {
	s     *stream
	props []*proposal
}

// What one stream contributes to a group at most: a group is applied
// before anything submitted after it, so this bounds how long one
// stream's backlog delays every other stream's work (and what a group
// holds), while still letting a busy stream share each fsync among
// hundreds of messages.
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

// takeLocked takes the next group: from each stream with work waiting,
// in turn, its oldest proposals up to its share. Each stream's proposals
// stay in submission order; different streams' need not (nothing orders
// them but a submitter that waits for the outcome, as API requests do).
// A stream with more waiting keeps its turn for the next group, so a
// stream's backlog delays the others by one group at most.
func (ap *applier) takeLocked() []*proposal {
	var group []*proposal
	ready := ap.mu.ready
	ap.mu.ready = ready[:0] // compacted in place: it never passes the entry read
	for _, q := range ready {
		n, size := 0, 0
		for n < len(q.props) && n < groupShareMsgs && size < groupShareBytes {
			size += q.props[n].size()
			n++
		}
		group = append(group, q.props[:n]...)
		clear(q.props[:n])
		q.props = q.props[n:]
		if len(q.props) > 0 {
			ap.mu.ready = append(ap.mu.ready, q)
		} else {
			delete(ap.mu.queued, q.s)
		}
	}
	clear(ready[len(ap.mu.ready):])
	return group
}

// size is what a proposal's bytes count for the bounds on groups and
// backlogs: what it carries of a message.
func (p *proposal) size() int {
	return len(p.subject) + len(p.reply) + len(p.hdr) + len(p.data)
}

// apply submits p and waits for its result.
func (ap *applier) apply(p *proposal) result {
	ch := make(chan result, 1)
	p.done = func(_ *proposal, r result) { ch <- r }
	if !ap.submit(p) {
		return result{err: api.NewNotEnabledError()}
	}
	return <-ch
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
	ap.batch = ap.st.NewBatch()
	for {
		ap.mu.Lock()
		group := ap.takeLocked()
		closing := ap.mu.closing
		ap.mu.Unlock()
		if len(group) == 0 {
			if closing {
				ap.batch.Close()
				close(ap.jobs)
				<-committed
				return
			}
			<-ap.work
			continue
		}
		job := &commitJob{group: group, results: make([]result, 0, len(group))}
		for _, p := range group {
			job.results = append(job.results, ap.applyOne(p))
		}
		ap.writeStates()
		job.batch, job.needSync = ap.batch, ap.wroteVisible
		job.committed = append([]streamSeq(nil), ap.committed...)
		clear(ap.committed)
		ap.committed = ap.committed[:0]
		ap.batch, ap.wroteVisible = ap.st.NewBatch(), false
		ap.mu.Lock()
		ap.mu.inflight++
		ap.mu.Unlock()
		ap.jobs <- job
	}
}

func (ap *applier) applyOne(p *proposal) result {
	if err := ap.failed(); err != nil {
		return result{err: api.NewStreamStoreFailedError(err)}
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(p, ap)
}

// commitLoop makes each applied group durable, in order: one commit with
// fsync (or, in lazy mode, without, syncing on the interval), then the
// durable marks, then the proposals' completions.
func (ap *applier) commitLoop() {
	var lastSync time.Time
	dirty := false // lazy mode: committed but not yet synced
	for job := range ap.jobs {
		err := ap.commitJob(job, &lastSync, &dirty)
		job.batch.Close()
		// Release visible() before waking consumers: the apply goroutine
		// may wait in visible() holding a stream's lock, which waking
		// that stream's consumers takes.
		ap.mu.Lock()
		ap.mu.inflight--
		if ap.mu.inflight == 0 {
			ap.mu.idle.Broadcast()
		}
		ap.mu.Unlock()
		if err == nil {
			for _, c := range job.committed {
				c.s.markDurable(c.seq)
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
	if dirty {
		ap.st.Sync()
	}
}

func (ap *applier) commitJob(job *commitJob, lastSync *time.Time, dirty *bool) error {
	if err := ap.failed(); err != nil {
		return api.NewStreamStoreFailedError(err)
	}
	lazy := ap.syncInterval > 0
	sync := !lazy || time.Since(*lastSync) >= ap.syncInterval
	var err error
	switch {
	case job.batch.Count() > 0:
		err = job.batch.Commit(sync)
	case sync && (job.needSync || *dirty):
		err = ap.st.Sync()
	}
	if err != nil {
		ap.mu.Lock()
		if ap.mu.fail == nil {
			ap.mu.fail = err
		}
		ap.mu.Unlock()
		ap.e.log.Error("jetstream store commit failed; refusing further writes", "err", err)
		return api.NewStreamStoreFailedError(err)
	}
	if sync {
		*dirty = false
		*lastSync = time.Now()
	} else {
		*dirty = *dirty || job.batch.Count() > 0 || job.needSync
	}
	return nil
}

type streamSeq struct {
	s   *stream
	seq uint64
}

// visible makes the group's writes so far readable by the store's read
// methods: an apply step that reads (finding the oldest message to drop, a
// subject's next message) must see what earlier steps wrote. It waits for
// the groups ahead of this one to commit (so writes stay in order), then
// commits this group so far without fsync; the group's final commit syncs
// it all, because the WAL is sequential.
func (ap *applier) visible() error {
	ap.mu.Lock()
	for ap.mu.inflight > 0 {
		ap.mu.idle.Wait()
	}
	err := ap.mu.fail
	ap.mu.Unlock()
	if err != nil {
		return api.NewStreamStoreFailedError(err)
	}
	if ap.batch.Count() == 0 {
		return nil
	}
	if err := ap.batch.Commit(false); err != nil {
		ap.mu.Lock()
		if ap.mu.fail == nil {
			ap.mu.fail = err
		}
		ap.mu.Unlock()
		return fmt.Errorf("jetstream: store: %w", err)
	}
	ap.wroteVisible = true
	return nil
}
