// Package jetstream is a node's JetStream: streams (and later consumers)
// as deterministic state machines over the message store, the $JS.API
// request handlers of every account, and the publish path that captures
// messages into streams.
//
// Everything that changes a stream goes through one apply path: a
// proposal is applied by its stream's apply function on the applier
// goroutine of the stream's store, into a batch that is made durable
// before anyone is told it happened (see applier.go).
package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// Account is the seam to the server: an isolated subject space JetStream
// listens and answers in. Every stream, consumer and API request belongs
// to exactly one Account.
type Account interface {
	Name() string
	// SubscribeInternal listens on filter inside the account; handlers
	// must copy what they keep and must not block.
	SubscribeInternal(filter string, h func(subject, reply, hdr, msg []byte)) (unsubscribe func(), err error)
	// SubscribeInternalPaced is SubscribeInternal for a handler that may
	// ask a publishing client to pause: it returns nil, or a channel
	// closed once the work it queued has drained enough.
	SubscribeInternalPaced(filter string, h func(subject, reply, hdr, msg []byte, routed bool) <-chan struct{}) (unsubscribe func(), err error)
	// Publish sends a message into the account.
	Publish(subject, reply string, hdr, msg []byte)
	// Deliver routes a message by to, presenting it as published on subject.
	Deliver(to, subject, reply string, hdr, msg []byte)
	// HasInterest reports whether anyone subscribes to subject.
	HasInterest(subject string) bool
	// HasSubscriber reports whether anyone subscribes to the literal
	// subject itself, not through a wildcard matching it.
	HasSubscriber(subject string) bool
	// Route returns a handle for delivering to the literal subject to
	// many times: a consumer's per-message path, where matching the
	// subject each time would dominate.
	Route(to string) Route
	// WatchInterest calls fn whenever a client subscribes to a filter
	// matching subject; fn must not block.
	WatchInterest(subject string, fn func()) (cancel func())
}

// Route delivers to one subject (see Account.Route); safe for
// concurrent use. An alias of an unnamed interface, so the server's
// accounts satisfy Account without this package importing theirs.
type Route = interface {
	// Deliver is Account.Deliver to the route's subject.
	Deliver(subject, reply string, hdr, msg []byte)
	// HasInterest is Account.HasInterest for the route's subject.
	HasInterest() bool
}

// Options configure a node's JetStream.
type Options struct {
	// Store holds file-storage streams; Memory holds memory-storage ones.
	Store, Memory *store.Store
	// SyncInterval > 0 opts into lazy fsync (weaker: acknowledged writes
	// may be lost to a power failure within the interval).
	SyncInterval time.Duration
	// MaxFileStore and MaxMemoryStore cap what all accounts may reserve;
	// 0 means unlimited.
	MaxFileStore, MaxMemoryStore int64
	// MaxBufferedMsgs and MaxBufferedSize bound what publishes captured
	// for one stream may hold in the apply path (nats-server's
	// max_buffered_msgs and max_buffered_size); NodeMaxBufferedMsgs and
	// NodeMaxBufferedSize bound it for all streams of the node. 0 takes
	// the defaults (flow.go).
	MaxBufferedMsgs, MaxBufferedSize         int64
	NodeMaxBufferedMsgs, NodeMaxBufferedSize int64
	// StoreDir is where the file store lives, for monitoring.
	StoreDir string
	// Clustered makes the engine one node of a cluster: streams are
	// created through the meta group and replicated ones live in
	// partitions (StartCluster connects the raft groups).
	Clustered bool
	// DigestInterval is how often, on a cluster, each partition's leader
	// has the partition's copies compared and a divergent one repaired
	// (cluster_check.go); 0 never.
	DigestInterval time.Duration
	// LoadAccount, on a clustered node in operator mode, asks the server
	// to load the named account, which registers it (RegisterAccount)
	// once loaded. The engine calls it, off raft's goroutines, for
	// accounts whose streams it must serve but that no client, claim
	// update or stored JWT brought here; it may block. Nil: accounts
	// arrive only as the server loads them.
	LoadAccount func(name string)
	// Domain is the JetStream domain; API subjects are then also served
	// under $JS.<domain>.API.
	Domain string
	// ServerVersion is reported in stream metadata.
	ServerVersion string
	// ServerName is reported as the leader of every stream in STREAM.INFO,
	// as a single nats-server reports itself.
	ServerName string
	Log        *slog.Logger
	// Now is the clock; tests inject one.
	Now func() time.Time
	// Tier configures tiered storage of file streams; off without a store.
	Tier TierOptions
	// Batch bounds atomic batch publishes; zero fields take nats-server's
	// defaults (batch.go).
	Batch BatchLimits
}

