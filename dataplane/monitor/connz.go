package monitor

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/nats-io/jwt/v2"

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
	Cid            uint64      `json:"cid"`
	Kind           string      `json:"kind,omitempty"`
	Type           string      `json:"type,omitempty"`
	IP             string      `json:"ip"`
	Port           int         `json:"port"`
	Start          time.Time   `json:"start"`
	LastActivity   time.Time   `json:"last_activity"`
	RTT            string      `json:"rtt,omitempty"`
	Uptime         string      `json:"uptime"`
	Idle           string      `json:"idle"`
	Pending        int         `json:"pending_bytes"`
	InMsgs         int64       `json:"in_msgs"`
	OutMsgs        int64       `json:"out_msgs"`
	InBytes        int64       `json:"in_bytes"`
	OutBytes       int64       `json:"out_bytes"`
	NumSubs        uint32      `json:"subscriptions"`
	Name           string      `json:"name,omitempty"`
	Lang           string      `json:"lang,omitempty"`
	Version        string      `json:"version,omitempty"`
	TLSVersion     string      `json:"tls_version,omitempty"`
	TLSCipher      string      `json:"tls_cipher_suite,omitempty"`
	AuthorizedUser string      `json:"authorized_user,omitempty"`
	Account        string      `json:"account,omitempty"`
	Subs           []string    `json:"subscriptions_list,omitempty"`
	SubsDetail     []subDetail `json:"subscriptions_list_detail,omitempty"`
	JWT            string      `json:"jwt,omitempty"`
	IssuerKey      string      `json:"issuer_key,omitempty"`
	NameTag        string      `json:"name_tag,omitempty"`
	Tags           jwt.TagList `json:"tags,omitempty"`
}

// globalAccount is the account of clients in open mode; nats-server's
// /connz leaves it out.
const globalAccount = "$G"

type subDetail struct {
	Account    string `json:"account,omitempty"`
	AccountTag string `json:"account_tag,omitempty"`
	Subject    string `json:"subject"`
	Queue      string `json:"qgroup,omitempty"`
	Sid        string `json:"sid"`
	Msgs       int64  `json:"msgs"`
	Max        int64  `json:"max,omitempty"`
	Cid        uint64 `json:"cid"`
}

// connzOptions are nats-server's ConnzOptions: the query of /connz, and
// the JSON body of a CONNZ request to the system account.
type connzOptions struct {
	Sort       string    `json:"sort"`
	Auth       bool      `json:"auth"`
	Subs       bool      `json:"subscriptions"`
	SubsDetail bool      `json:"subscriptions_detail"`
	Offset     int       `json:"offset"`
	Limit      int       `json:"limit"`
	CID        uint64    `json:"cid"`
	State      connState `json:"state"`
	// User and Account filter by the user's public key and the account.
	User    string `json:"user"`
	Account string `json:"acc"`
}

// connState is nats-server's connection state filter: 0 open, 1 closed,
// 2 all. Contrail keeps no closed connections.
type connState int

const (
	connOpen connState = iota
	connClosed
	connAll
)

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

// errClosedConns: closed connections are not kept, so they cannot be
// listed or sorted by.
var errClosedConns = errors.New("only open connections are kept")

func (m *Monitor) connz(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var o connzOptions
	var err error
	if o.Offset, o.Limit, err = pageParams(r); err != nil {
		badRequest(w, "%v", err)
		return
	}
	cid, err := intParam(r, "cid", 0)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	o.CID = uint64(cid)
	switch st := q.Get("state"); st {
	case "", "open":
	case "any", "all":
		o.State = connAll
	default:
		badRequest(w, "invalid state %q: %v", st, errClosedConns)
		return
	}
	subs := q.Get("subs")
	o.Sort, o.Auth = q.Get("sort"), boolParam(r, "auth")
	o.Subs, o.SubsDetail = subs == "1" || subs == "true", subs == "detail"
	o.User, o.Account = q.Get("user"), q.Get("acc")
	doc, err := m.connzDoc(&o)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	writeJSON(w, r, doc)
}

