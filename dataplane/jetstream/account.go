package jetstream

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// jsAccount is JetStream inside one registered account: its API, its
// limits, and (while enabled) its streams.
//
// Invariant: while enabled, every stream of the account is attached and in
// mu.streams (but for one being created, pending there: see
// createStream); while disabled, mu.streams holds no attached stream and
// the account's streams are held by the engine (Engine.mu.held),
// detached, until the account is enabled again. Transitions happen under
// create.
type jsAccount struct {
	e   *Engine
	acc Account
	// ledger counts the account's storage commitments; it is the engine's
	// ledger for this account name, shared with held streams.
	ledger *usageLedger

	// transfers counts the account's backups and restores running
	// (backup.go).
	transfers atomic.Int32

	// create serialises stream creation, update and deletion, consumer
	// creation, and enabling and disabling, so name, count and limit
	// checks cannot race each other or a transition.
	create sync.Mutex
	// limits are the account's limits, replaced whole by UpdateAccount and
	// never mutated; nil is open mode (unlimited).
	limits atomic.Pointer[AccountLimits]
	// enabled says the account's streams are attached and its API serves
	// requests; when false every API request gets 10039. Written under
	// create.
	enabled atomic.Bool
	mu      struct {
		sync.Mutex
		streams *streamIndex // the attached streams, and those being created; guarded by mu
		// directMirrors are the attached mirrors with mirror_direct, by
		// their origin's name (source.go); guarded by mu.
		directMirrors map[string][]*stream
	}
	apiTotal, apiErrors atomic.Uint64
	unsubs              []func() // the API subscriptions; set once at registration
	// lane is the account's queue in the engine's API scheduler, guarded
	// by the scheduler.
	lane apiLane
	// fencing counts the account's replies waiting for their read fence
	// off the API workers (serve); bounded by maxFencingReplies.
	fencing atomic.Int32
	// leaderless counts the account's 10008 answers waiting out
	// errRespDelay; bounded by maxLeaderlessReplies.
	leaderless atomic.Int32
}

// EnableAccount turns JetStream on for acc with no limits (open mode): its
// API starts answering and the streams it had before a restart capture
// messages again.
func (e *Engine) EnableAccount(acc Account) error {
	return e.RegisterAccount(acc, nil)
}

// RegisterAccount makes acc known to JetStream with the limits of its
// account JWT (nil: unlimited, open mode). Its API subjects are answered
// from now on: normally, when the limits are Enabled, and with 10039 for
// every request when they are not, as nats-server answers an account
// without JetStream. An enabled account's stored streams attach at once.
func (e *Engine) RegisterAccount(acc Account, lim *AccountLimits) error {
	name := acc.Name()
	if err := lim.validate(); err != nil {
		return fmt.Errorf("jetstream: account %q: %w", name, err)
	}
	a := &jsAccount{e: e, acc: acc}
	a.limits.Store(lim.clone())
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return api.NewNotEnabledError()
	}
	if _, dup := e.mu.accounts[name]; dup {
		e.mu.Unlock()
		return fmt.Errorf("jetstream: account %q already registered", name)
	}
	a.ledger = e.ledgerLocked(name)
	// Sized for the streams it will attach: with many, growing the maps
	// one stream at a time is a good part of start-up.
	a.mu.streams = newStreamIndex(len(e.mu.held[name]))
	e.mu.accounts[name] = a
	e.mu.Unlock()

	if lim.Enabled() {
		a.create.Lock()
		err := a.enableLocked()
		a.create.Unlock()
		if err != nil {
			return fmt.Errorf("jetstream: account %q: %w", name, err)
		}
	}
	if err := a.subscribeAPI(); err != nil {
		return fmt.Errorf("jetstream: account %q api: %w", name, err)
	}
	e.log.Debug("jetstream account registered", "account", name, "enabled", lim.Enabled())
	if e.cl != nil {
		// What waited for it runs now, off the caller's goroutine: a
		// create waits for its partition's quorum.
		go e.cl.accountRegistered(a)
	}
	return nil
}

