package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/tier"
)

// TierOptions configure tiered storage; a nil Store turns it off.
type TierOptions struct {
	// Store is where segments go; URL names it for monitoring.
	Store tier.ObjectStore
	URL   string
	// SegmentBytes is the target segment size (default 64 MiB);
	// BlockBytes the size of a segment's blocks, the unit of a cold read
	// (default 1 MiB, at most SegmentBytes/4).
	SegmentBytes int64
	BlockBytes   int64
	// LocalBytes is the node's budget for local message bytes: tiering
	// starts at 90 % of it and stops at 80 %. 0: no budget, and each
	// stream keeps about two segments' worth local.
	LocalBytes int64
	// CacheBytes bounds the cold block cache (default: a tenth of
	// LocalBytes, at least 8 MiB).
	CacheBytes int64
	// ReadTimeout bounds a cold read (default 10 s); ReadRate caps the
	// bytes per second cold reads fetch (0: no cap).
	ReadTimeout time.Duration
	ReadRate    int64
	// Node names this node in object keys.
	Node string
	// Interval is how often the mover looks for work (default 250 ms);
	// UploadTimeout bounds one upload (default 2 min).
	Interval      time.Duration
	UploadTimeout time.Duration
	// The orphan scan (cold_orphans.go) lists OrphanPage objects (default
	// 1000) every OrphanInterval (default 1 min) and removes those of
	// this node that no record names and are older than OrphanAge
	// (default 1 h, far past any upload in flight).
	OrphanInterval time.Duration
	OrphanAge      time.Duration
	OrphanPage     int
}

func (o *TierOptions) ensureDefaults() {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.BlockBytes <= 0 {
		o.BlockBytes = 1 << 20
	}
	o.BlockBytes = max(4<<10, min(o.BlockBytes, o.SegmentBytes/4))
	if o.CacheBytes <= 0 {
		o.CacheBytes = max(8<<20, o.LocalBytes/10)
	}
	if o.Node == "" {
		o.Node = "node"
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 2 * time.Minute
	}
	if o.OrphanInterval <= 0 {
		o.OrphanInterval = time.Minute
	}
	if o.OrphanAge <= 0 {
		o.OrphanAge = time.Hour
	}
	if o.OrphanPage <= 0 {
		o.OrphanPage = 1000
	}
}

// tiering is a node's mover and deleter. The mover seals the oldest
// durable hot ranges of the node's streams into segments, uploads each
// under a key unique to the attempt, and commits it through the
// stream's apply path (commitColdLocked), which is the only place the
// manifest changes. It runs where the streams' apply path runs: for the
// node's own streams, on this node. The deleter removes objects that
// pending records name (abandoned uploads, dropped segments) and then
// the records, also through the apply path.
//
// Crash points, in order, and what each leaves:
//   - before the intent commits: nothing, or an object no record names
//     is impossible (the upload starts only after the intent is durable);
//   - after the intent, before the manifest commit: the intent, whose
//     object (whole, partial or absent) the deleter removes;
//   - after the manifest commit: the manifest and the stubs, one batch;
//   - after a segment is dropped: a garbage record until the deleter has
//     deleted the object, then nothing.
type tiering struct {
	e     *Engine
	opts  TierOptions
	st    tier.ObjectStore
	cache *tier.Cache
	house *stream // proposals that belong to no stream
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	// scanDone closes when the orphan scan's goroutine ends.
	scanDone chan struct{}
	// ctx bounds every object store call; close cancels it, so a node
	// stopping does not wait for an upload.
	ctx    context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		inflight map[string]bool // keys being uploaded; guarded by mu
		backoff  time.Duration   // guarded by mu
		retryAt  time.Time       // no work before it; guarded by mu
		lastErr  string          // guarded by mu
		active   bool            // between the 90 % and 80 % marks; guarded by mu
		over     bool            // local bytes over the budget; guarded by mu
		local    uint64          // local message bytes at the last pass; guarded by mu
		// tiered lists ranges commits replaced by stubs since the mover
		// last looked, on every replica; guarded by mu.
		tiered []pendingCompaction
		// tieredTo is the last sequence noted tiered, by stream id;
		// guarded by mu.
		tieredTo map[uint64]uint64
	}
	gcDue atomic.Bool
	// compacting holds tiered ranges not compacted yet; mover goroutine only.
	compacting map[uint64]*pendingCompaction // by stream id
	builder    tier.Builder                  // seals segments; mover goroutine only
	lastTiered time.Time                     // the last range noted; mover goroutine only

	uploads, uploadBytes, uploadErrors atomic.Int64
	rewrites                           atomic.Int64
	deletes, deleteErrors              atomic.Int64
	orphans                            atomic.Int64
	orphanPasses                       atomic.Int64 // full scans of the store done
	// compactions counts forced compactions of tiered ranges; compactedTo
	// is the last sequence of the latest one.
	compactions               atomic.Int64
	compactedTo               atomic.Uint64
	coldReads, coldReadErrors atomic.Int64
}

