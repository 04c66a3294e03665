package jetstream

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// AccountLimits is what one account may use of JetStream, from its account
// JWT. The engine holds a copy: changing the caller's value afterwards has
// no effect until it is passed to UpdateAccount.
//
// A nil *AccountLimits is open mode: every limit unlimited, JetStream on.
type AccountLimits struct {
	// Tiers maps a tier name to its limits: "" for untiered limits (they
	// apply whatever a stream's replica count), or "R1", "R3" for tiered
	// limits. When "" is present it governs every stream, tiers or not,
	// as nats-server selects it first.
	Tiers map[string]api.AccountLimits
}

// Enabled reports whether any tier allows storage (max_memory or
// max_storage != 0); an account whose limits are not enabled gets 10039
// for every API request. Open mode (nil) is enabled.
func (l *AccountLimits) Enabled() bool {
	if l == nil {
		return true
	}
	for _, t := range l.Tiers {
		if t.MaxMemory != 0 || t.MaxStore != 0 {
			return true
		}
	}
	return false
}

// validate refuses tier names nats-server would never select, so a typo in
// a JWT translation shows up as an error instead of an account whose
// streams all fail with 10120.
func (l *AccountLimits) validate() error {
	if l == nil {
		return nil
	}
	for name := range l.Tiers {
		if name == "" {
			continue
		}
		n, ok := strings.CutPrefix(name, "R")
		if r, err := strconv.Atoi(n); !ok || err != nil || r < 1 || r > api.MaxReplicas || "R"+strconv.Itoa(r) != name {
			return fmt.Errorf("jetstream: tier %q: want \"\" or R1..R%d", name, api.MaxReplicas)
		}
	}
	return nil
}

// clone copies l so the engine never shares a map with its caller.
func (l *AccountLimits) clone() *AccountLimits {
	if l == nil {
		return nil
	}
	return &AccountLimits{Tiers: maps.Clone(l.Tiers)}
}

// tiered reports whether the limits are per replica count (no "" tier).
func (l *AccountLimits) tiered() bool {
	if l == nil {
		return false
	}
	_, untiered := l.Tiers[""]
	return !untiered
}

// unlimitedTier is what open mode reports and enforces: nothing.
var unlimitedTier = api.AccountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1,
	MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}

// tierName names the tier of a stream with the given replica count, as
// nats-server does (0 counts as 1).
func tierName(replicas int) string {
	return "R" + strconv.Itoa(max(replicas, 1))
}

// selectTier picks the limits that govern a stream of the given replica
// count, by nats-server's rule: the "" tier when present, else
// "R<replicas>". ok is false when neither exists (10120). The tier name
// returned is "" for untiered limits, which then count every stream.
func (l *AccountLimits) selectTier(replicas int) (tier string, lim api.AccountLimits, ok bool) {
	if l == nil {
		return "", unlimitedTier, true
	}
	if lim, ok := l.Tiers[""]; ok {
		return "", lim, true
	}
	tier = tierName(replicas)
	lim, ok = l.Tiers[tier]
	return tier, lim, ok
}

// inTier reports whether a stream of replicas counts against tier: every
// stream counts against the untiered "" tier.
func inTier(tier string, replicas int) bool {
	return tier == "" || tier == tierName(replicas)
}

// storageCap is what a tier allows a storage type in all: -1 unlimited,
// 0 not at all.
func storageCap(l api.AccountLimits, st api.StorageType) int64 {
	v := l.MaxStore
	if st == api.MemoryStorage {
		v = l.MaxMemory
	}
	return max(v, -1)
}

// streamBytesCap is the largest a single stream of storage type st may
// grow, 0 for no ceiling. JWTs use 0 for "unlimited" here, so 0 and -1
// both mean no ceiling.
func streamBytesCap(l api.AccountLimits, st api.StorageType) int64 {
	v := l.StoreMaxStreamBytes
	if st == api.MemoryStorage {
		v = l.MemoryMaxStreamBytes
	}
	return max(v, 0)
}