// UpdateAccount applies the limits of a new account JWT. Lower limits
// apply to the next create and publish; nothing stored is deleted. Limits
// that turn JetStream off detach the account's streams and consumers
// (data kept); limits that turn it on attach them again.
func (e *Engine) UpdateAccount(name string, lim *AccountLimits) error {
	if err := lim.validate(); err != nil {
		return fmt.Errorf("jetstream: account %q: %w", name, err)
	}
	e.mu.Lock()
	a := e.mu.accounts[name]
	e.mu.Unlock()
	if a == nil {
		return fmt.Errorf("jetstream: account %q is not registered", name)
	}
	a.create.Lock()
	defer a.create.Unlock()
	a.limits.Store(lim.clone())
	switch on := lim.Enabled(); {
	case on && !a.enabled.Load():
		if err := a.enableLocked(); err != nil {
			return fmt.Errorf("jetstream: account %q: %w", name, err)
		}
		e.log.Info("jetstream enabled for account", "account", name)
	case !on && a.enabled.Load():
		a.disableLocked()
		e.log.Info("jetstream disabled for account", "account", name)
	}
	return nil
}

// RemoveAccount forgets an account that was deleted or disabled: its API
// stops answering and its streams and consumers stop, their data kept on
// disk for a later RegisterAccount of the same name.
func (e *Engine) RemoveAccount(name string) {
	e.mu.Lock()
	a := e.mu.accounts[name]
	e.mu.Unlock()
	if a == nil {
		return
	}
	a.unsubscribeAPI()
	a.create.Lock()
	if a.enabled.Load() {
		a.disableLocked()
	}
	a.create.Unlock()
	// Unregistered last: a RegisterAccount racing this one then fails as
	// a duplicate rather than missing the streams being held.
	e.mu.Lock()
	if e.mu.accounts[name] == a {
		delete(e.mu.accounts, name)
	}
	e.mu.Unlock()
	e.log.Info("jetstream account removed", "account", name)
}

// subscribeAPI listens on the account's API subjects, plain and, with a
// domain, domain-qualified.
func (a *jsAccount) subscribeAPI() error {
	prefixes := []string{"$JS.API.>"}
	if d := a.e.opts.Domain; d != "" {
		prefixes = append(prefixes, "$JS."+d+".API.>")
	}
	for _, p := range prefixes {
		unsub, err := a.acc.SubscribeInternal(p, a.onAPI)
		if err != nil {
			a.unsubscribeAPI()
			return fmt.Errorf("subscribe %s: %w", p, err)
		}
		a.unsubs = append(a.unsubs, unsub)
	}
	return nil
}

func (a *jsAccount) unsubscribeAPI() {
	for _, u := range a.unsubs {
		u()
	}
	a.unsubs = nil
}

// enableLocked attaches the streams the engine holds for the account and
// opens its API. Called with a.create held. On failure the streams not
// attached go back to the engine's hold.
func (a *jsAccount) enableLocked() error {
	name := a.acc.Name()
	a.e.mu.Lock()
	held := a.e.mu.held[name]
	delete(a.e.mu.held, name)
	a.e.mu.Unlock()
	for i, s := range held {
		if err := a.attach(s); err != nil {
			a.e.mu.Lock()
			a.e.mu.held[name] = append(a.e.mu.held[name], held[i:]...)
			a.e.mu.Unlock()
			return err
		}
	}
	a.enabled.Store(true)
	return nil
}

// disableLocked detaches every stream and hands it to the engine's hold:
// no capture, no expiry, no consumers; durable consumers wait, with their
// state, for the account to be enabled again. Called with a.create held.
func (a *jsAccount) disableLocked() {
	a.enabled.Store(false)
	a.mu.Lock()
	streams := a.mu.streams.sorted()
	for _, s := range streams {
		a.mu.streams.remove(s)
	}
	a.mu.Unlock()
	for _, s := range streams {
		s.hold()
	}
	a.e.mu.Lock()
	a.e.mu.held[a.acc.Name()] = append(a.e.mu.held[a.acc.Name()], streams...)
	a.e.mu.Unlock()
}

