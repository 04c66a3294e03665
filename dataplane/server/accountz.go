package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/subject"
)

// AccountStat is one account's connections and traffic on this server:
// what a control plane meters, as nats-server's account_statz and
// account connection events report it. Received counts what the
// account's clients published; Sent what they were delivered.
type AccountStat struct {
	Account       string    `json:"acc"`
	Name          string    `json:"name"`
	Conns         int       `json:"conns"`
	LeafNodes     int       `json:"leafnodes"`
	TotalConns    int       `json:"total_conns"`
	NumSubs       uint32    `json:"num_subscriptions"`
	Sent          DataStats `json:"sent"`
	Received      DataStats `json:"received"`
	SlowConsumers int64     `json:"slow_consumers"`
}

// AccountStatz is nats-server's /accstatz document.
type AccountStatz struct {
	ID       string         `json:"server_id"`
	Now      time.Time      `json:"now"`
	Accounts []*AccountStat `json:"account_statz"`
}

// AccountStatzOptions choose the accounts of an AccountStatz: those
// listed (all when none are), and only those with connections unless
// IncludeUnused.
type AccountStatzOptions struct {
	Accounts      []string `json:"accounts"`
	IncludeUnused bool     `json:"include_unused"`
}

// AccountStatz reports the chosen accounts: listed ones in the order
// asked, otherwise all by name. Only accounts loaded on this node count.
func (s *Server) AccountStatz(opts *AccountStatzOptions) *AccountStatz {
	if opts == nil {
		opts = &AccountStatzOptions{}
	}
	out := &AccountStatz{ID: s.id, Now: time.Now().UTC(), Accounts: []*AccountStat{}}
	var accs []*Account
	if len(opts.Accounts) == 0 {
		accs = s.Accounts()
		sort.Slice(accs, func(i, j int) bool { return accs[i].name < accs[j].name })
	} else {
		for _, name := range opts.Accounts {
			if a := s.LoadedAccount(name); a != nil {
				accs = append(accs, a)
			}
		}
	}
	for _, a := range accs {
		if opts.IncludeUnused || a.NumConnections() > 0 {
			out.Accounts = append(out.Accounts, a.statz())
		}
	}
	return out
}

// statz is the account's AccountStat now.
func (a *Account) statz() *AccountStat {
	t := a.Totals()
	conns := a.NumConnections()
	links := func(m MsgBytes) DataStats {
		return DataStats{MsgBytes: m, Gateways: &MsgBytes{}, Routes: &MsgBytes{}, Leafs: &MsgBytes{}}
	}
	return &AccountStat{
		Account: a.name, Name: a.nameTag(), Conns: conns, TotalConns: conns, NumSubs: uint32(a.clientSubs()),
		Received:      links(MsgBytes{Msgs: int64(t.InMsgs), Bytes: int64(t.InBytes)}),
		Sent:          links(MsgBytes{Msgs: int64(t.OutMsgs), Bytes: int64(t.OutBytes)}),
		SlowConsumers: int64(a.slowConsumers.Load()),
	}
}

// nameTag is the account's name from its JWT, or its key without one.
func (a *Account) nameTag() string {
	if ac := a.Claims(); ac != nil && ac.Name != "" {
		return ac.Name
	}
	return a.name
}

// AuthRequired reports whether clients must authenticate (operator mode,
// or nkey users), as /varz announces it.
func (s *Server) AuthRequired() bool { return s.authRequired }

// LoadedAccount returns the named account if the node has it, without
// asking the resolver: monitoring reports what runs here.
func (s *Server) LoadedAccount(name string) *Account {
	if s.accts.m == nil {
		if name == s.global.name {
			return s.global
		}
		return nil
	}
	s.accts.mu.Lock()
	defer s.accts.mu.Unlock()
	return s.accts.m[name]
}

// Accountz is nats-server's /accountz document: the accounts a node has,
// or the detail of one.
type Accountz struct {
	ID            string       `json:"server_id"`
	Now           time.Time    `json:"now"`
	SystemAccount string       `json:"system_account,omitempty"`
	Accounts      []string     `json:"accounts,omitempty"`
	Account       *AccountInfo `json:"account_detail,omitempty"`
}

