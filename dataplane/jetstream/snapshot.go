package jetstream

import (
	"sort"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Snapshot is the node's JetStream usage, for monitoring (/jsz, /varz).
type Snapshot struct {
	MaxMemory, MaxStore int64
	StoreDir            string
	SyncInterval        time.Duration
	Domain              string

	Memory, Store uint64
	// ReservedMemory and ReservedStore sum the max_bytes the enabled
	// accounts' streams reserve, as /jsz reports them.
	ReservedMemory, ReservedStore uint64
	Streams, Consumers            int
	Messages, Bytes               uint64
	APITotal                      uint64
	APIErrors                     uint64
	Accounts                      []AccountSnapshot
}

// AccountSnapshot is one JetStream-enabled account's share of a Snapshot:
// what nats-server's /jsz account_details carries (name, usage, reserved
// bytes, API stats, streams), plus the account's limits.
type AccountSnapshot struct {
	// Name is the account's name; in operator mode its public key, which
	// nats-server reports as both name and id.
	Name string
	// Memory and Store are the bytes held by memory and file streams.
	Memory, Store uint64
	// ReservedMemory and ReservedStore are the max_bytes reserved.
	ReservedMemory, ReservedStore uint64
	// Consumers counts the consumers of all the account's streams.
	Consumers int
	// Messages counts the messages of all the account's streams.
	Messages  uint64
	APITotal  uint64
	APIErrors uint64
	// Limits are the account's limits as registered (nil: open mode,
	// unlimited). Callers must not modify them.
	Limits *AccountLimits
	// Streams are the account's streams, by name.
	Streams []StreamSnapshot
}

// StreamSnapshot is one stream in a Snapshot.
type StreamSnapshot struct {
	Name    string
	Created time.Time
	Config  *api.StreamConfig
	// State carries the consumer count too (consumer_count).
	State api.StreamState
	// Consumers counts the stream's consumers.
	Consumers int
}

// Snapshot gathers usage across accounts, sorted by account and stream
// name so repeated reads are stable.
func (e *Engine) Snapshot() Snapshot {
	snap := Snapshot{
		MaxMemory: e.opts.MaxMemoryStore, MaxStore: e.opts.MaxFileStore, StoreDir: e.opts.StoreDir,
		SyncInterval: e.opts.SyncInterval, Domain: e.opts.Domain,
	}
	snap.Accounts = e.Accounts()
	for _, as := range snap.Accounts {
		snap.Memory += as.Memory
		snap.Store += as.Store
		snap.ReservedMemory += as.ReservedMemory
		snap.ReservedStore += as.ReservedStore
		snap.Streams += len(as.Streams)
		snap.Consumers += as.Consumers
		snap.Messages += as.Messages
		snap.Bytes += as.Memory + as.Store
		snap.APITotal += as.APITotal
		snap.APIErrors += as.APIErrors
	}
	if c := e.cl; c != nil {
		// The streams of the partitions this node follows are on its
		// disk too (the accounts above hold the ones it leads).
		f := c.followed()
		snap.Streams += f.streams
		snap.Consumers += f.consumers
		snap.Messages += f.msgs
		snap.Bytes += f.bytes
		snap.Memory += f.memory
		snap.Store += f.bytes - f.memory
	}
	return snap
}

// Accounts reports every JetStream-enabled account, by name, for /jsz's
// account details. Accounts registered with limits that do not enable
// JetStream are left out, as nats-server leaves them out.
func (e *Engine) Accounts() []AccountSnapshot {
	e.mu.Lock()
	accounts := make([]*jsAccount, 0, len(e.mu.accounts))
	for _, a := range e.mu.accounts {
		accounts = append(accounts, a)
	}
	e.mu.Unlock()
	sort.Slice(accounts, func(i, j int) bool { return accounts[i].acc.Name() < accounts[j].acc.Name() })
	out := make([]AccountSnapshot, 0, len(accounts))
	for _, a := range accounts {
		if !a.enabled.Load() {
			continue
		}
		out = append(out, a.snapshot())
	}
	return out
}

// snapshot is the account's AccountSnapshot.
func (a *jsAccount) snapshot() AccountSnapshot {
	usages := a.accountUsages()
	t := tierTotals(usages, "")
	as := AccountSnapshot{Name: a.acc.Name(), Memory: t.Memory, Store: t.Store,
		ReservedMemory: t.ReservedMemory, ReservedStore: t.ReservedStore, Consumers: t.Consumers,
		APITotal: a.apiTotal.Load(), APIErrors: a.apiErrors.Load(), Limits: a.limits.Load()}
	for _, u := range usages {
		as.Messages += u.msgs
		as.Streams = append(as.Streams, StreamSnapshot{Name: u.name, Created: u.created, Config: u.cfg,
			State: u.state, Consumers: u.consumers})
	}
	return as
}

// ConsumerInfos reports the consumers of one stream of one account, by
// name, for /jsz's consumer detail; nil if there is no such stream. It
// builds every consumer's info, so monitoring asks for it only on request.
func (e *Engine) ConsumerInfos(account, stream string) []*api.ConsumerInfo {
	e.mu.Lock()
	a := e.mu.accounts[account]
	e.mu.Unlock()
	if a == nil || !a.enabled.Load() {
		return nil
	}
	s := a.lookup(stream)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	cons := s.consumersLocked()
	s.mu.Unlock()
	out := make([]*api.ConsumerInfo, 0, len(cons))
	for _, c := range cons {
		out = append(out, c.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