// attach makes s live in the account: capturing its subjects, expiring,
// running its parked consumers, and then named.
//
// Invariant: a stream is named in its account (found by the API) only
// with all its consumers running. Starting 10,000 consumers takes up to
// a second here (3.5 s before the subject cache change in subject.Index);
// a partition's new leader that named its streams first
// answered their infos with part of their consumers meanwhile, and
// requests for the others with "consumer not found", which a client may
// answer by creating the consumer afresh, its state lost.
func (a *jsAccount) attach(s *stream) error {
	cfg := s.config()
	for _, subj := range cfg.Subjects {
		unsub, err := a.acc.SubscribeInternalPaced(subj, s.capture(a))
		if err != nil {
			s.detach()
			return fmt.Errorf("jetstream: stream %q subject %q: %w", cfg.Name, subj, err)
		}
		s.unsubs = append(s.unsubs, unsub)
	}
	s.mu.Lock()
	s.mu.detached = false
	s.mu.owner = a
	s.armTimerLocked()
	parked := s.mu.parked
	s.mu.parked = nil
	s.mu.Unlock()
	for _, c := range parked {
		c.a = a
	}
	n, err := a.startConsumers(s, parked)
	if err != nil {
		s.mu.Lock()
		s.mu.parked = append(s.mu.parked, parked[n+1:]...)
		s.mu.Unlock()
	}
	a.mu.Lock()
	a.mu.streams.put(s, cfg)
	a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("jetstream: consumer %q: %w", parked[n].name, err)
	}
	s.startSourcing(a)
	return nil
}

// detach stops s capturing messages.
func (s *stream) detach() {
	for _, u := range s.unsubs {
		u()
	}
	s.unsubs = nil
}

// hold detaches s for an account being disabled: capture and expiry stop,
// consumers stop, and each kept consumer (keepsConsumer: a durable, or
// any consumer of a replicated stream) is replaced by a parked successor
// carrying its config and state, started again by attach. An R1
// stream's ephemeral consumers end, as they do on nats-server.
//
// Order matters for retention: the consumers are retired first (so a late
// inactivity removal cannot delete a record or re-run interest checks),
// then stopped, then whatever they submitted is applied while they are
// still the stream's consumers, and only then does the stream let them go.
func (s *stream) hold() {
	s.detach()
	s.mu.Lock()
	cons := s.consumersLocked()
	s.mu.Unlock()
	keep := make([]bool, len(cons))
	for i, c := range cons {
		keep[i] = c.retire()
	}
	for _, c := range cons {
		c.stop()
	}
	s.ap.apply(&proposal{s: s, kind: propSync})
	s.mu.Lock()
	s.mu.detached = true
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
	s.mu.timerAt = 0
	clear(s.mu.cons)
	s.consumersChangedLocked()
	s.mu.Unlock()
	for i, c := range cons {
		if !keep[i] {
			continue
		}
		nc, err := c.successor()
		if err != nil {
			s.e.log.Error("jetstream consumer not kept while account disabled", "stream", c.stream, "consumer", c.name, "err", err)
			continue
		}
		// The retired consumer writes nothing more; its successor writes
		// the state it carries.
		nc.persist()
		s.mu.Lock()
		s.mu.parked = append(s.mu.parked, nc)
		s.mu.Unlock()
	}
}

// retire marks c as done for good, so nothing removes or persists it any
// more, and reports whether it should live on as a successor: kept in
// the store (keepsConsumer) and not deleted.
func (c *consumer) retire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := !c.mu.deleted && c.s.keepsConsumer(c.mu.cfg)
	c.mu.deleted = true
	return keep
}