// Engine is one node's JetStream.
type Engine struct {
	opts   Options
	log    *slog.Logger
	file   *applier
	memory *applier
	// tiering moves cold file-stream data to an object store; nil when
	// tiering is off.
	tiering  *tiering
	flow     *flowGate // bounds captured publishes in both appliers
	batches  batchNode // the node's open atomic batches (batch.go)
	apiSched *apiScheduler
	// cl is the engine's part of a cluster; nil on a single node.
	cl *clusterState
	// xfer runs stream backups and restores (backup.go).
	xfer *transfers

	mu struct {
		sync.Mutex
		accounts map[string]*jsAccount // by account name
		nextID   uint64
		// reserved is, by store, the max_bytes the node's streams reserve
		// and claims each stream's share of it, by id: a create checks
		// the server's limit without visiting every stream.
		//
		// Invariant: reserved[ap] is the sum of claims[id] over the
		// node's streams stored by ap.
		reserved map[*applier]int64
		claims   map[uint64]int64
		// held holds, by account name, the streams of accounts that are
		// not enabled: read at start-up before their account registered,
		// or detached while it is disabled or removed. Their data stays
		// on disk; enabling the account attaches them.
		held map[string][]*stream
		// ledgers count each account's storage commitments, by account
		// name, for the engine's life (see usageLedger).
		ledgers map[string]*usageLedger
		closed  bool
	}
	wg sync.WaitGroup
}

// storedStream is the stream record's opaque config payload.
type storedStream struct {
	Account string            `json:"account"`
	Config  *api.StreamConfig `json:"config"`
	Created time.Time         `json:"created"`
	// Restoring is set from a restore's create until its stream is
	// filled (propRestoreDone): a kill or a leadership change in between
	// leaves a part of a backup, which must not pass for the stream.
	Restoring bool `json:"restoring,omitempty"`
}

// New recovers every stream from the stores and starts the appliers.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil || opts.Memory == nil {
		return nil, errors.New("jetstream: both stores are required")
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Engine{opts: opts, log: opts.Log, xfer: newTransfers(),
		apiSched: newAPIScheduler(defaultAPILimits(), func(req apiRequest) { req.a.serve(req) })}
	e.mu.accounts = map[string]*jsAccount{}
	e.mu.reserved = map[*applier]int64{}
	e.mu.claims = map[uint64]int64{}
	e.mu.held = map[string][]*stream{}
	e.mu.ledgers = map[string]*usageLedger{}
	e.flow = newFlowGate(limitsFrom(opts))
	if opts.Clustered {
		e.cl = newClusterState(e)
		if err := e.cl.loadCatalog(opts.Store); err != nil {
			return nil, err
		}
	}
	e.file = newApplier(e, opts.Store, opts.SyncInterval, opts.MaxFileStore)
	e.file.nodeUsed = e.fileStoreUsed
	e.memory = newApplier(e, opts.Memory, 0, opts.MaxMemoryStore)
	var unfinished []*stream
	for _, ap := range []*applier{e.file, e.memory} {
		u, err := e.recover(ap)
		if err != nil {
			return nil, err
		}
		unfinished = append(unfinished, u...)
	}
	if opts.Tier.Store != nil {
		e.tiering = newTiering(e, opts.Tier)
	}
	for _, ap := range []*applier{e.file, e.memory} {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			ap.run()
		}()
	}
	e.dropUnfinished(unfinished)
	if e.tiering != nil {
		go e.tiering.run()
		go e.tiering.scanLoop()
	}
	return e, nil
}

// recover loads the unreplicated streams of one store (a partition's
// streams load when this node leads it: see clusterState.take) and holds
// them until their accounts register. It returns, not loaded, those an
// unfinished restore left (splitUnfinished), for New to remove once the
// appliers run.
func (e *Engine) recover(ap *applier) (unfinished []*stream, err error) {
	streams, err := e.recoverRange(ap, 0, 1<<partitionShift)
	if err != nil {
		return nil, err
	}
	streams, unfinished = splitUnfinished(streams)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range unfinished {
		e.mu.nextID = max(e.mu.nextID, s.id) // ids are never reused
	}
	for _, s := range streams {
		e.trackLocked(s, s.mu.cfg)
		e.mu.nextID = max(e.mu.nextID, s.id)
		e.mu.held[s.account] = append(e.mu.held[s.account], s)
	}
	return unfinished, nil
}