func newTiering(e *Engine, o TierOptions) *tiering {
	o.ensureDefaults()
	t := &tiering{e: e, opts: o, st: o.Store,
		cache: tier.NewCache(o.Store, tier.CacheOptions{MaxBytes: o.CacheBytes, Timeout: o.ReadTimeout, ReadRate: o.ReadRate}),
		wake:  make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), scanDone: make(chan struct{})}
	t.house = newStream(e, e.file, 0, &api.StreamConfig{Name: "$TIER"}, time.Time{})
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.inflight = map[string]bool{}
	t.compacting = map[uint64]*pendingCompaction{}
	t.mu.tieredTo = map[uint64]uint64{}
	t.gcDue.Store(true) // intents a crash left are cleaned up at start
	return t
}

func (t *tiering) garbageQueued() {
	t.gcDue.Store(true)
	t.poke()
}

func (t *tiering) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *tiering) run() {
	defer close(t.done)
	tick := time.NewTicker(t.opts.Interval)
	defer tick.Stop()
	lastGC := time.Time{}
	for {
		select {
		case <-t.stop:
			return
		case <-t.wake:
		case <-tick.C:
		}
		t.noteTiered()
		t.mu.Lock()
		wait := time.Now().Before(t.mu.retryAt)
		t.mu.Unlock()
		if wait {
			continue
		}
		if t.gcDue.Swap(false) || time.Since(lastGC) > time.Minute {
			lastGC = time.Now()
			if err := t.collect(); err != nil {
				t.failed("delete", err)
				t.gcDue.Store(true)
				continue
			}
		}
		if err := t.move(); err != nil {
			t.failed("upload", err)
			continue
		}
		t.mu.Lock()
		t.mu.backoff, t.mu.lastErr = 0, ""
		t.mu.Unlock()
	}
}

// failed backs the mover off (doubling to a minute): the object store
// is slow, failing or down, and publishes go on meanwhile.
func (t *tiering) failed(what string, err error) {
	t.mu.Lock()
	t.mu.backoff = min(max(2*t.mu.backoff, 100*time.Millisecond), time.Minute)
	t.mu.retryAt = time.Now().Add(t.mu.backoff)
	t.mu.lastErr = what + ": " + err.Error()
	b := t.mu.backoff
	t.mu.Unlock()
	t.e.log.Warn("tier: "+what+" failed; backing off", "store", t.st.String(), "retry_in", b, "err", err)
}

func (t *tiering) close() {
	t.cancel()
	close(t.stop)
	<-t.done
	<-t.scanDone
}

// leads reports whether ap is an apply path of this node: the node's own
// (R1 streams), or a partition's of the term this node leads it in. Only
// there may the mover seal and commit: a replicated stream's manifest
// changes as an entry of its partition, which every replica commits.
func (t *tiering) leads(ap *applier) bool {
	return ap == t.e.file || ap.group != nil && !ap.lost.Load()
}

// candidates lists the node's attached file streams with their local
// (hot) bytes, and the node's total.
func (t *tiering) candidates() (list []*stream, hot []uint64, total uint64) {
	list, hot, _, total = t.candidatesOf()
	return list, hot, total
}