// successor returns a fresh consumer with a retired one's config,
// creation time and state, not yet started. A stopped consumer cannot run
// again (its quit channel is closed), hence a new value.
func (c *consumer) successor() (*consumer, error) {
	c.mu.Lock()
	cfg, state := c.mu.cfg, c.encodeStateLocked()
	c.mu.Unlock()
	nc := newConsumer(c.s, nil, c.name, cfg, c.created)
	if err := nc.restoreState(state); err != nil {
		return nil, fmt.Errorf("jetstream: consumer %q state: %w", c.name, err)
	}
	return nc, nil
}

// shutdown stops everything of the account at engine close: the API, the
// streams' capture and timers, and the consumers (durables write their
// state first).
func (a *jsAccount) shutdown() {
	a.unsubscribeAPI()
	a.create.Lock()
	defer a.create.Unlock()
	a.enabled.Store(false)
	for _, s := range a.sortedStreams() {
		s.detach()
		s.mu.Lock()
		s.mu.detached = true
		if s.mu.timer != nil {
			s.mu.timer.Stop()
		}
		cons := s.consumersLocked()
		s.mu.Unlock()
		for _, c := range cons {
			c.stop()
		}
	}
}

func (a *jsAccount) lookup(name string) *stream {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.streams.byName[name]
}

// sortedStreams lists the account's attached streams by name.
func (a *jsAccount) sortedStreams() []*stream {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.streams.sorted()
}

// forget takes a stream out of the account's index: deleted, or no
// longer pending.
func (a *jsAccount) forget(s *stream) {
	a.mu.Lock()
	a.mu.streams.remove(s)
	a.mu.Unlock()
}

// createStream creates the stream cfg describes, or returns the existing
// one when a create repeats its config exactly.
//
// The checks, and the reservation of the name, subjects and limits they
// pass, run under a.create; the wait for the create to be durable does
// not, so concurrent creates share an fsync instead of queueing one
// behind another's. While it waits the stream is pending in the index
// (see streamIndex): its subjects and counts hold, a create of the same
// name waits for the outcome, and nothing else sees it yet.
//
// On a clustered node asg is the meta catalog's assignment: the stream
// takes the assigned id, and with it its partition's applier.
func (a *jsAccount) createStream(cfg *api.StreamConfig, asg *assignment) (*stream, *api.Error) {
	for {
		s, fresh, wait, aerr := a.reserveStream(cfg, asg)
		switch {
		case wait != nil:
			<-wait
			continue
		case aerr != nil:
			return nil, aerr
		case !fresh:
			return s, nil
		}
		r := s.ap.apply(&proposal{s: s, acct: a, kind: propCreate})
		return s, a.finishCreate(s, r)
	}
}

// awaitCreate waits while the stream with id is pending under name (its
// create not yet committed or failed).
func (a *jsAccount) awaitCreate(name string, id uint64) {
	for {
		a.mu.Lock()
		p, ok := a.mu.streams.pending[name]
		a.mu.Unlock()
		if !ok || p.s.id != id {
			return
		}
		<-p.done
	}
}

// reserveStream runs a create's checks under a.create and, when they
// pass, files a new stream as pending with its commitments counted.
// It returns the existing stream (fresh false) for a repeated create, or
// a channel to wait on when a create of the same name is pending.
func (a *jsAccount) reserveStream(cfg *api.StreamConfig, asg *assignment) (s *stream, fresh bool, wait <-chan struct{}, aerr *api.Error) {
	a.create.Lock()
	defer a.create.Unlock()
	if !a.enabled.Load() {
		// Disabled while this request waited for the lock.
		return nil, false, nil, api.NewNotEnabledForAccountError()
	}
	if s := a.lookup(cfg.Name); s != nil {
		if !sameConfig(s.config(), cfg) {
			return nil, false, nil, api.NewStreamNameInUseError()
		}
		return s, false, nil, nil
	}
	a.mu.Lock()
	wait = a.mu.streams.pending[cfg.Name].done
	a.mu.Unlock()
	if wait != nil {
		return nil, false, wait, nil
	}
	if err := a.checkSubjectOverlap(cfg.Subjects, cfg.Name); err != nil {
		return nil, false, nil, err
	}
	if err := a.checkStreamLimits(cfg, nil); err != nil {
		return nil, false, nil, err
	}
	ap, id, created := a.e.applierFor(cfg), uint64(0), a.e.opts.Now().UTC()
	if asg != nil {
		id, created = asg.ID, asg.Created
		if g := asg.group(); g != 0 {
			if ap = a.e.cl.partition(g); ap == nil {
				return nil, false, nil, errNotAppended // leadership moved meanwhile
			}
		}
	} else {
		id = a.e.newStreamID()
	}
	s = newStream(a.e, ap, id, cfg, created)
	if err := a.e.reserve(s, cfg); err != nil {
		return nil, false, nil, err
	}
	s.ledger = a.ledger
	s.mu.Lock()
	if cfg.FirstSeq > 1 {
		s.mu.state.FirstSeq, s.mu.state.LastSeq = cfg.FirstSeq, cfg.FirstSeq-1
	}
	// Counted now, not when applied: the next create's checks must see it.
	s.commitLocked(+1)
	s.mu.Unlock()
	a.mu.Lock()
	a.mu.streams.reserve(s, cfg)
	a.mu.Unlock()
	return s, true, nil, nil
}

