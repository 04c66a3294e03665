package monitor

import (
	"fmt"
	"net/http"
	"time"

	"github.com/contrail/contrail/dataplane/server"
	"github.com/contrail/contrail/dataplane/subject"
)

type subsz struct {
	ID  string    `json:"server_id"`
	Now time.Time `json:"now"`
	sublistStats
	Total  int         `json:"total"`
	Offset int         `json:"offset"`
	Limit  int         `json:"limit"`
	Subs   []subDetail `json:"subscriptions_list,omitempty"`
}

type sublistStats struct {
	NumSubs      uint32  `json:"num_subscriptions"`
	NumCache     uint32  `json:"num_cache"`
	NumInserts   uint64  `json:"num_inserts"`
	NumRemoves   uint64  `json:"num_removes"`
	NumMatches   uint64  `json:"num_matches"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	MaxFanout    uint32  `json:"max_fanout"`
	AvgFanout    float64 `json:"avg_fanout"`
}

// subszOptions are nats-server's SubszOptions: the query of /subsz, and
// the JSON body of a SUBSZ request to the system account.
type subszOptions struct {
	Offset int  `json:"offset"`
	Limit  int  `json:"limit"`
	Subs   bool `json:"subscriptions"`
	// Account limits the document to one account.
	Account string `json:"account,omitempty"`
	// Test keeps the subscriptions a publish to this literal subject
	// would reach.
	Test string `json:"test,omitempty"`
}

func (m *Monitor) subsz(w http.ResponseWriter, r *http.Request) {
	var o subszOptions
	var err error
	if o.Offset, o.Limit, err = pageParams(r); err != nil {
		badRequest(w, "%v", err)
		return
	}
	q := r.URL.Query()
	s := q.Get("subs")
	o.Subs = s == "1" || s == "true" || s == "detail"
	o.Test, o.Account = q.Get("test"), q.Get("acc")
	doc, err := m.subszDoc(&o)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	writeJSON(w, r, doc)
}

// subszDoc builds /subsz: index counters summed over the accounts (or the
// one asked for), and the subscriptions when asked.
func (m *Monitor) subszDoc(o *subszOptions) (*subsz, error) {
	if o.Test != "" && !subject.ValidLiteralString(o.Test) {
		return nil, fmt.Errorf("%w: invalid test subject %q: must be a literal subject", server.ErrBadOptions, o.Test)
	}
	limit := o.Limit
	if limit <= 0 {
		limit = 1024
	}
	offset := max(o.Offset, 0)
	var st subject.Stats
	tags := map[string]string{}
	for _, a := range m.srv.Accounts() {
		if o.Account != "" && a.Name() != o.Account {
			continue
		}
		as, _ := m.srv.AccountSubStats(a.Name())
		st.Subscriptions += as.Subscriptions
		st.CacheEntries += as.CacheEntries
		st.Inserts += as.Inserts
		st.Removes += as.Removes
		st.Matches += as.Matches
		st.CacheHits += as.CacheHits
		tags[a.Name()] = nameTag(a)
	}
	out := &subsz{
		ID:  m.srv.ID(),
		Now: time.Now().UTC(),
		sublistStats: sublistStats{
			NumSubs:    uint32(st.Subscriptions),
			NumCache:   uint32(st.CacheEntries),
			NumInserts: st.Inserts,
			NumRemoves: st.Removes,
			NumMatches: st.Matches,
		},
		Offset: offset,
		Limit:  limit,
	}
	if st.Matches > 0 {
		out.CacheHitRate = float64(st.CacheHits) / float64(st.Matches)
	}
	if o.Subs {
		var matched []subDetail
		for _, sd := range m.srv.Subs() {
			if (o.Account == "" || sd.Account == o.Account) && (o.Test == "" || subject.Matches(sd.Subject, o.Test)) {
				matched = append(matched, toSubDetail(sd.SubInfo, sd.CID, sd.Account, tags[sd.Account]))
			}
		}
		out.Total = len(matched)
		out.Subs = page(matched, offset, limit)
	}
	return out, nil
}

// nameTag is the account's name from its JWT, or its key without one, as
// nats-server tags accounts in monitoring.
func nameTag(a *server.Account) string {
	if ac := a.Claims(); ac != nil && ac.Name != "" {
		return ac.Name
	}
	return a.Name()
}
