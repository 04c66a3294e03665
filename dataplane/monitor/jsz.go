package monitor

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream"
	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// JetStreamSource is what /jsz and /varz read JetStream figures from.
type JetStreamSource interface {
	Snapshot() jetstream.Snapshot
	// ConsumerInfos is one stream's consumers, for consumer detail.
	ConsumerInfos(account, stream string) []*api.ConsumerInfo
	// ClusterSnapshot is the meta group and what this node leads; nil
	// when not clustered.
	ClusterSnapshot() *jetstream.ClusterSnapshot
	// ClusterHealth is nil while this node serves its share of the
	// cluster (always, when not clustered); else why not.
	ClusterHealth() error
}

// SetJetStream makes the monitor report JetStream; call before Serve.
func (m *Monitor) SetJetStream(js JetStreamSource) { m.js = js }

// jsConfig, jsStats and jsz mirror nats-server's JetStream monitoring
// documents field for field.
type jsConfig struct {
	MaxMemory    int64         `json:"max_memory"`
	MaxStore     int64         `json:"max_storage"`
	StoreDir     string        `json:"store_dir,omitempty"`
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	Domain       string        `json:"domain,omitempty"`
}

type jsAPIStats struct {
	Level  int    `json:"level"`
	Total  uint64 `json:"total"`
	Errors uint64 `json:"errors"`
}

type jsStats struct {
	Memory         uint64     `json:"memory"`
	Store          uint64     `json:"storage"`
	ReservedMemory uint64     `json:"reserved_memory"`
	ReservedStore  uint64     `json:"reserved_storage"`
	Accounts       int        `json:"accounts"`
	HAAssets       int        `json:"ha_assets"`
	API            jsAPIStats `json:"api"`
}

type jsVarz struct {
	Config *jsConfig `json:"config,omitempty"`
	Stats  *jsStats  `json:"stats,omitempty"`
}

type jsz struct {
	ID       string    `json:"server_id"`
	Now      time.Time `json:"now"`
	Disabled bool      `json:"disabled,omitempty"`
	Config   *jsConfig `json:"config,omitempty"`
	jsStats
	Streams         int              `json:"streams"`
	StreamsLeader   int              `json:"streams_leader,omitempty"`
	Consumers       int              `json:"consumers"`
	ConsumersLeader int              `json:"consumers_leader,omitempty"`
	Messages        uint64           `json:"messages"`
	Bytes           uint64           `json:"bytes"`
	Meta            *metaCluster     `json:"meta_cluster,omitempty"`
	Accounts        []*accountDetail `json:"account_details,omitempty"`
	Total           int              `json:"total"`
	// Tier is Contrail's tiered storage (not in nats-server's document;
	// clients ignore members they do not know). Absent when tiering is off.
	Tier *jetstream.TierStatus `json:"tier,omitempty"`
}

// metaCluster is nats-server's MetaClusterInfo: the meta group as this
// node sees it. natscli's `server report jetstream` marks the server
// whose name is leader, and expects cluster_size servers.
type metaCluster struct {
	Name         string          `json:"name,omitempty"`
	Leader       string          `json:"leader,omitempty"`
	Peer         string          `json:"peer,omitempty"`
	Replicas     []*api.PeerInfo `json:"replicas,omitempty"`
	Size         int             `json:"cluster_size"`
	QuorumNeeded int             `json:"quorum_needed"`
	Pending      int             `json:"pending"`
}

// metaClusterOf renders a cluster snapshot; nil when not clustered.
func metaClusterOf(cs *jetstream.ClusterSnapshot) *metaCluster {
	if cs == nil {
		return nil
	}
	mc := &metaCluster{Name: cs.Name, Leader: cs.Leader, Replicas: cs.Replicas, Size: cs.Size, QuorumNeeded: cs.QuorumNeeded}
	if cs.Leader != "" {
		mc.Peer = jetstream.PeerHash(cs.Leader)
	}
	return mc
}

// accountDetail is one account in /jsz, and the whole answer to
// $SYS.REQ.ACCOUNT.<account>.JSZ. As in nats-server, name is the
// account's name from its JWT, id its key, and the reserved figures are
// the account's untiered storage limits.
type accountDetail struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	jsStats
	Streams []streamDetail `json:"stream_detail,omitempty"`
}

type streamDetail struct {
	Name    string            `json:"name"`
	Created time.Time         `json:"created"`
	Config  *api.StreamConfig `json:"config,omitempty"`
	State   api.StreamState   `json:"state"`
	// Consumers is the consumer detail, when asked for.
	Consumers []*api.ConsumerInfo `json:"consumer_detail,omitempty"`
}