// recoverRange reads the streams of ap's store whose ids lie in [lo, hi):
// metadata and state summaries, and of the messages only each stream's
// newest, so start-up stays fast however much is stored. The catalog is
// read in one scan, in stream id order; decoding each stream's record and
// its few reads (consumers, duplicate window, last message id, next TTL)
// run on one worker per CPU, since with many streams those dominate
// start-up. The streams come back detached, in id order, each with its
// account's name in account.
func (e *Engine) recoverRange(ap *applier, lo, hi uint64) ([]*stream, error) {
	now := e.opts.Now()
	type job struct {
		i    int
		info store.StreamInfo
	}
	type done struct {
		s   *stream
		err error
	}
	var (
		jobs    = make(chan job, 256)
		mu      sync.Mutex
		results []done // by catalog position; guarded by mu
		wg      sync.WaitGroup
	)
	var openErr error
	for range runtime.GOMAXPROCS(0) {
		// Each worker reads through its own Recovery; it is handed
		// streams in ascending id order, so its iterator only moves
		// forward.
		rd, err := ap.st.NewRecovery()
		if err != nil {
			openErr = err
			break
		}
		wg.Go(func() {
			defer rd.Close()
			for j := range jobs {
				s, account, err := e.recoverStream(ap, rd, j.info, now)
				if s != nil {
					s.account = account
				}
				mu.Lock()
				if j.i >= len(results) {
					results = append(results, make([]done, j.i+1-len(results))...)
				}
				results[j.i] = done{s, err}
				mu.Unlock()
			}
		})
	}
	if openErr != nil {
		close(jobs)
		wg.Wait()
		return nil, fmt.Errorf("jetstream: recovery: %w", openErr)
	}
	n := 0
	err := ap.st.StreamsIn(lo, hi, func(info store.StreamInfo) error {
		jobs <- job{n, info}
		n++
		return nil
	})
	close(jobs)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	out := make([]*stream, 0, len(results))
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, r.s)
	}
	return out, nil
}

// recoverStream rebuilds one stream from its catalog record, detached,
// and returns it with the name of its account. The stream is not shared
// yet, so its fields are set without its lock.
func (e *Engine) recoverStream(ap *applier, rd *store.Recovery, info store.StreamInfo, now time.Time) (*stream, string, error) {
	var rec storedStream
	if err := json.Unmarshal(info.Config, &rec); err != nil || rec.Config == nil {
		return nil, "", fmt.Errorf("jetstream: stream %q record: %w", info.Name, errors.Join(err, store.ErrCorrupt))
	}
	s := newStream(e, ap, info.ID, rec.Config, rec.Created)
	s.ledger = e.ledgerFor(rec.Account)
	s.mu.state = info.State
	s.mu.detached = true
	s.mu.restoring = rec.Restoring
	// In key order (message, TTL, dedup, consumers), so rd moves forward.
	if err := s.recoverState(rd); err != nil {
		return nil, "", err
	}
	s.commitLocked(+1)
	ap.used.Add(int64(s.mu.state.Bytes))
	s.durable.Store(s.mu.state.LastSeq)
	// Only a stream that allows message TTLs has TTL entries: the flag
	// cannot be turned off once on.
	if rec.Config.AllowMsgTTL {
		if err := s.loadNextTTL(rd); err != nil {
			return nil, "", err
		}
	}
	if err := s.loadDedup(rd, now); err != nil {
		return nil, "", err
	}
	if err := s.loadConsumers(rd); err != nil {
		return nil, "", err
	}
	if err := s.loadCold(rd); err != nil {
		return nil, "", err
	}
	if err := rd.SourceProgress(s.id, func(src string, seq uint64, ident string) error {
		s.mu.progress[src] = sourceProgress{seq: seq, ident: ident}
		return nil
	}); err != nil {
		return nil, "", err
	}
	if err := s.loadSchedules(ap.st); err != nil {
		return nil, "", fmt.Errorf("jetstream: stream %q schedules: %w", info.Name, err)
	}
	return s, rec.Account, nil
}

