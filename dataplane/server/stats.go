package server

import (
	"sort"
	"time"

	"github.com/contrail/contrail/dataplane/subject"
)

// Stats are the server-wide totals monitoring reports.
type Stats struct {
	Start            time.Time
	Connections      int
	TotalConnections uint64
	Subscriptions    int
	InMsgs, OutMsgs  uint64
	InBytes          uint64
	OutBytes         uint64
	SlowConsumers    uint64
	StaleConnections uint64
	// SlowRoutes counts routes cut because the peer fell too far behind.
	SlowRoutes uint64
}

// Stats snapshots the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Start:            s.start,
		Connections:      s.NumClients(),
		TotalConnections: s.stats.totalConns.Load(),
		Subscriptions:    s.global.clientSubs(),
		InMsgs:           s.stats.inMsgs.Load(),
		OutMsgs:          s.stats.outMsgs.Load(),
		InBytes:          s.stats.inBytes.Load(),
		OutBytes:         s.stats.outBytes.Load(),
		SlowConsumers:    s.stats.slowConsumers.Load(),
		StaleConnections: s.stats.staleConns.Load(),
		SlowRoutes:       s.stats.slowRoutes.Load(),
	}
}

// ConnInfo describes one open client connection.
type ConnInfo struct {
	CID             uint64
	IP              string
	Port            int
	Start           time.Time
	LastActivity    time.Time
	RTT             time.Duration
	PendingBytes    int64
	InMsgs, OutMsgs uint64
	InBytes         uint64
	OutBytes        uint64
	Subs            []SubInfo
	Name            string
	Lang            string
	Version         string
	Account         string
	// User and NameTag are the user's public key and name (operator mode).
	User, NameTag string
	TLSVersion    string
	TLSCipher     string
}

// SubInfo describes one subscription of a connection.
type SubInfo struct {
	Subject   string
	Queue     string
	SID       string
	Max       int64
	Delivered int64
}

// Conns snapshots every open connection, ordered by connection id.
func (s *Server) Conns() []ConnInfo {
	clients := s.clientList()
	out := make([]ConnInfo, 0, len(clients))
	for _, c := range clients {
		out = append(out, c.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CID < out[j].CID })
	return out
}

func (c *client) info() ConnInfo {
	ci := ConnInfo{
		CID:          c.cid,
		IP:           c.host,
		Port:         c.port,
		Start:        c.start,
		LastActivity: time.Unix(0, c.lastActivity.Load()),
		InMsgs:       c.inMsgs.Load(),
		OutMsgs:      c.outMsgs.Load(),
		InBytes:      c.inBytes.Load(),
		OutBytes:     c.outBytes.Load(),
	}
	c.out.mu.Lock()
	ci.PendingBytes = c.out.mu.pending
	c.out.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	ci.RTT = c.mu.rtt
	ci.Name, ci.Lang, ci.Version = c.mu.name, c.mu.lang, c.mu.version
	ci.Account = c.mu.account
	if uc := c.mu.user; uc != nil {
		ci.User, ci.NameTag = uc.Subject, uc.Name
	}
	if st := c.mu.tlsState; st != nil {
		ci.TLSVersion = tlsVersionName(st.Version)
		ci.TLSCipher = tlsCipherName(st.CipherSuite)
	}
	ci.Subs = make([]SubInfo, 0, len(c.mu.subs))
	for _, sub := range c.mu.subs {
		ci.Subs = append(ci.Subs, SubInfo{
			Subject:   string(sub.subject),
			Queue:     string(sub.queue),
			SID:       string(sub.sid),
			Max:       sub.max.Load(),
			Delivered: sub.delivered.Load(),
		})
	}
	sort.Slice(ci.Subs, func(i, j int) bool { return ci.Subs[i].SID < ci.Subs[j].SID })
	return ci
}

// SubStats snapshots the subject index counters of the global account,
// counting client subscriptions only.
func (s *Server) SubStats() subject.Stats {
	st := s.global.subs.Stats()
	st.Subscriptions = s.global.clientSubs()
	return st
}

// Subs lists every subscription with its connection id.
func (s *Server) Subs() []SubDetail {
	var out []SubDetail
	for _, c := range s.Conns() {
		for _, sub := range c.Subs {
			out = append(out, SubDetail{SubInfo: sub, CID: c.CID, Account: c.Account})
		}
	}
	return out
}

// SubDetail is a subscription with the connection and account that own it.
type SubDetail struct {
	SubInfo
	CID     uint64
	Account string
}