// jszOptions are nats-server's JSzOptions: the query of /jsz, and the
// JSON body of a JSZ request to the system account. Consumer implies
// Streams; Streams without an account implies Accounts.
type jszOptions struct {
	Account  string `json:"account,omitempty"`
	Accounts bool   `json:"accounts,omitempty"`
	Streams  bool   `json:"streams,omitempty"`
	Consumer bool   `json:"consumer,omitempty"`
	Config   bool   `json:"config,omitempty"`
	Offset   int    `json:"offset,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

func configOf(s *jetstream.Snapshot) *jsConfig {
	return &jsConfig{MaxMemory: s.MaxMemory, MaxStore: s.MaxStore, StoreDir: s.StoreDir, SyncInterval: s.SyncInterval, Domain: s.Domain}
}

func statsOf(s *jetstream.Snapshot) jsStats {
	return jsStats{Memory: s.Memory, Store: s.Store, ReservedMemory: s.ReservedMemory, ReservedStore: s.ReservedStore,
		Accounts: len(s.Accounts), API: jsAPIStats{Level: 1, Total: s.APITotal, Errors: s.APIErrors}}
}

func boolParam(r *http.Request, name string) bool {
	switch r.URL.Query().Get(name) {
	case "1", "true":
		return true
	}
	return false
}

// jsz answers /jsz: totals, and with accounts=true (streams=true,
// config=true, acc=<name>) per-account and per-stream detail.
func (m *Monitor) jsz(w http.ResponseWriter, r *http.Request) {
	var o jszOptions
	var err error
	if o.Offset, o.Limit, err = pageParams(r); err != nil {
		badRequest(w, "%v", err)
		return
	}
	o.Account = r.URL.Query().Get("acc")
	o.Accounts, o.Streams, o.Consumer = boolParam(r, "accounts"), boolParam(r, "streams"), boolParam(r, "consumers")
	o.Config = boolParam(r, "config")
	writeJSON(w, r, m.jszDoc(&o))
}

// jszDoc builds /jsz for the options.
func (m *Monitor) jszDoc(o *jszOptions) *jsz {
	out := &jsz{ID: m.srv.ID(), Now: time.Now().UTC()}
	if m.js == nil {
		out.Disabled = true
		return out
	}
	if o.Consumer {
		o.Streams = true
	}
	if o.Streams && o.Account == "" {
		o.Accounts = true
	}
	limit := o.Limit
	if limit <= 0 {
		limit = 1024
	}
	snap := m.js.Snapshot()
	out.Config = configOf(&snap)
	out.jsStats = statsOf(&snap)
	out.Streams, out.Consumers, out.Messages, out.Bytes = snap.Streams, snap.Consumers, snap.Messages, snap.Bytes
	out.Total = len(snap.Accounts)
	if cs := m.js.ClusterSnapshot(); cs != nil {
		out.Meta = metaClusterOf(cs)
		out.StreamsLeader, out.ConsumersLeader = cs.StreamsLeader, cs.ConsumersLeader
	}
	if ts, ok := m.js.(tierSource); ok {
		out.Tier = ts.TierStatus()
	}
	var chosen []jetstream.AccountSnapshot
	for _, a := range snap.Accounts {
		if a.Name == o.Account {
			chosen = []jetstream.AccountSnapshot{a}
			break
		}
	}
	if chosen == nil && o.Accounts {
		chosen = page(snap.Accounts, max(o.Offset, 0), limit)
	}
	for i := range chosen {
		out.Accounts = append(out.Accounts, m.accountDetail(&chosen[i], o))
	}
	return out
}

// accountJsz answers $SYS.REQ.ACCOUNT.<account>.JSZ: the account's
// detail, with its streams when asked.
func (m *Monitor) accountJsz(o *jszOptions) (*accountDetail, error) {
	if m.js == nil {
		return nil, errors.New("jetstream not enabled")
	}
	if o.Consumer {
		o.Streams = true
	}
	for _, a := range m.js.Snapshot().Accounts {
		if a.Name == o.Account {
			return m.accountDetail(&a, o), nil
		}
	}
	if m.srv.LoadedAccount(o.Account) == nil {
		return nil, fmt.Errorf("account %q not found", o.Account)
	}
	return nil, fmt.Errorf("account %q not jetstream enabled", o.Account)
}

// accountDetail renders one account's JetStream usage.
func (m *Monitor) accountDetail(a *jetstream.AccountSnapshot, o *jszOptions) *accountDetail {
	d := &accountDetail{Name: a.Name, ID: a.Name, jsStats: jsStats{Memory: a.Memory, Store: a.Store,
		API: jsAPIStats{Total: a.APITotal, Errors: a.APIErrors}}}
	if acc := m.srv.LoadedAccount(a.Name); acc != nil {
		d.Name = nameTag(acc)
	}
	d.ReservedMemory, d.ReservedStore = untieredLimits(a.Limits)
	if o.Streams {
		for _, s := range a.Streams {
			sd := streamDetail{Name: s.Name, Created: s.Created.UTC(), State: s.State}
			if o.Config {
				sd.Config = s.Config
			}
			if o.Consumer {
				sd.Consumers = m.js.ConsumerInfos(a.Name, s.Name)
				for _, ci := range sd.Consumers {
					if !o.Config {
						ci.Config = nil // as nats-server: configs only with config=true
					}
				}
			}
			d.Streams = append(d.Streams, sd)
		}
	}
	return d
}

// untieredLimits are an account's untiered memory and storage limits as
// nats-server reports them in reserved_memory and reserved_storage:
// unlimited (-1, open mode) reads as the largest uint64, and tiered-only
// limits as 0.
func untieredLimits(l *jetstream.AccountLimits) (mem, store uint64) {
	if l == nil {
		return ^uint64(0), ^uint64(0)
	}
	t, ok := l.Tiers[""]
	if !ok {
		return 0, 0
	}
	return uint64(t.MaxMemory), uint64(t.MaxStore)
}

func page[T any](items []T, offset, limit int) []T {
	if offset >= len(items) {
		return nil
	}
	items = items[offset:]
	return items[:min(limit, len(items))]
}