// recoverState checks the stream's state summary against its newest
// message at start-up, and restores the Nats-Msg-Id of the last message
// (what Nats-Expected-Last-Msg-Id is checked against: "" when the last
// message had none or is gone, as nats-server recovers it).
//
// Every commit is a whole apply group with the summaries it implies (see
// applier), so the check finds nothing to repair; it costs the one
// reverse seek that reading the last message costs anyway. A summary
// found behind its messages (a message above LastSeq, messages where it
// counts none, or none where it counts some: a store written before that
// invariant, or a bug) is rebuilt from the messages and written back,
// because the next publish would otherwise take a sequence already in use.
func (s *stream) recoverState(rd *store.Recovery) error {
	st := s.mu.state
	newest, err := rd.NewestMsg(s.id)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("jetstream: stream %q newest message: %w", s.mu.cfg.Name, err)
	}
	if found && newest.Seq > st.LastSeq || found != (st.Msgs > 0) {
		if err := s.rebuildState(); err != nil {
			return err
		}
	}
	if found && newest.Seq == s.mu.state.LastSeq {
		s.mu.lastMsgID = string(headerValue(newest.Header, api.HeaderMsgID))
	}
	return nil
}

// rebuildState recomputes the state summary from the stream's messages
// and writes it. LastSeq never moves back: sequences above the newest
// message may have been handed out (and their messages removed since).
func (s *stream) rebuildState() error {
	old := s.mu.state
	var st store.StreamState
	err := s.ap.st.ScanMsgs(s.id, 0, math.MaxUint64, func(m *store.Message) error {
		if st.Msgs == 0 {
			st.FirstSeq, st.FirstTime = m.Seq, m.Time
		}
		st.LastSeq, st.LastTime = m.Seq, m.Time
		st.Msgs++
		st.Bytes += storedSize(m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("jetstream: stream %q: rebuild state: %w", s.mu.cfg.Name, err)
	}
	if old.LastSeq > st.LastSeq {
		st.LastSeq, st.LastTime = old.LastSeq, old.LastTime
	}
	if st.Msgs == 0 {
		st.FirstSeq, st.FirstTime = st.LastSeq+1, 0
	}
	b := s.ap.st.NewBatch()
	defer b.Close()
	b.PutStreamState(s.id, st)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("jetstream: stream %q: write rebuilt state: %w", s.mu.cfg.Name, err)
	}
	s.e.log.Warn("jetstream: stream state summary did not match its messages; rebuilt from them",
		"stream", s.mu.cfg.Name, "was", old, "now", st)
	s.mu.state = st
	return nil
}

// Close stops accepting work, lets the appliers finish what was
// submitted, and stops every timer. The stores are the caller's to close.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return
	}
	e.mu.closed = true
	accounts := make([]*jsAccount, 0, len(e.mu.accounts))
	for _, a := range e.mu.accounts {
		accounts = append(accounts, a)
	}
	e.mu.Unlock()
	for _, a := range accounts {
		a.shutdown()
	}
	// Backups and restores end before the appliers a restore fills.
	e.xfer.stop()
	if e.cl != nil {
		e.cl.close()
	}
	e.apiSched.close()
	if e.tiering != nil {
		e.tiering.close()
	}
	e.file.close()
	e.memory.close()
	e.wg.Wait()
	e.apiSched.wait()
}

// newStreamID reserves the next stream id.
func (e *Engine) newStreamID() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.nextID++
	return e.mu.nextID
}

func (e *Engine) applierFor(cfg *api.StreamConfig) *applier {
	if cfg.Storage == api.MemoryStorage {
		return e.memory
	}
	return e.file
}

// track records s among the node's streams with its current config, or
// records its config again after an update.
func (e *Engine) track(s *stream) {
	cfg := s.config()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.trackLocked(s, cfg)
}

// trackLocked is track with e.mu held and s's config read already.
func (e *Engine) trackLocked(s *stream, cfg *api.StreamConfig) {
	claim := max(cfg.MaxBytes, 0)
	e.mu.reserved[s.ap] += claim - e.mu.claims[s.id]
	e.mu.claims[s.id] = claim
}

// untrack forgets a deleted stream and releases its reservation.
func (e *Engine) untrack(s *stream) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.reserved[s.ap] -= e.mu.claims[s.id]
	delete(e.mu.claims, s.id)
}

// reserve claims cfg's max_bytes for s against the server's limit and
// refuses a stream whose max_bytes the server cannot guarantee, as
// nats-server does: max_bytes is reserved up front. The check and the
// claim are one step under e.mu, so creates and updates in different
// accounts cannot both pass on the same room. s's earlier claim (an
// update's) is replaced.
func (e *Engine) reserve(s *stream, cfg *api.StreamConfig) *api.Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ap := s.ap
	if cfg.MaxBytes > 0 && ap.max > 0 && e.mu.reserved[ap]-e.mu.claims[s.id]+cfg.MaxBytes > ap.max {
		if ap == e.memory {
			return api.NewMemoryResourcesExceededError()
		}
		return api.NewStorageResourcesExceededError()
	}
	e.trackLocked(s, cfg)
	return nil
}