// candidatesOf is candidates with each stream's account name.
func (t *tiering) candidatesOf() (list []*stream, hot []uint64, accts []string, total uint64) {
	t.e.mu.Lock()
	accounts := make([]*jsAccount, 0, len(t.e.mu.accounts))
	for _, a := range t.e.mu.accounts {
		accounts = append(accounts, a)
	}
	t.e.mu.Unlock()
	for _, a := range accounts {
		for _, s := range a.sortedStreams() {
			if !t.leads(s.ap) {
				continue
			}
			s.mu.Lock()
			h := s.mu.state.Bytes - min(s.mu.state.Bytes, s.mu.cold.bytes)
			// Counter totals and schedules are read on the apply path,
			// which never waits on the object store, so they stay local.
			cfg := s.mu.cfg
			ok := !s.mu.removed && !s.mu.detached && cfg.Storage == api.FileStorage && !cfg.AllowMsgCounter && !cfg.AllowMsgSchedules
			s.mu.Unlock()
			if ok {
				list, hot, accts = append(list, s), append(hot, h), append(accts, a.acc.Name())
				total += h
			}
		}
	}
	return list, hot, accts, total
}

// move seals and uploads segments while the policy asks for them: with a
// budget, from the stream holding the most local bytes, from 90 % of the
// budget down to 80 %; without one, from any stream holding more than
// two segments' worth.
func (t *tiering) move() error {
	for range 16 {
		list, hot, total := t.candidates()
		budget := uint64(t.opts.LocalBytes)
		seg := uint64(t.opts.SegmentBytes)
		t.mu.Lock()
		t.mu.local = total
		if budget > 0 {
			switch {
			case total >= budget*9/10:
				t.mu.active = true
			case total <= budget*8/10:
				t.mu.active = false
			}
			if over := total > budget; over != t.mu.over {
				t.mu.over = over
				if over {
					t.e.log.Warn("tier: local message bytes over budget", "local", total, "budget", budget)
				} else {
					t.e.log.Info("tier: local message bytes back within budget", "local", total, "budget", budget)
				}
			}
		}
		active := t.mu.active
		t.mu.Unlock()
		if did, err := t.rewrite(list); err != nil || did {
			if err != nil {
				return err
			}
			continue
		}
		var pick *stream
		var best uint64
		for i, s := range list {
			eligible := hot[i] > best && (budget > 0 && active || budget == 0 && hot[i] > 2*seg)
			if eligible {
				pick, best = s, hot[i]
			}
		}
		if pick == nil {
			t.compactAll()
			return nil
		}
		n, err := t.seal(pick, budget > 0)
		if err != nil {
			return err
		}
		if n == 0 {
			t.compactAll()
			return nil // nothing sealable yet (not durable, or one message)
		}
	}
	t.poke() // more to do: come straight back
	return nil
}

var errSealFull = errors.New("segment full")

// sealEstimate is how many messages a segment of segBytes holds, going
// by the stream's average stored message (msgs messages in bytes), so
// seal sizes its lists once instead of growing them message by message.
func sealEstimate(msgs, bytes, segBytes uint64) uint64 {
	if msgs == 0 || bytes == 0 {
		return 0
	}
	return min(segBytes/max(bytes/msgs, 1)+1, 1<<20)
}

// keepBuilder is the most the mover's segment builder keeps between
// segments.
const keepBuilder = 8 << 20

