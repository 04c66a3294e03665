package monitor

import (
	"runtime"
	"time"
)

// serverStats is nats-server's ServerStats: what a server ping
// ($SYS.REQ.SERVER.PING) answers with, under "statsz".
type serverStats struct {
	Start               time.Time          `json:"start"`
	Mem                 int64              `json:"mem"`
	Cores               int                `json:"cores"`
	CPU                 float64            `json:"cpu"`
	Connections         int                `json:"connections"`
	TotalConnections    uint64             `json:"total_connections"`
	ActiveAccounts      int                `json:"active_accounts"`
	NumSubs             uint32             `json:"subscriptions"`
	Sent                msgBytes           `json:"sent"`
	SentToClients       msgBytes           `json:"sent_to_clients"`
	Received            msgBytes           `json:"received"`
	ReceivedFromClients msgBytes           `json:"received_from_clients"`
	SlowConsumers       int64              `json:"slow_consumers"`
	SlowConsumersStats  *slowConsumerStats `json:"slow_consumer_stats,omitempty"`
	StaleConnections    int64              `json:"stale_connections,omitempty"`
	JetStream           *jsVarz            `json:"jetstream,omitempty"`
	MaxProcs            int                `json:"gomaxprocs,omitempty"`
	Routes              []routeStat        `json:"routes,omitempty"`
}

// routeStat is one route in a server ping's answer.
type routeStat struct {
	ID       uint64   `json:"rid"`
	Name     string   `json:"name,omitempty"`
	Sent     msgBytes `json:"sent"`
	Received msgBytes `json:"received"`
	Pending  int      `json:"pending"`
}

type msgBytes struct {
	Msgs  int64 `json:"msgs"`
	Bytes int64 `json:"bytes"`
}

// statszDoc builds the server's statistics. Subscriptions and active
// accounts add up every account, since each has its own subject index.
func (m *Monitor) statszDoc() *serverStats {
	st := m.srv.Stats()
	now := time.Now()
	out := &serverStats{
		Start: st.Start.UTC(), Cores: runtime.NumCPU(), MaxProcs: runtime.GOMAXPROCS(0), Mem: rss(),
		Connections: st.Connections, TotalConnections: st.TotalConnections,
		Sent:                msgBytes{Msgs: int64(st.OutMsgs), Bytes: int64(st.OutBytes)},
		SentToClients:       msgBytes{Msgs: int64(st.OutMsgs), Bytes: int64(st.OutBytes)},
		Received:            msgBytes{Msgs: int64(st.InMsgs), Bytes: int64(st.InBytes)},
		ReceivedFromClients: msgBytes{Msgs: int64(st.InMsgs), Bytes: int64(st.InBytes)},
		SlowConsumers:       int64(st.SlowConsumers), StaleConnections: int64(st.StaleConnections),
	}
	if st.SlowConsumers > 0 {
		out.SlowConsumersStats = &slowConsumerStats{Clients: st.SlowConsumers}
	}
	for _, a := range m.srv.Accounts() {
		if a.NumConnections() > 0 {
			out.ActiveAccounts++
		}
	}
	out.NumSubs = clientSubs(m.srv)
	for _, r := range m.srv.Routes() {
		out.Routes = append(out.Routes, routeStat{ID: r.RID, Name: r.RemoteName,
			Sent:     msgBytes{Msgs: int64(r.OutMsgs), Bytes: int64(r.OutBytes)},
			Received: msgBytes{Msgs: int64(r.InMsgs), Bytes: int64(r.InBytes)},
			Pending:  int(r.Pending)})
	}
	m.mu.Lock()
	out.CPU = m.cpu.sample(now)
	m.mu.Unlock()
	if m.js != nil {
		snap := m.js.Snapshot()
		js := statsOf(&snap)
		out.JetStream = &jsVarz{Config: configOf(&snap), Stats: &js}
	}
	return out
}
