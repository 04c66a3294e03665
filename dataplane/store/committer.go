package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// CommitterOptions tunes a Committer.
type CommitterOptions struct {
	// SyncInterval, when positive, selects lazy durability: groups commit
	// without fsync, callers are completed as soon as their group is
	// applied, and the WAL is fsynced every SyncInterval (and at Close). A
	// crash or power loss can lose up to SyncInterval of acknowledged
	// writes. This is weaker than the default and exists only as an opt-in
	// (NATS's sync_interval). Zero, the default, fsyncs every group before
	// completing any caller in it.
	SyncInterval time.Duration
	// MaxGroupBytes caps the bytes gathered into one group. Submit blocks
	// while the gathering group is over the cap, which is the Committer's
	// back-pressure. Default 32 MiB.
	MaxGroupBytes int
}

// CommitterStats counts the Committer's work since it started.
type CommitterStats struct {
	Groups uint64 // groups committed; with default durability, one fsync each
	Items  uint64 // batches completed successfully
	Bytes  uint64 // encoded bytes committed
	Failed uint64 // batches completed with an error
	// CommitTime is the total time spent in group commits (write, apply and
	// fsync); CommitTime/Groups is the mean commit latency.
	CommitTime time.Duration
}

// Committer is the group-commit batcher: many goroutines Submit batches; it
// gathers everything that arrives while the previous group's fsync is in
// flight into one engine batch, commits that with one sync, and only then
// completes each submitted batch. A caller is never told its batch is
// durable before it is synced, and if the commit or sync fails every batch
// in the group gets the error.
//
// Threading: Submit and Commit are safe for concurrent use. Batches commit
// in the order their Submit calls took the Committer's lock, so batches
// submitted by one goroutine commit in submission order; batches committed
// directly with Batch.Commit meanwhile are not ordered with them. Completion
// callbacks run one at a time on the Committer's goroutine, in that same
// order; they must be quick and must not call Submit, Commit or Close (a
// blocked Submit would wait for the goroutine that is running the callback).
type Committer struct {
	s    *Store
	opts CommitterOptions
	mu   struct {
		sync.Mutex
		gathering *group // the group new batches join; never nil
		spare     *group // a committed group kept for reuse, or nil
		closing   bool
	}
	work  sync.Cond // on mu: the gathering group gained its first batch, or closing began
	space sync.Cond // on mu: the gathering group was taken

	stats struct{ groups, items, bytes, failed, nanos atomic.Uint64 }
	stop  chan struct{} // closed by Close to stop the lazy syncer
	done  chan struct{} // closed when the commit loop exits
}

// group is one commit's worth of batches.
type group struct {
	w     engineBatch
	dones []func(error)
	bytes int
}