// seal builds, uploads and commits one segment of s from its cold floor:
// up to SegmentBytes of durable messages, never the stream's last one
// (start-up reads its headers). It returns the messages sealed.
func (t *tiering) seal(s *stream, underBudget bool) (int, error) {
	s.mu.Lock()
	floor := max(s.coldFloorLocked(), s.mu.state.FirstSeq)
	last, name := s.mu.state.LastSeq, s.mu.cfg.Name
	n := sealEstimate(s.mu.state.Msgs, s.mu.state.Bytes, uint64(t.opts.SegmentBytes))
	size := min(s.mu.state.Bytes, uint64(t.opts.SegmentBytes)) + n*48 // the object, index included
	s.mu.Unlock()
	hi := min(s.durable.Load(), last-1)
	if last == 0 || floor > hi {
		return 0, nil
	}
	n = min(n, hi-floor+1)
	metas := make([]store.Message, 0, n)
	// One frozen view for the scan and the state summary beside it, so
	// the commit can tell, from counts alone, whether any message went
	// since (see sealed.removed).
	view, err := s.ap.st.View()
	if err != nil {
		return 0, err
	}
	defer view.Close()
	removed, known := uint64(0), false
	if st, err := view.StreamState(s.id); err == nil {
		removed, known = st.LastSeq-st.Msgs, true
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	// Bodies go straight from the scan into the object; the builder's
	// buffers are the mover's, reused segment after segment (up to
	// keepBuilder).
	b := &t.builder
	b.Reset(tier.SegmentHeader{Stream: s.id, Incarnation: s.created.UnixNano(), Name: name, First: floor},
		int(t.opts.BlockBytes), int(size))
	var bytes uint64
	err = view.ScanMsgs(s.id, floor, hi+1, func(m *store.Message) error {
		if m.Cold {
			return errSealFull // a stub above the floor: never, but never tier it twice
		}
		b.Add(m.Seq, m.Time, m.TTL, m.Subject, m.Header, m.Data)
		metas = append(metas, store.Message{Seq: m.Seq, Subject: m.Subject, Time: m.Time, TTL: m.TTL,
			HdrLen: len(m.Header), DataLen: len(m.Data)})
		bytes += msgSize(m.Subject, m.Header, m.Data)
		if bytes >= uint64(t.opts.SegmentBytes) {
			return errSealFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errSealFull) {
		return 0, err
	}
	view.Close() // the upload may be slow: release the view now
	if len(metas) == 0 || !underBudget && bytes < uint64(t.opts.SegmentBytes) {
		return 0, nil
	}
	first, lastSeq := floor, metas[len(metas)-1].Seq
	built, err := b.Finish(lastSeq, bytes)
	if err != nil {
		return 0, err
	}
	seg, err := t.upload(s, first, lastSeq, bytes, built, metas)
	// Small segments reuse the buffers; a large one's go back to the
	// collector rather than stay pinned while the mover idles.
	b.Trim(keepBuilder)
	if err != nil {
		return 0, err
	}
	if r := s.ap.apply(&proposal{s: s, kind: propColdCommit, cold: &sealed{seg: seg, msgs: metas, removed: removed, removedKnown: known}}); r.err != nil {
		t.gcDue.Store(true)
		return 0, r.err
	}
	t.uploads.Add(1)
	t.uploadBytes.Add(seg.Size)
	t.e.log.Info("tier: uploaded segment", "stream", name, "first", first, "last", lastSeq, "msgs", len(metas),
		"bytes", seg.Size, "key", seg.Key)
	return len(metas), nil
}

// upload records the intent for a new object of s covering [first,
// last] and puts the built segment there. The caller commits it; until
// then the intent names the object for the deleter.
func (t *tiering) upload(s *stream, first, last, bytes uint64, built tier.Built, metas []store.Message) (store.Segment, error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	key := tier.SegmentKey(t.opts.Node, s.id, s.created.UnixNano(), first, last, hex.EncodeToString(id[:]))
	t.mu.Lock()
	t.mu.inflight[key] = true
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.mu.inflight, key)
		t.mu.Unlock()
	}()
	if r := s.ap.apply(&proposal{s: s, kind: propColdIntent, coldKey: key}); r.err != nil {
		return store.Segment{}, r.err
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.UploadTimeout)
	err := t.st.Put(ctx, key, built.Object)
	cancel()
	if err != nil {
		t.uploadErrors.Add(1)
		t.gcDue.Store(true) // the intent names what may be in the store
		return store.Segment{}, err
	}
	return store.Segment{First: first, Last: last, Key: key, Size: int64(len(built.Object)), IndexOff: built.IndexOff,
		Msgs: uint64(len(metas)), Bytes: bytes, MinTime: metas[0].Time, MaxTime: metas[len(metas)-1].Time}, nil
}

// rewrite replaces a segment whose object mostly holds deleted messages
// (or one an erased message was in) by one holding only its live
// messages, read back through the cache. It returns whether it did.
func (t *tiering) rewrite(list []*stream) (bool, error) {
	for _, s := range list {
		s.mu.Lock()
		cs := s.rewriteWantedLocked()
		var old store.Segment
		if cs != nil {
			old = cs.seg
		}
		name := s.mu.cfg.Name
		s.mu.Unlock()
		if cs == nil {
			continue
		}
		var stubs []store.Message
		if err := s.ap.st.ScanMsgs(s.id, old.First, old.Last+1, func(m *store.Message) error {
			stubs = append(stubs, store.Message{Seq: m.Seq, Subject: m.Subject, Time: m.Time, TTL: m.TTL, Cold: m.Cold, HdrLen: m.HdrLen, DataLen: m.DataLen})
			return nil
		}); err != nil {
			return false, err
		}
		var recs []tier.Record
		var metas []store.Message
		var bytes uint64
		for _, m := range stubs {
			meta := m
			if err := s.hydrate(t.ctx, &m); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue // the segment went meanwhile
				}
				return false, err
			}
			recs = append(recs, tier.Record{Seq: m.Seq, Time: m.Time, TTL: m.TTL, Subject: m.Subject, Header: m.Header, Data: m.Data})
			metas = append(metas, meta)
			bytes += storedSize(&meta)
		}
		if len(recs) == 0 {
			continue
		}
		built, err := tier.Build(tier.SegmentHeader{Stream: s.id, Incarnation: s.created.UnixNano(), Name: name,
			First: old.First, Last: old.Last, Bytes: bytes}, recs, int(t.opts.BlockBytes))
		if err != nil {
			return false, err
		}
		seg, err := t.upload(s, old.First, old.Last, bytes, built, metas)
		if err != nil {
			return false, err
		}
		if r := s.ap.apply(&proposal{s: s, kind: propColdRewrite, coldKey: old.Key, cold: &sealed{seg: seg, msgs: metas}}); r.err != nil {
			t.gcDue.Store(true)
			return false, r.err
		}
		t.rewrites.Add(1)
		t.e.log.Info("tier: rewrote segment", "stream", name, "first", old.First, "last", old.Last,
			"live", len(metas), "of", old.Msgs, "key", seg.Key, "old_key", old.Key)
		return true, nil
	}
	return false, nil
}

