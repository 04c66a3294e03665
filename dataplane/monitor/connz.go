package monitor

import (
	"net/http"
	"sort"
	"time"

	"github.com/contrail/contrail/dataplane/server"
)

type connz struct {
	ID       string      `json:"server_id"`
	Now      time.Time   `json:"now"`
	NumConns int         `json:"num_connections"`
	Total    int         `json:"total"`
	Offset   int         `json:"offset"`
	Limit    int         `json:"limit"`
	Conns    []*connInfo `json:"connections"`
}

type connInfo struct {
	Cid          uint64      `json:"cid"`
	Kind         string      `json:"kind,omitempty"`
	Type         string      `json:"type,omitempty"`
	IP           string      `json:"ip"`
	Port         int         `json:"port"`
	Start        time.Time   `json:"start"`
	LastActivity time.Time   `json:"last_activity"`
	RTT          string      `json:"rtt,omitempty"`
	Uptime       string      `json:"uptime"`
	Idle         string      `json:"idle"`
	Pending      int         `json:"pending_bytes"`
	InMsgs       int64       `json:"in_msgs"`
	OutMsgs      int64       `json:"out_msgs"`
	InBytes      int64       `json:"in_bytes"`
	OutBytes     int64       `json:"out_bytes"`
	NumSubs      uint32      `json:"subscriptions"`
	Name         string      `json:"name,omitempty"`
	Lang         string      `json:"lang,omitempty"`
	Version      string      `json:"version,omitempty"`
	TLSVersion   string      `json:"tls_version,omitempty"`
	TLSCipher    string      `json:"tls_cipher_suite,omitempty"`
	Account      string      `json:"account,omitempty"`
	Subs         []string    `json:"subscriptions_list,omitempty"`
	SubsDetail   []subDetail `json:"subscriptions_list_detail,omitempty"`
}

// globalAccount is the account of clients in open mode; nats-server's
// /connz leaves it out.
const globalAccount = "$G"

type subDetail struct {
	Account string `json:"account,omitempty"`
	Subject string `json:"subject"`
	Queue   string `json:"qgroup,omitempty"`
	Sid     string `json:"sid"`
	Msgs    int64  `json:"msgs"`
	Max     int64  `json:"max,omitempty"`
	Cid     uint64 `json:"cid"`
}

// connSorts are the sort keys /connz accepts, as nats-server names them.
var connSorts = map[string]func(a, b *server.ConnInfo) bool{
	"cid":        func(a, b *server.ConnInfo) bool { return a.CID < b.CID },
	"start":      func(a, b *server.ConnInfo) bool { return a.Start.Before(b.Start) },
	"subs":       func(a, b *server.ConnInfo) bool { return len(a.Subs) > len(b.Subs) },
	"pending":    func(a, b *server.ConnInfo) bool { return a.PendingBytes > b.PendingBytes },
	"msgs_to":    func(a, b *server.ConnInfo) bool { return a.OutMsgs > b.OutMsgs },
	"msgs_from":  func(a, b *server.ConnInfo) bool { return a.InMsgs > b.InMsgs },
	"bytes_to":   func(a, b *server.ConnInfo) bool { return a.OutBytes > b.OutBytes },
	"bytes_from": func(a, b *server.ConnInfo) bool { return a.InBytes > b.InBytes },
	"last":       func(a, b *server.ConnInfo) bool { return a.LastActivity.After(b.LastActivity) },
	"idle":       func(a, b *server.ConnInfo) bool { return a.LastActivity.Before(b.LastActivity) },
	"uptime":     func(a, b *server.ConnInfo) bool { return a.Start.Before(b.Start) },
	"rtt":        func(a, b *server.ConnInfo) bool { return a.RTT > b.RTT },
}

func (m *Monitor) connz(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, limit, err := pageParams(r)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	sortKey := q.Get("sort")
	if sortKey == "" {
		sortKey = "cid"
	}
	less, ok := connSorts[sortKey]
	if !ok {
		badRequest(w, "invalid sorting option %q", sortKey)
		return
	}
	if st := q.Get("state"); st != "" && st != "open" && st != "any" && st != "all" {
		badRequest(w, "invalid state %q: only open connections are kept", st)
		return
	}
	auth := q.Get("auth") == "1" || q.Get("auth") == "true"
	subs := q.Get("subs")
	detail := subs == "detail"
	list := subs == "1" || subs == "true"
	cidFilter, err := intParam(r, "cid", 0)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	acc := q.Get("acc")

	all := m.srv.Conns()
	conns := all[:0]
	for _, c := range all {
		if (cidFilter == 0 || c.CID == uint64(cidFilter)) && (acc == "" || c.Account == acc) {
			conns = append(conns, c)
		}
	}
	sort.SliceStable(conns, func(i, j int) bool { return less(&conns[i], &conns[j]) })
	now := time.Now()
	out := connz{ID: m.srv.ID(), Now: now.UTC(), Total: len(conns), Offset: offset, Limit: limit, Conns: []*connInfo{}}
	for i := offset; i < len(conns) && len(out.Conns) < limit; i++ {
		out.Conns = append(out.Conns, toConnInfo(&conns[i], now, list, detail, auth))
	}
	out.NumConns = len(out.Conns)
	writeJSON(w, r, &out)
}

// toConnInfo renders one connection. As in nats-server, the account is
// shown only when asked for with auth=1, and not for the global account.
func toConnInfo(c *server.ConnInfo, now time.Time, list, detail, auth bool) *connInfo {
	ci := &connInfo{
		Cid: c.CID, Kind: "Client", Type: "nats", IP: c.IP, Port: c.Port,
		Start: c.Start.UTC(), LastActivity: c.LastActivity.UTC(),
		Uptime: uptime(now.Sub(c.Start)), Idle: uptime(now.Sub(c.LastActivity)),
		Pending: int(c.PendingBytes), InMsgs: int64(c.InMsgs), OutMsgs: int64(c.OutMsgs),
		InBytes: int64(c.InBytes), OutBytes: int64(c.OutBytes), NumSubs: uint32(len(c.Subs)),
		Name: c.Name, Lang: c.Lang, Version: c.Version,
		TLSVersion: c.TLSVersion, TLSCipher: c.TLSCipher,
	}
	if auth && c.Account != globalAccount {
		ci.Account = c.Account
	}
	if c.RTT > 0 {
		ci.RTT = c.RTT.String()
	}
	for _, s := range c.Subs {
		switch {
		case detail:
			ci.SubsDetail = append(ci.SubsDetail, toSubDetail(s, c.CID, c.Account))
		case list:
			ci.Subs = append(ci.Subs, s.Subject)
		}
	}
	return ci
}

func toSubDetail(s server.SubInfo, cid uint64, account string) subDetail {
	return subDetail{Account: account, Subject: s.Subject, Queue: s.Queue, Sid: s.SID, Msgs: s.Delivered, Max: s.Max, Cid: cid}
}
