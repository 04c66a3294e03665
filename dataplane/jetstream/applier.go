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
}

// result is the outcome of a proposal.
type result struct {
	seq    uint64
	dup    bool
	purged uint64
	err    error // *api.Error for refusals, anything else for I/O failure
}

// applier is the apply path of one store: a single goroutine that takes
// every proposal submitted while the previous group was being made
// durable, applies them in submission order (each under its stream's
// lock, into one batch), commits the batch with one fsync, and only then
// completes the proposals. So publishes share fsyncs, and an
// acknowledgement never precedes durability.
//
// Invariant: a proposal's done runs only after everything it wrote was
// synced, or with an error; after a failed commit the applier refuses all
// further work, because memory and disk may then disagree.
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
		queue   []*proposal // guarded by mu
		closing bool        // guarded by mu
	}
	work  chan struct{} // capacity 1: the queue became non-empty
	batch *store.Batch  // applier goroutine only
	dirty bool          // the group committed unsynced writes; applier goroutine only
	fail  error         // set once a commit failed; applier goroutine only
	// states lists streams whose state summary changed in this group; the
	// summary is written once per group, not once per message.
	states []*stream // applier goroutine only
	// committed pairs each of those streams with its last sequence, to
	// publish as durable once the group commits.
	committed []streamSeq // applier goroutine only
	done      chan struct{}
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
	return &applier{e: e, st: st, syncInterval: syncInterval, max: max, work: make(chan struct{}, 1), done: make(chan struct{})}
}

// full reports whether the store's streams already hold the server's limit.
func (ap *applier) full() bool { return ap.max > 0 && ap.used.Load() >= ap.max }

// submit queues p; false means the applier is closed (p.done is not run).
func (ap *applier) submit(p *proposal) bool {
	ap.mu.Lock()
	if ap.mu.closing {
		ap.mu.Unlock()
		return false
	}
	first := len(ap.mu.queue) == 0
	ap.mu.queue = append(ap.mu.queue, p)
	ap.mu.Unlock()
	if first {
		select {
		case ap.work <- struct{}{}:
		default:
		}
	}
	return true
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
	defer close(ap.done)
	ap.batch = ap.st.NewBatch()
	defer ap.batch.Close()
	var group []*proposal
	var results []result
	var lastSync time.Time
	for {
		ap.mu.Lock()
		group, ap.mu.queue = ap.mu.queue, group[:0]
		closing := ap.mu.closing
		ap.mu.Unlock()
		if len(group) == 0 {
			if closing {
				if ap.dirty {
					ap.st.Sync()
				}
				return
			}
			<-ap.work
			continue
		}
		results = results[:0]
		for _, p := range group {
			results = append(results, ap.applyOne(p))
		}
		err := ap.commitGroup(&lastSync)
		for i, p := range group {
			r := results[i]
			if err != nil && r.err == nil {
				r = result{err: err}
			}
			p.done(p, r)
			group[i] = nil
		}
	}
}

func (ap *applier) applyOne(p *proposal) result {
	if ap.fail != nil {
		return result{err: api.NewStreamStoreFailedError(ap.fail)}
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(p, ap)
}

// commitGroup makes the group durable: one commit with fsync (or, in
// lazy mode, without, syncing on the interval).
func (ap *applier) commitGroup(lastSync *time.Time) error {
	ap.writeStates()
	if ap.fail != nil {
		ap.batch.Reset()
		ap.committed = ap.committed[:0]
		return api.NewStreamStoreFailedError(ap.fail)
	}
	lazy := ap.syncInterval > 0
	sync := !lazy
	if lazy && time.Since(*lastSync) >= ap.syncInterval {
		sync = true
	}
	var err error
	switch {
	case ap.batch.Count() > 0:
		err = ap.batch.Commit(sync)
	case sync && ap.dirty:
		err = ap.st.Sync()
	}
	if err != nil {
		ap.fail = err
		ap.e.log.Error("jetstream store commit failed; refusing further writes", "err", err)
		return api.NewStreamStoreFailedError(err)
	}
	if sync {
		ap.dirty = false
		*lastSync = time.Now()
	} else {
		ap.dirty = true
	}
	for i, c := range ap.committed {
		c.s.durable.Store(c.seq)
		c.s.wakeConsumers()
		ap.committed[i] = streamSeq{}
	}
	ap.committed = ap.committed[:0]
	return nil
}

type streamSeq struct {
	s   *stream
	seq uint64
}

// visible makes the group's writes so far readable by the store's read
// methods, without fsync: an apply step that reads (finding the oldest
// message to drop, a subject's next message) must see what earlier steps
// of the same group wrote. The group's final commit syncs them all.
func (ap *applier) visible() error {
	if ap.batch.Count() == 0 {
		return nil
	}
	if err := ap.batch.Commit(false); err != nil {
		ap.fail = err
		return fmt.Errorf("jetstream: store: %w", err)
	}
	ap.dirty = true
	return nil
}