// pendingCompaction is a stream's tiered range whose replaced bodies
// still take disk space: it comes back when the range is compacted, not
// when the batch commits. Mover goroutine only.
type pendingCompaction struct {
	stream      uint64
	first, last uint64
	bytes       int64
}

// committed is told of each segment commit that replaced bodies by
// stubs: by the apply path on the node that ran it, and by a partition's
// state machine on every replica (which commits the leader's writes and
// never runs the apply path). The range's old bodies take disk space
// until it is compacted, so every replica's mover compacts it by the one
// rule of compactLater. A range at or below one already noted (the same
// commit told twice, a segment's counts changing, a rewrite) is not new.
// It only queues: neither caller may wait for a compaction.
func (t *tiering) committed(stream, first, last uint64, size int64) {
	t.mu.Lock()
	if last <= t.mu.tieredTo[stream] {
		t.mu.Unlock()
		return
	}
	t.mu.tieredTo[stream] = last
	t.mu.tiered = append(t.mu.tiered, pendingCompaction{stream: stream, first: first, last: last, bytes: size})
	t.mu.Unlock()
	t.poke()
}

// replicated notes the segment commits among a partition entry's writes.
func (t *tiering) replicated(repr []byte) {
	if err := t.e.opts.Store.ReprSegments(repr, func(stream uint64, seg store.Segment) {
		t.committed(stream, seg.First, seg.Last, seg.Size)
	}); err != nil {
		t.e.log.Warn("tier: reading a replicated entry's segments", "err", err)
	}
}

// noteTiered hands the committed ranges to compactLater.
func (t *tiering) noteTiered() {
	t.mu.Lock()
	list := t.mu.tiered
	t.mu.tiered = nil
	t.mu.Unlock()
	for _, pc := range list {
		t.lastTiered = t.e.opts.Now()
		t.compactLater(pc.stream, pc.first, pc.last, pc.bytes)
	}
}