// connzDoc builds /connz for the options. As in nats-server, the account
// and identity of each connection are shown only when asked for with
// auth, and the global account is never named.
func (m *Monitor) connzDoc(o *connzOptions) (*connz, error) {
	sortKey := o.Sort
	if sortKey == "" {
		sortKey = "cid"
	}
	less, ok := connSorts[sortKey]
	if !ok {
		return nil, fmt.Errorf("invalid sorting option: %s", sortKey)
	}
	if o.State == connClosed {
		return nil, fmt.Errorf("%w: %w", server.ErrBadOptions, errClosedConns)
	}
	limit := o.Limit
	if limit <= 0 {
		limit = 1024
	}
	offset := max(o.Offset, 0)
	var ids map[uint64]server.ClientInfo
	if o.Auth || o.User != "" {
		ids = m.srv.ClientIdentities()
	}
	all := m.srv.Conns()
	conns := all[:0]
	for _, c := range all {
		if (o.CID == 0 || c.CID == o.CID) && (o.Account == "" || c.Account == o.Account) &&
			(o.User == "" || ids[c.CID].User == o.User) {
			conns = append(conns, c)
		}
	}
	sort.SliceStable(conns, func(i, j int) bool { return less(&conns[i], &conns[j]) })
	now := time.Now()
	out := &connz{ID: m.srv.ID(), Now: now.UTC(), Total: len(conns), Offset: offset, Limit: limit, Conns: []*connInfo{}}
	for i := offset; i < len(conns) && len(out.Conns) < limit; i++ {
		ci := toConnInfo(&conns[i], now, o.Subs, o.SubsDetail)
		if o.Auth {
			withIdentity(ci, &conns[i], ids[conns[i].CID])
		}
		out.Conns = append(out.Conns, ci)
	}
	out.NumConns = len(out.Conns)
	return out, nil
}

// toConnInfo renders one connection without its identity.
func toConnInfo(c *server.ConnInfo, now time.Time, list, detail bool) *connInfo {
	ci := &connInfo{
		Cid: c.CID, Kind: "Client", Type: "nats", IP: c.IP, Port: c.Port,
		Start: c.Start.UTC(), LastActivity: c.LastActivity.UTC(),
		Uptime: uptime(now.Sub(c.Start)), Idle: uptime(now.Sub(c.LastActivity)),
		Pending: int(c.PendingBytes), InMsgs: int64(c.InMsgs), OutMsgs: int64(c.OutMsgs),
		InBytes: int64(c.InBytes), OutBytes: int64(c.OutBytes), NumSubs: uint32(len(c.Subs)),
		Name: c.Name, Lang: c.Lang, Version: c.Version,
		TLSVersion: c.TLSVersion, TLSCipher: c.TLSCipher,
	}
	if c.RTT > 0 {
		ci.RTT = c.RTT.String()
	}
	for _, s := range c.Subs {
		switch {
		case detail:
			ci.SubsDetail = append(ci.SubsDetail, toSubDetail(s, c.CID, c.Account, ""))
		case list:
			ci.Subs = append(ci.Subs, s.Subject)
		}
	}
	return ci
}

// withIdentity adds who the connection authenticated as (auth=1): the
// user's key, the account (not the global one), the user JWT unless it
// is a bearer token, its issuer, tags, and the account's name.
func withIdentity(ci *connInfo, c *server.ConnInfo, id server.ClientInfo) {
	ci.AuthorizedUser = c.User
	if c.Account != globalAccount {
		ci.Account = c.Account
	}
	ci.JWT, ci.IssuerKey, ci.NameTag, ci.Tags = redactBearer(id.JWT), id.IssuerKey, id.NameTag, id.Tags
}

// redactBearer hides a bearer user JWT: holding it is enough to connect.
func redactBearer(token string) string {
	if token == "" {
		return ""
	}
	if uc, err := jwt.DecodeUserClaims(token); err == nil && uc.BearerToken {
		return ""
	}
	return token
}

func toSubDetail(s server.SubInfo, cid uint64, account, tag string) subDetail {
	return subDetail{Account: account, AccountTag: tag, Subject: s.Subject, Queue: s.Queue, Sid: s.SID,
		Msgs: s.Delivered, Max: s.Max, Cid: cid}
}
