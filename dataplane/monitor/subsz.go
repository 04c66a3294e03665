package monitor

import (
	"net/http"
	"time"

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

func (m *Monitor) subsz(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := pageParams(r)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	q := r.URL.Query()
	filter := q.Get("test")
	if filter != "" && !subject.ValidLiteralString(filter) {
		badRequest(w, "invalid test subject %q: must be a literal subject", filter)
		return
	}
	st := m.srv.SubStats()
	out := subsz{
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
	if s := q.Get("subs"); s == "1" || s == "true" || s == "detail" {
		var matched []subDetail
		for _, sd := range m.srv.Subs() {
			if filter == "" || subject.Matches(sd.Subject, filter) {
				matched = append(matched, toSubDetail(sd.SubInfo, sd.CID, sd.Account))
			}
		}
		out.Total = len(matched)
		if offset < len(matched) {
			matched = matched[offset:]
			out.Subs = matched[:min(limit, len(matched))]
		}
	}
	writeJSON(w, r, &out)
}