// NewCommitter starts a Committer on s. Close it before closing s.
func NewCommitter(s *Store, opts CommitterOptions) *Committer {
	if opts.MaxGroupBytes <= 0 {
		opts.MaxGroupBytes = 32 << 20
	}
	c := &Committer{s: s, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	c.work.L, c.space.L = &c.mu.Mutex, &c.mu.Mutex
	c.mu.gathering = &group{w: s.eng.newBatch()}
	go c.loop()
	if opts.SyncInterval > 0 {
		go c.syncLoop()
	}
	return c
}

// Submit hands b to the group being gathered and returns; done is called
// exactly once, with nil when b is durable (or, with SyncInterval, applied)
// and with the error otherwise. b is copied before Submit returns, so the
// caller may reset and reuse it. Submit blocks only while the gathering
// group is over MaxGroupBytes. After Close, done gets ErrClosed at once.
func (c *Committer) Submit(b *Batch, done func(error)) {
	n := b.Len()
	c.mu.Lock()
	for !c.mu.closing && c.mu.gathering.bytes > 0 && c.mu.gathering.bytes+n > c.opts.MaxGroupBytes {
		c.space.Wait()
	}
	if c.mu.closing {
		c.mu.Unlock()
		done(fmt.Errorf("store: committer: %w", ErrClosed))
		return
	}
	g := c.mu.gathering
	g.w.merge(b.w)
	g.dones = append(g.dones, done)
	g.bytes += n
	if len(g.dones) == 1 {
		c.work.Signal()
	}
	c.mu.Unlock()
}

// Commit submits b and waits for its outcome: the synchronous form of
// Submit, for callers that have nothing else to do meanwhile.
func (c *Committer) Commit(b *Batch) error {
	ch := make(chan error, 1)
	c.Submit(b, func(err error) { ch <- err })
	return <-ch
}

// Stats returns the counters. Items/Groups is the mean batches per fsync.
func (c *Committer) Stats() CommitterStats {
	return CommitterStats{
		Groups: c.stats.groups.Load(),
		Items:  c.stats.items.Load(),
		Bytes:  c.stats.bytes.Load(),
		Failed: c.stats.failed.Load(),

		CommitTime: time.Duration(c.stats.nanos.Load()),
	}
}

// Close commits everything already submitted, completes its callers, stops
// the Committer, and with SyncInterval syncs a last time. Later Submits get
// ErrClosed. It returns the final sync's error, if any.
func (c *Committer) Close() error {
	c.mu.Lock()
	if c.mu.closing {
		c.mu.Unlock()
		return fmt.Errorf("store: committer: %w", ErrClosed)
	}
	c.mu.closing = true
	c.work.Signal()
	c.space.Broadcast()
	c.mu.Unlock()
	<-c.done
	close(c.stop)
	if c.opts.SyncInterval > 0 {
		return c.syncStore()
	}
	return nil
}

// loop takes the gathering group, commits it, completes its callers, and
// repeats; batches submitted meanwhile gather into the next group.
func (c *Committer) loop() {
	defer close(c.done)
	for {
		g := c.take()
		if g == nil {
			return
		}
		err := c.commitGroup(g)
		for _, done := range g.dones {
			done(err)
		}
		c.recycle(g, err)
	}
}

// take waits for a non-empty gathering group and swaps in an empty one.
// It returns nil once closing and drained.
func (c *Committer) take() *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.mu.gathering.dones) == 0 && !c.mu.closing {
		c.work.Wait()
	}
	if len(c.mu.gathering.dones) == 0 {
		return nil
	}
	g := c.mu.gathering
	if c.mu.gathering = c.mu.spare; c.mu.gathering == nil {
		c.mu.gathering = &group{w: c.s.eng.newBatch()}
	}
	c.mu.spare = nil
	c.space.Broadcast()
	return g
}

func (c *Committer) commitGroup(g *group) error {
	if err := c.s.life.acquire(); err != nil {
		return err
	}
	defer c.s.life.release()
	start := time.Now()
	err := g.w.commit(c.opts.SyncInterval <= 0)
	c.stats.nanos.Add(uint64(time.Since(start)))
	c.stats.groups.Add(1)
	if err != nil {
		c.stats.failed.Add(uint64(len(g.dones)))
		return fmt.Errorf("store: commit group of %d batches: %w", len(g.dones), err)
	}
	c.stats.items.Add(uint64(len(g.dones)))
	c.stats.bytes.Add(uint64(g.bytes))
	return nil
}

// recycle keeps a committed group for reuse; a failed one is dropped, since
// its engine batch must not be reused.
func (c *Committer) recycle(g *group, err error) {
	if err != nil {
		return
	}
	g.w.reset()
	clear(g.dones)
	g.dones, g.bytes = g.dones[:0], 0
	c.mu.Lock()
	c.mu.spare = g
	c.mu.Unlock()
}

// syncLoop fsyncs the WAL every SyncInterval (lazy durability only).
func (c *Committer) syncLoop() {
	t := time.NewTicker(c.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			// A failure poisons the store; the next commit reports it.
			_ = c.syncStore()
		}
	}
}

func (c *Committer) syncStore() error { return c.s.Sync() }