// finishCreate settles a pending create once its record is durable (r
// without error) or failed: the stream is attached, or, if the account
// was disabled meanwhile, held with its other streams; a failed create
// gives its reservations back.
func (a *jsAccount) finishCreate(s *stream, r result) *api.Error {
	a.create.Lock()
	defer a.create.Unlock()
	a.forget(s)
	if r.err != nil {
		a.e.untrack(s)
		s.mu.Lock()
		s.commitLocked(-1)
		s.mu.Unlock()
		return api.Prefer(r.err, api.NewStreamCreateError(r.err))
	}
	if !a.enabled.Load() {
		s.mu.Lock()
		s.mu.detached = true
		s.mu.Unlock()
		a.e.mu.Lock()
		a.e.mu.held[a.acc.Name()] = append(a.e.mu.held[a.acc.Name()], s)
		a.e.mu.Unlock()
		return api.NewNotEnabledForAccountError()
	}
	if err := a.attach(s); err != nil {
		return api.NewStreamCreateError(err)
	}
	return nil
}

// checkSubjectOverlap refuses subjects that overlap another attached
// stream's (10065, as nats-server); name is the stream being created or
// updated, which may keep its own subjects.
func (a *jsAccount) checkSubjectOverlap(subjects []string, name string) *api.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.streams.overlaps(subjects, a.mu.streams.byName[name]) {
		return api.NewStreamSubjectOverlapError()
	}
	return nil
}

// countStreams counts the account's streams in tier.
func (a *jsAccount) countStreams(tier string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.streams.count(tier)
}

// streamUsage is one stream's share of its account's usage.
type streamUsage struct {
	replicas    int
	storage     api.StorageType
	msgs, bytes uint64
	reserved    uint64 // max_bytes when set
	consumers   int
	name        string
	created     time.Time
	cfg         *api.StreamConfig
	state       api.StreamState
}

// usageOf snapshots a stream for usage reports; parked durable consumers
// count, since they exist on disk and come back with the account.
func usageOf(s *stream) streamUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, st := s.mu.cfg, s.mu.state
	u := streamUsage{replicas: max(cfg.Replicas, 1), storage: cfg.Storage, msgs: st.Msgs, bytes: st.Bytes,
		consumers: len(s.mu.cons) + len(s.mu.parked), name: cfg.Name, created: s.created, cfg: cfg, state: stateOf(st)}
	u.state.Consumers = u.consumers
	if cfg.MaxBytes > 0 {
		u.reserved = uint64(cfg.MaxBytes)
	}
	return u
}

// tierTotals adds up stream usages into one tier's figures.
func tierTotals(streams []streamUsage, tier string) api.Tier {
	var t api.Tier
	for _, u := range streams {
		if !inTier(tier, u.replicas) {
			continue
		}
		t.Streams++
		t.Consumers += u.consumers
		if u.storage == api.MemoryStorage {
			t.Memory += u.bytes
			t.ReservedMemory += u.reserved
		} else {
			t.Store += u.bytes
			t.ReservedStore += u.reserved
		}
	}
	return t
}

