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

	Memory, Store      uint64
	Streams, Consumers int
	Messages, Bytes    uint64
	APITotal           uint64
	APIErrors          uint64
	Accounts           []AccountSnapshot
}

// AccountSnapshot is one account's share of a Snapshot.
type AccountSnapshot struct {
	Name          string
	Memory, Store uint64
	APITotal      uint64
	APIErrors     uint64
	Streams       []StreamSnapshot
}

// StreamSnapshot is one stream in a Snapshot.
type StreamSnapshot struct {
	Name    string
	Created time.Time
	Config  *api.StreamConfig
	State   api.StreamState
}

// Snapshot gathers usage across accounts, sorted by account and stream
// name so repeated reads are stable.
func (e *Engine) Snapshot() Snapshot {
	snap := Snapshot{
		MaxMemory: e.opts.MaxMemoryStore, MaxStore: e.opts.MaxFileStore, StoreDir: e.opts.StoreDir,
		SyncInterval: e.opts.SyncInterval, Domain: e.opts.Domain,
	}
	e.mu.Lock()
	accounts := make([]*jsAccount, 0, len(e.mu.accounts))
	for _, a := range e.mu.accounts {
		accounts = append(accounts, a)
	}
	e.mu.Unlock()
	sort.Slice(accounts, func(i, j int) bool { return accounts[i].acc.Name() < accounts[j].acc.Name() })
	for _, a := range accounts {
		as := AccountSnapshot{Name: a.acc.Name(), APITotal: a.apiTotal.Load(), APIErrors: a.apiErrors.Load()}
		for _, s := range a.sortedStreams() {
			s.mu.Lock()
			cfg, st := s.mu.cfg, s.mu.state
			s.mu.Unlock()
			if cfg.Storage == api.MemoryStorage {
				as.Memory += st.Bytes
			} else {
				as.Store += st.Bytes
			}
			as.Streams = append(as.Streams, StreamSnapshot{Name: cfg.Name, Created: s.created, Config: cfg, State: stateOf(st)})
			snap.Messages += st.Msgs
			snap.Bytes += st.Bytes
		}
		snap.Memory += as.Memory
		snap.Store += as.Store
		snap.Streams += len(as.Streams)
		snap.APITotal += as.APITotal
		snap.APIErrors += as.APIErrors
		snap.Accounts = append(snap.Accounts, as)
	}
	return snap
}
