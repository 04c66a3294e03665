package monitor

import (
	"net/http"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream"
	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// JetStreamSource is what /jsz and /varz read JetStream figures from.
type JetStreamSource interface {
	Snapshot() jetstream.Snapshot
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
	Streams   int              `json:"streams"`
	Consumers int              `json:"consumers"`
	Messages  uint64           `json:"messages"`
	Bytes     uint64           `json:"bytes"`
	Accounts  []*accountDetail `json:"account_details,omitempty"`
	Total     int              `json:"total"`
}

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
}

func configOf(s *jetstream.Snapshot) *jsConfig {
	return &jsConfig{MaxMemory: s.MaxMemory, MaxStore: s.MaxStore, StoreDir: s.StoreDir, SyncInterval: s.SyncInterval, Domain: s.Domain}
}

func statsOf(s *jetstream.Snapshot) jsStats {
	return jsStats{Memory: s.Memory, Store: s.Store, Accounts: len(s.Accounts),
		API: jsAPIStats{Level: 1, Total: s.APITotal, Errors: s.APIErrors}}
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
	out := jsz{ID: m.srv.ID(), Now: time.Now().UTC()}
	if m.js == nil {
		out.Disabled = true
		writeJSON(w, r, &out)
		return
	}
	offset, limit, err := pageParams(r)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	snap := m.js.Snapshot()
	out.Config = configOf(&snap)
	out.jsStats = statsOf(&snap)
	out.Streams, out.Messages, out.Bytes = snap.Streams, snap.Messages, snap.Bytes
	withStreams, withConfig := boolParam(r, "streams"), boolParam(r, "config")
	accFilter := r.URL.Query().Get("acc")
	if boolParam(r, "accounts") || accFilter != "" || withStreams {
		var details []*accountDetail
		for _, a := range snap.Accounts {
			if accFilter != "" && a.Name != accFilter {
				continue
			}
			d := &accountDetail{Name: a.Name, ID: a.Name, jsStats: jsStats{Memory: a.Memory, Store: a.Store,
				API: jsAPIStats{Level: 1, Total: a.APITotal, Errors: a.APIErrors}}}
			if withStreams {
				for _, s := range a.Streams {
					sd := streamDetail{Name: s.Name, Created: s.Created.UTC(), State: s.State}
					if withConfig {
						sd.Config = s.Config
					}
					d.Streams = append(d.Streams, sd)
				}
			}
			details = append(details, d)
		}
		out.Total = len(details)
		out.Accounts = page(details, offset, limit)
	}
	writeJSON(w, r, &out)
}

func page[T any](items []T, offset, limit int) []T {
	if offset >= len(items) {
		return nil
	}
	items = items[offset:]
	return items[:min(limit, len(items))]
}