// AccountUsage is one account's JetStream footprint, for metering: what
// its streams hold and reserve, and its API traffic.
type AccountUsage struct {
	// Enabled says the account's limits allow JetStream now; a disabled
	// account's streams are still stored and counted here.
	Enabled bool
	// Streams and Consumers count the account's streams and consumers
	// (durable consumers of a disabled account included).
	Streams, Consumers int
	// Messages is the number of messages stored.
	Messages uint64
	// MemoryBytes and StoreBytes are the bytes held by memory and file
	// streams.
	MemoryBytes, StoreBytes uint64
	// ReservedMemory and ReservedStore are the max_bytes reserved by
	// memory and file streams.
	ReservedMemory, ReservedStore uint64
	// APITotal and APIErrors count API requests answered, and those
	// answered with an error.
	APITotal, APIErrors uint64
}

// AccountUsage reports an account's usage for metering, enabled or not.
// ok is false when the engine knows nothing of the account: not
// registered, and no streams stored.
func (e *Engine) AccountUsage(name string) (AccountUsage, bool) {
	e.mu.Lock()
	a := e.mu.accounts[name]
	e.mu.Unlock()
	var u AccountUsage
	var streams []*stream
	if a != nil {
		// Under create no stream moves between the account and the hold.
		a.create.Lock()
		u.Enabled = a.enabled.Load()
		u.APITotal, u.APIErrors = a.apiTotal.Load(), a.apiErrors.Load()
		streams = a.sortedStreams()
	}
	e.mu.Lock()
	streams = append(streams, e.mu.held[name]...)
	e.mu.Unlock()
	if a != nil {
		a.create.Unlock()
	}
	if a == nil && len(streams) == 0 {
		return AccountUsage{}, false
	}
	usages := make([]streamUsage, 0, len(streams))
	for _, s := range streams {
		usages = append(usages, usageOf(s))
	}
	t := tierTotals(usages, "")
	u.Streams, u.Consumers = t.Streams, t.Consumers
	u.MemoryBytes, u.StoreBytes = t.Memory, t.Store
	u.ReservedMemory, u.ReservedStore = t.ReservedMemory, t.ReservedStore
	for _, s := range usages {
		u.Messages += s.msgs
	}
	return u, true
}

// accountUsages snapshots the account's attached streams.
func (a *jsAccount) accountUsages() []streamUsage {
	streams := a.sortedStreams()
	out := make([]streamUsage, 0, len(streams))
	for _, s := range streams {
		out = append(out, usageOf(s))
	}
	return out
}

// accountInfoBody reports usage and limits as nats-server's $JS.API.INFO does:
// untiered limits at the top level; tiered limits in "tiers", one entry
// per tier with limits or streams, and a top level of totals with zero
// limits.
func (a *jsAccount) accountInfoBody() *api.AccountInfo {
	usages := a.accountUsages()
	if c := a.e.cl; c != nil && c.r != nil {
		usages = c.accountUsages(a) // the meta leader answers for the cluster
	}
	info := &api.AccountInfo{
		Tier:   tierTotals(usages, ""),
		Domain: a.e.opts.Domain,
		API:    api.APIStats{Level: apiLevel, Total: a.apiTotal.Load(), Errors: a.apiErrors.Load()},
	}
	lim := a.limits.Load()
	if !lim.tiered() {
		_, info.Limits, _ = lim.selectTier(1)
		return info
	}
	names := slices.Collect(maps.Keys(lim.Tiers))
	for _, u := range usages {
		if t := tierName(u.replicas); !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	info.Tiers = make(map[string]api.Tier, len(names))
	for _, t := range names {
		tier := tierTotals(usages, t)
		tier.Limits = lim.Tiers[t]
		info.Tiers[t] = tier
	}
	return info
}
