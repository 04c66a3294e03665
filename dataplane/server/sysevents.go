package server

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
)

// Event subjects in the system account, as nats-server publishes them: a
// control plane meters connections by listening to them.
const (
	subjConnectEvent     = "$SYS.ACCOUNT.%s.CONNECT"
	subjDisconnectEvent  = "$SYS.ACCOUNT.%s.DISCONNECT"
	subjAccConnsEvent    = "$SYS.ACCOUNT.%s.SERVER.CONNS"
	subjAccConnsEventOld = "$SYS.SERVER.ACCOUNT.%s.CONNS"

	typeConnectEvent    = "io.nats.server.advisory.v1.client_connect"
	typeDisconnectEvent = "io.nats.server.advisory.v1.client_disconnect"
	typeAccountConns    = "io.nats.server.advisory.v1.account_connections"
)

// TypedEvent heads every event with its schema type, a unique id and the
// time it happened, as nats-server's advisories do.
type TypedEvent struct {
	Type string    `json:"type"`
	ID   string    `json:"id"`
	Time time.Time `json:"timestamp"`
}

// ClientInfo describes a client connection in system events and replies,
// with nats-server's field names.
type ClientInfo struct {
	Start *time.Time `json:"start,omitempty"`
	Host  string     `json:"host,omitempty"`
	ID    uint64     `json:"id,omitempty"`
	// Account is the account's public key ("$G" in open mode).
	Account string `json:"acc,omitempty"`
	// User is the user's public key.
	User    string        `json:"user,omitempty"`
	Name    string        `json:"name,omitempty"`
	Lang    string        `json:"lang,omitempty"`
	Version string        `json:"ver,omitempty"`
	RTT     time.Duration `json:"rtt,omitempty"`
	Stop    *time.Time    `json:"stop,omitempty"`
	// JWT is the user JWT the client connected with.
	JWT string `json:"jwt,omitempty"`
	// IssuerKey signed the user: the account, or one of its signing keys.
	IssuerKey string `json:"issuer_key,omitempty"`
	// NameTag is the account's name from its JWT.
	NameTag    string      `json:"name_tag,omitempty"`
	Tags       jwt.TagList `json:"tags,omitempty"`
	Kind       string      `json:"kind,omitempty"`
	ClientType string      `json:"client_type,omitempty"`
}

// ConnectEventMsg announces an authenticated client on
// $SYS.ACCOUNT.<account>.CONNECT.
type ConnectEventMsg struct {
	TypedEvent
	Server *sysServerInfo `json:"server"`
	Client ClientInfo     `json:"client"`
}

// DisconnectEventMsg announces the end of a client announced by a
// ConnectEventMsg, with what it sent and received, on
// $SYS.ACCOUNT.<account>.DISCONNECT.
type DisconnectEventMsg struct {
	TypedEvent
	Server   *sysServerInfo `json:"server"`
	Client   ClientInfo     `json:"client"`
	Sent     DataStats      `json:"sent"`
	Received DataStats      `json:"received"`
	Reason   string         `json:"reason"`
}

// AccountNumConns reports an account's connections on this server, sent
// when they change and in answer to $SYS.REQ.ACCOUNT.<account>.CONNS.
type AccountNumConns struct {
	TypedEvent
	Server *sysServerInfo `json:"server"`
	AccountStat
}

// MsgBytes counts messages and their payload bytes.
type MsgBytes struct {
	Msgs  int64 `json:"msgs"`
	Bytes int64 `json:"bytes"`
}

// DataStats counts traffic; the per-link figures are nats-server's
// (Contrail has no routes, gateways or leaf nodes, so they are zero when
// present).
type DataStats struct {
	MsgBytes
	Gateways *MsgBytes `json:"gateways,omitempty"`
	Routes   *MsgBytes `json:"routes,omitempty"`
	Leafs    *MsgBytes `json:"leafs,omitempty"`
}

// sysEvent publishes one queued event.
type sysEvent func()

// accountConnected is called on the client's read loop once CONNECT has
// authenticated it: it records the client's identity and queues its
// connect event. Clients of open mode are not announced, as nats-server
// announces none in the global account.
func (s *Server) accountConnected(c *client) {
	if !c.authed.Load() {
		return
	}
	ci := c.identity()
	acc := c.acc
	var conns sysEvent
	if s.sys != nil {
		conns = s.accountConnsEvent(acc) // walks the account's clients: not under st.mu
	}
	st := s.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	if c.closed.Load() {
		// close ran (or is running) and found no identity: neither
		// event is sent.
		return
	}
	st.mu.live[c] = ci
	if s.sys == nil {
		return
	}
	m := &ConnectEventMsg{TypedEvent: newTypedEvent(typeConnectEvent, time.Now()), Client: *ci}
	st.queueLocked(func() {
		m.Server = s.sysInfo()
		s.sysReply(fmt.Sprintf(subjConnectEvent, acc.name), m)
	})
	st.queueLocked(conns)
}