// resourcesExceeded is the error for a storage commitment that does not
// fit: nats-server's names differ by storage type.
func resourcesExceeded(st api.StorageType) *api.Error {
	if st == api.MemoryStorage {
		return api.NewMemoryResourcesExceededError()
	}
	return api.NewStorageResourcesExceededError()
}

// commitment is what a stream counts against its account's storage
// limit: its max_bytes when it sets one (reserved up front, as
// nats-server reserves it), else the bytes it holds.
func commitment(cfg *api.StreamConfig, bytes uint64) int64 {
	if cfg.MaxBytes > 0 {
		return cfg.MaxBytes
	}
	return int64(bytes)
}

// ledgerKey is one replica count and storage type: the finest grain any
// tier selects.
type ledgerKey struct {
	replicas int
	storage  api.StorageType
}

// usageLedger counts what an account's streams commit against its
// storage limits, so the publish path can check a limit with one map
// read instead of visiting (and locking) every stream of the account.
//
// Invariant: committed[k] is the sum of commitment(cfg, state.Bytes) over
// the account's streams (attached or held while the account is disabled,
// not removed) whose replica count and storage type are k. Every change to
// a stream's config or byte count is made under the stream's lock, and
// adjusts the ledger in the same critical section.
//
// Lock order: a stream's mu before the ledger's mu; the ledger never
// calls out.
type usageLedger struct {
	mu        sync.Mutex
	committed map[ledgerKey]int64 // guarded by mu
}

func newUsageLedger() *usageLedger {
	return &usageLedger{committed: map[ledgerKey]int64{}}
}

// add moves the commitment of one replica count and storage type.
func (l *usageLedger) add(replicas int, st api.StorageType, delta int64) {
	if l == nil || delta == 0 {
		return
	}
	l.mu.Lock()
	l.committed[ledgerKey{max(replicas, 1), st}] += delta
	l.mu.Unlock()
}

// total is what a tier has committed of storage type st; the "" tier sums
// every replica count, each replica's copy counted (replicaFactor).
func (l *usageLedger) total(tier string, st api.StorageType) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for k, v := range l.committed {
		if k.storage == st && inTier(tier, k.replicas) {
			n += v * replicaFactor(tier, k.replicas)
		}
	}
	return n
}

// replicaFactor is how many times a stream's bytes count against tier,
// as nats-server counts them: untiered limits are flat, so every replica
// of a replicated stream counts; a tier of its own ("R3") is sized for
// the replication already, so the stream counts once.
func replicaFactor(tier string, replicas int) int64 {
	if tier == "" && replicas > 1 {
		return int64(replicas)
	}
	return 1
}

// ledgerFor returns the ledger of an account by name, creating it: one
// ledger per name for the engine's life, so streams recovered before their
// account registers, and streams held while it is disabled, are counted.
func (e *Engine) ledgerFor(account string) *usageLedger {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ledgerLocked(account)
}

func (e *Engine) ledgerLocked(account string) *usageLedger {
	l := e.mu.ledgers[account]
	if l == nil {
		l = newUsageLedger()
		e.mu.ledgers[account] = l
	}
	return l
}

// checkStreamLimits holds a stream create (old nil) or update to the
// account's limits, in nats-server's order: a tier must apply (10120), the
// tier's stream count (10027, creates only), the stream's max_consumers
// against the tier's (10026), then its storage commitment (10047 file,
// 10028 memory). The caller holds a.create, so counts cannot move under it.
func (a *jsAccount) checkStreamLimits(cfg *api.StreamConfig, old *stream) *api.Error {
	lim := a.limits.Load()
	if lim == nil {
		return nil
	}
	tier, tl, ok := lim.selectTier(cfg.Replicas)
	if !ok {
		return api.NewNoLimitsError()
	}
	if old == nil && tl.MaxStreams > 0 && a.countStreams(tier) >= tl.MaxStreams {
		return api.NewMaxStreamsReachedError()
	}
	if cfg.MaxConsumers > 0 && tl.MaxConsumers > 0 && cfg.MaxConsumers > tl.MaxConsumers {
		return api.NewMaxConsumersReachedError()
	}
	return a.checkCommitment(tier, tl, cfg, old)
}