// AccountInfo is one account's detail in /accountz and the answer to
// $SYS.REQ.ACCOUNT.<account>.INFO, with nats-server's field names.
// Contrail has no subject mappings, so those are absent.
type AccountInfo struct {
	AccountName string `json:"account_name"`
	// LastUpdate is when the claims in use were issued.
	LastUpdate  time.Time            `json:"update_time,omitempty"`
	IsSystem    bool                 `json:"is_system,omitempty"`
	Expired     bool                 `json:"expired"`
	Complete    bool                 `json:"complete"`
	JetStream   bool                 `json:"jetstream_enabled"`
	LeafCnt     int                  `json:"leafnode_connections"`
	ClientCnt   int                  `json:"client_connections"`
	SubCnt      uint32               `json:"subscriptions"`
	Exports     []ExtExport          `json:"exports,omitempty"`
	Imports     []ExtImport          `json:"imports,omitempty"`
	JWT         string               `json:"jwt,omitempty"`
	IssuerKey   string               `json:"issuer_key,omitempty"`
	NameTag     string               `json:"name_tag,omitempty"`
	Tags        jwt.TagList          `json:"tags,omitempty"`
	Claim       *jwt.AccountClaims   `json:"decoded_jwt,omitempty"`
	Vr          []JWTIssue           `json:"validation_result_jwt,omitempty"`
	RevokedUser map[string]time.Time `json:"revoked_user,omitempty"`
	Sublist     *SublistStats        `json:"sublist_stats,omitempty"`
}

// ExtExport is one export of the account's JWT, with the activations
// it revoked.
type ExtExport struct {
	jwt.Export
	RevokedAct map[string]time.Time `json:"revoked_activations,omitempty"`
}

// ExtImport is one import of the account's JWT in force. Invalid is
// nats-server's flag for an import that lost its exporter; Contrail
// removes such an import instead, so it is always false.
type ExtImport struct {
	jwt.Import
	Invalid  bool `json:"invalid"`
	Share    bool `json:"share"`
	Tracking bool `json:"tracking"`
}

// JWTIssue is a problem the account JWT's validation reports.
type JWTIssue struct {
	Description string `json:"description"`
	Blocking    bool   `json:"blocking"`
	Time        bool   `json:"time_check"`
}