// compactLater notes a tiered range and compacts once half a budget's
// worth (at least two segments') has accumulated: the data directory stays
// within a few budgets, and forced compactions, which cost the most CPU
// of all tiering does, stay rare.
func (t *tiering) compactLater(stream, first, last uint64, n int64) {
	pc := t.compacting[stream]
	if pc == nil {
		pc = &pendingCompaction{stream: stream, first: first}
		t.compacting[stream] = pc
	}
	pc.last, pc.bytes = last, pc.bytes+n
	if pc.bytes < max(t.opts.LocalBytes/2, 2*t.opts.SegmentBytes) {
		return
	}
	if t.compactWanted() {
		t.compactNow(pc)
	}
}

// compactWanted says whether forcing a compaction of the store is worth
// its cost: Pebble's own compactions free most of what tiering replaced
// as they go, so one is forced (over everything tiered since the last)
// only while the store takes more than three budgets on disk, or when
// there is no budget to measure against.
func (t *tiering) compactWanted() bool {
	u := t.e.opts.Store.DiskUsage()
	return t.opts.LocalBytes <= 0 || u == 0 || u > 3*uint64(t.opts.LocalBytes)
}

// idleCompact is how long the mover must have tiered nothing before it
// compacts every noted range regardless of disk usage.
const idleCompact = 2 * time.Second

// compactAll compacts noted ranges: the mover has nothing more to move
// for now. Under a steady stream of publishes that is every time tiering
// reaches its low mark, so until nothing was tiered for idleCompact the
// rule of compactLater holds, or each segment would force a compaction;
// after that everything noted is compacted, so reads of the stubs (a
// consumer's scan, a replay) do not step over the bodies they replaced.
func (t *tiering) compactAll() {
	idle := t.e.opts.Now().Sub(t.lastTiered) >= idleCompact
	for _, pc := range t.compacting {
		if idle || t.compactWanted() {
			t.compactNow(pc)
		}
	}
}

func (t *tiering) compactNow(pc *pendingCompaction) {
	delete(t.compacting, pc.stream)
	t.compactions.Add(1)
	t.compactedTo.Store(pc.last)
	if err := t.e.opts.Store.CompactMsgs(pc.stream, pc.first, pc.last); err != nil {
		t.e.log.Warn("tier: compaction after upload failed", "stream", pc.stream, "err", err)
	}
}

// collect deletes the objects pending records name, except uploads in
// progress, and then the records. Deletes are idempotent, so a crash
// between the two only repeats one.
func (t *tiering) collect() error {
	type scope struct {
		ap     *applier
		lo, hi uint64
	}
	scopes := []scope{{t.e.file, 0, 1 << partitionShift}}
	if c := t.e.cl; c != nil {
		c.mu.Lock()
		for g, ap := range c.mu.parts {
			scopes = append(scopes, scope{ap, uint64(g) << partitionShift, uint64(g+1) << partitionShift})
		}
		c.mu.Unlock()
	}
	for _, sc := range scopes {
		if err := t.collectIn(sc.ap, sc.lo, sc.hi); err != nil {
			return err
		}
	}
	return nil
}

// collectIn is collect for the streams with ids in [lo, hi), whose
// apply path is ap.
func (t *tiering) collectIn(ap *applier, lo, hi uint64) error {
	var todo []store.PendingObject
	err := t.e.opts.Store.PendingObjects(lo, hi, func(p store.PendingObject) error {
		todo = append(todo, p)
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range todo {
		t.mu.Lock()
		busy := t.mu.inflight[p.Key]
		t.mu.Unlock()
		if busy {
			continue
		}
		ctx, cancel := context.WithTimeout(t.ctx, t.opts.UploadTimeout)
		err := t.st.Delete(ctx, p.Key)
		cancel()
		if err != nil {
			t.deleteErrors.Add(1)
			return err
		}
		t.cache.Forget(p.Key)
		if r := ap.apply(&proposal{s: t.house, kind: propColdForget, seq: p.Stream, coldKey: p.Key}); r.err != nil {
			return r.err
		}
		t.deletes.Add(1)
		t.e.log.Info("tier: deleted object", "key", p.Key, "garbage", p.Garbage)
	}
	return nil
}