// checkCommitment refuses a stream whose storage commitment does not fit
// beside what the tier has committed already. A new stream without
// max_bytes must find room for at least one byte (nats-server's rule, so
// a tier with no storage of that type refuses it); an update is refused
// only when it grows the commitment.
func (a *jsAccount) checkCommitment(tier string, tl api.AccountLimits, cfg *api.StreamConfig, old *stream) *api.Error {
	capacity := storageCap(tl, cfg.Storage)
	if capacity < 0 {
		return nil
	}
	want := max(commitment(cfg, 0), 1)
	var have int64
	if old != nil {
		old.mu.Lock()
		have = commitment(old.mu.cfg, old.mu.state.Bytes)
		want = commitment(cfg, old.mu.state.Bytes)
		old.mu.Unlock()
		if want <= have {
			return nil
		}
	}
	f := replicaFactor(tier, cfg.Replicas)
	if a.ledger.total(tier, cfg.Storage)-have*f+want*f > capacity {
		return resourcesExceeded(cfg.Storage)
	}
	return nil
}

// consumerLimits returns the tier limits that govern consumers of a
// stream with the given replica count: nil in open mode, 10120 when no
// tier applies.
func (a *jsAccount) consumerLimits(replicas int) (*api.AccountLimits, *api.Error) {
	lim := a.limits.Load()
	if lim == nil {
		return nil, nil
	}
	_, tl, ok := lim.selectTier(replicas)
	if !ok {
		return nil, api.NewNoLimitsError()
	}
	return &tl, nil
}

// checkMsgRoomLocked refuses a publish the account has no room for, as
// nats-server refuses it (10002, or 10120 when no tier applies any more).
// A stream without max_bytes must fit its message beside the tier's
// commitment, and stay within the tier's per-stream ceiling; a stream with
// max_bytes already committed its growth when it was created, so it is
// refused only while the tier is over its limit (after the limit was
// lowered). Called with s.mu held.
func (s *stream) checkMsgRoomLocked(a *jsAccount, size uint64) *api.Error {
	if a == nil {
		return nil
	}
	lim := a.limits.Load()
	if lim == nil {
		return nil
	}
	cfg := s.mu.cfg
	tier, tl, ok := lim.selectTier(cfg.Replicas)
	if !ok {
		return api.NewNoLimitsError()
	}
	capacity := storageCap(tl, cfg.Storage)
	if cfg.MaxBytes > 0 {
		if capacity >= 0 && a.ledger.total(tier, cfg.Storage) > capacity {
			return api.NewAccountResourcesExceededError()
		}
		return nil
	}
	if capacity >= 0 && a.ledger.total(tier, cfg.Storage)+int64(size)*replicaFactor(tier, cfg.Replicas) > capacity {
		return api.NewAccountResourcesExceededError()
	}
	if ceiling := streamBytesCap(tl, cfg.Storage); ceiling > 0 && s.mu.state.Bytes+size > uint64(ceiling) {
		return api.NewAccountResourcesExceededError()
	}
	return nil
}

// bytesChangedLocked records that the stream's byte count moved by
// delta: the store's server-wide usage, and, for a stream without
// max_bytes, its account's commitment. Called with s.mu held, after
// state.Bytes changed.
func (s *stream) bytesChangedLocked(ap *applier, delta int64) {
	ap.used.Add(delta)
	if s.mu.cfg.MaxBytes <= 0 {
		s.ledger.add(s.mu.cfg.Replicas, s.mu.cfg.Storage, delta)
	}
}

// commitLocked adds the stream's whole commitment to its ledger (sign
// +1: it was created or recovered) or takes it away (-1: removed, or about
// to change config). Called with s.mu held.
func (s *stream) commitLocked(sign int64) {
	cfg := s.mu.cfg
	s.ledger.add(cfg.Replicas, cfg.Storage, sign*commitment(cfg, s.mu.state.Bytes))
}