// SublistStats are an account's subject index counters, as nats-server
// names them. Contrail does not track fan-out, so those fields are zero.
type SublistStats struct {
	NumSubs      uint32  `json:"num_subscriptions"`
	NumCache     uint32  `json:"num_cache"`
	NumInserts   uint64  `json:"num_inserts"`
	NumRemoves   uint64  `json:"num_removes"`
	NumMatches   uint64  `json:"num_matches"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	MaxFanout    uint32  `json:"max_fanout"`
	AvgFanout    float64 `json:"avg_fanout"`
}

// Accountz lists the node's accounts, sorted, or details account when it
// is not empty.
func (s *Server) Accountz(account string) (*Accountz, error) {
	out := &Accountz{ID: s.id, Now: time.Now().UTC()}
	if s.sys != nil {
		out.SystemAccount = s.sys.name
	}
	if account == "" {
		out.Accounts = []string{}
		for _, a := range s.Accounts() {
			out.Accounts = append(out.Accounts, a.name)
		}
		sort.Strings(out.Accounts)
		return out, nil
	}
	info, err := s.accountInfo(account)
	if err != nil {
		return nil, err
	}
	out.Account = info
	return out, nil
}

// accountInfo details a loaded account.
func (s *Server) accountInfo(name string) (*AccountInfo, error) {
	a := s.LoadedAccount(name)
	if a == nil {
		return nil, fmt.Errorf("Account %s does not exist", name)
	}
	info := &AccountInfo{AccountName: name, IsSystem: a == s.sys, Complete: true,
		ClientCnt: a.NumConnections(), SubCnt: uint32(a.clientSubs()), Sublist: a.sublistStats(),
		LastUpdate: s.start.UTC(), JetStream: s.jetstream.Load() != nil}
	a.cmu.Lock()
	info.Expired = a.cmu.disabled
	a.cmu.Unlock()
	ac := a.Claims()
	if ac == nil {
		return info, nil
	}
	info.LastUpdate = time.Unix(ac.IssuedAt, 0).UTC()
	info.JetStream = info.JetStream && ac.Limits.IsJSEnabled()
	info.JWT = s.accountJWT(a, ac)
	info.IssuerKey, info.NameTag, info.Tags, info.Claim = ac.Issuer, ac.Name, ac.Tags, ac
	info.Exports = exportsInfo(ac)
	info.Imports = s.importsInfo(a, ac)
	var vr jwt.ValidationResults
	ac.Validate(&vr)
	for _, i := range vr.Issues {
		info.Vr = append(info.Vr, JWTIssue{Description: i.Description, Blocking: i.Blocking, Time: i.TimeCheck})
	}
	if len(ac.Revocations) > 0 {
		info.RevokedUser = make(map[string]time.Time, len(ac.Revocations))
		for k, v := range ac.Revocations {
			info.RevokedUser[k] = time.Unix(v, 0).UTC()
		}
	}
	return info, nil
}

// accountJWT is the JWT the account's claims in use came from, as the
// resolver holds it; empty if the resolver now holds another one.
func (s *Server) accountJWT(a *Account, ac *jwt.AccountClaims) string {
	if s.op == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	token, err := s.op.Resolver.Fetch(ctx, a.name)
	if err != nil {
		return ""
	}
	if held, err := jwt.DecodeAccountClaims(token); err != nil || held.ID != ac.ID {
		return ""
	}
	return token
}

// sublistStats reports the account's index counters, client
// subscriptions only.
func (a *Account) sublistStats() *SublistStats {
	st := a.subs.Stats()
	out := &SublistStats{NumSubs: uint32(a.clientSubs()), NumCache: uint32(st.CacheEntries),
		NumInserts: st.Inserts, NumRemoves: st.Removes, NumMatches: st.Matches}
	if st.Matches > 0 {
		out.CacheHitRate = float64(st.CacheHits) / float64(st.Matches)
	}
	return out
}

// AccountSubStats reports a loaded account's subject index counters,
// counting client subscriptions only, for /subsz to add up.
func (s *Server) AccountSubStats(account string) (subject.Stats, bool) {
	a := s.LoadedAccount(account)
	if a == nil {
		return subject.Stats{}, false
	}
	st := a.subs.Stats()
	st.Subscriptions = a.clientSubs()
	return st, true
}

// ClientIdentities reports, by connection id, who each authenticated
// connection is (user, account, JWT, issuer, tags), for /connz?auth=1.
func (s *Server) ClientIdentities() map[uint64]ClientInfo {
	st := s.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[uint64]ClientInfo, len(st.mu.live))
	for c, ci := range st.mu.live {
		out[c.cid] = *ci
	}
	return out
}

// exportsInfo lists the claims' exports as nats-server reports them.
func exportsInfo(ac *jwt.AccountClaims) []ExtExport {
	var out []ExtExport
	for _, e := range ac.Exports {
		if e == nil {
			continue
		}
		x := ExtExport{Export: *e}
		if len(e.Revocations) > 0 {
			x.RevokedAct = make(map[string]time.Time, len(e.Revocations))
			for k, at := range e.Revocations {
				x.RevokedAct[k] = time.Unix(at, 0).UTC()
			}
		}
		out = append(out, x)
	}
	return out
}

// importsInfo lists the claims' imports that are in force, as nats-server
// lists only the imports it could add.
func (s *Server) importsInfo(a *Account, ac *jwt.AccountClaims) []ExtImport {
	reg := &s.accts.links
	reg.mu.Lock()
	defer reg.mu.Unlock()
	now := time.Now()
	var out []ExtImport
	for _, imp := range ac.Imports {
		if imp == nil {
			continue
		}
		if p, _, err := s.planImport(a, imp, now); err == nil && p != nil {
			if _, ok := a.links.installed[p.key]; ok {
				out = append(out, ExtImport{Import: *imp})
			}
		}
	}
	return out
}