// accountDisconnected is called by close for an authenticated client,
// after it left its account: it queues the client's disconnect event.
func (s *Server) accountDisconnected(c *client, reason string) {
	now := time.Now().UTC()
	c.mu.Lock()
	rtt := c.mu.rtt
	c.mu.Unlock()
	var conns sysEvent
	if s.sys != nil {
		conns = s.accountConnsEvent(c.acc) // walks the account's clients: not under st.mu
	}
	st := s.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	ci, ok := st.mu.live[c]
	if !ok {
		return
	}
	delete(st.mu.live, c)
	if s.sys == nil {
		return
	}
	m := &DisconnectEventMsg{TypedEvent: newTypedEvent(typeDisconnectEvent, now), Client: *ci, Reason: reason,
		Sent:     DataStats{MsgBytes: MsgBytes{Msgs: int64(c.inMsgs.Load()), Bytes: int64(c.inBytes.Load())}},
		Received: DataStats{MsgBytes: MsgBytes{Msgs: int64(c.outMsgs.Load()), Bytes: int64(c.outBytes.Load())}},
	}
	m.Client.Stop, m.Client.RTT = &now, rtt
	acc := c.acc
	st.queueLocked(func() {
		m.Server = s.sysInfo()
		s.sysReply(fmt.Sprintf(subjDisconnectEvent, acc.name), m)
	})
	st.queueLocked(conns)
}

// accountConnsEvent publishes the account's connections as they are now,
// right after a client joined or left, on the subjects nats-server uses.
func (s *Server) accountConnsEvent(acc *Account) sysEvent {
	m := &AccountNumConns{TypedEvent: newTypedEvent(typeAccountConns, time.Now()), AccountStat: *acc.statz()}
	return func() {
		m.Server = s.sysInfo()
		s.sysReply(fmt.Sprintf(subjAccConnsEvent, acc.name), m)
		s.sysReply(fmt.Sprintf(subjAccConnsEventOld, acc.name), m)
	}
}

// identity is the client's ClientInfo for events. It runs on the read
// loop, which owns c.opts.
func (c *client) identity() *ClientInfo {
	start := c.start.UTC()
	ci := &ClientInfo{Start: &start, Host: c.host, ID: c.cid, JWT: c.opts.JWT, Kind: "Client", ClientType: "nats"}
	c.mu.Lock()
	ci.Account = c.mu.account
	ci.Name, ci.Lang, ci.Version = c.mu.name, c.mu.lang, c.mu.version
	uc := c.mu.user
	c.mu.Unlock()
	if uc != nil {
		ci.User, ci.Tags = uc.Subject, uc.Tags
		// A user signed by one of the account's signing keys names it as
		// issuer; one signed by the account itself names the account.
		ci.IssuerKey = c.acc.name
		if uc.IssuerAccount != "" {
			ci.IssuerKey = uc.Issuer
		}
	}
	if ac := c.acc.Claims(); ac != nil {
		ci.NameTag = ac.Name
	}
	return ci
}

// queueLocked queues an event for the publishing goroutine, starting it
// if needed. Events go out one at a time, in the order queued.
func (st *sysState) queueLocked(ev sysEvent) {
	st.mu.queue = append(st.mu.queue, ev)
	if !st.mu.running {
		st.mu.running = true
		go st.publishLoop()
	}
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// publishLoop publishes queued events until the server shuts down. Events
// are published off the goroutines that cause them (a client's read loop,
// close), so marshalling and delivery never hold those up.
func (st *sysState) publishLoop() {
	for {
		select {
		case <-st.srv.done:
			return
		case <-st.wake:
		}
		for {
			st.mu.Lock()
			batch := st.mu.queue
			st.mu.queue = nil
			st.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, ev := range batch {
				ev()
			}
		}
	}
}

// newTypedEvent heads an event of type typ that happened at t.
func newTypedEvent(typ string, t time.Time) TypedEvent {
	return TypedEvent{Type: typ, ID: newEventID(), Time: t.UTC()}
}

// newEventID is a unique id for an event: 22 random URL-safe characters,
// like nats-server's nuids.
func newEventID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
