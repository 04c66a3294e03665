package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/subject"
)

// Account is an isolated subject space. Clients of one account never
// receive messages published in another.
type Account struct {
	name string
	srv  *Server
	subs *subject.Index[*subscription]
	rr   atomic.Uint32 // spreads queue-group deliveries
	// clients counts the subscriptions of client connections in subs,
	// changed with each one's insertion and removal (insertSub,
	// removeSub). The index also holds the server's own subscriptions and
	// the routes' interest, which monitoring and the subscription limit
	// leave out; counting clients by themselves keeps the figure exact
	// while those change beside it.
	clients atomic.Int64

	watchMu sync.Mutex
	watches []*interestWatch // guarded by watchMu

	links accountLinks // imports in force and response routes (links.go)
	// exportOnly lists, for each accounts-block export with an accounts
	// list, the accounts it admits (staticaccounts.go); set in New.
	exportOnly map[*jwt.Export]map[string]bool
	// selfOnce starts the account's self-service requests (sysself.go).
	selfOnce sync.Once

	// claims is the account's current JWT (nil in open mode); limits is
	// what the server enforces from it.
	claims atomic.Pointer[jwt.AccountClaims]
	limits atomic.Pointer[accountLimits]
	// installMu serializes installing new claims (auth.go).
	installMu sync.Mutex
	// slowConsumers counts the account's clients cut off as slow.
	slowConsumers atomic.Uint64

	cmu struct {
		sync.Mutex
		clients map[*client]struct{} // authenticated clients; guarded by cmu
		// closed totals the counters of the account's closed clients,
		// so account statistics survive disconnects.
		closed   ConnTotals // guarded by cmu
		total    uint64     // connections ever made; guarded by cmu
		expiry   *time.Timer
		disabled bool // the account JWT expired or was deleted; guarded by cmu
	}
}

// accountLimits are the NATS (not JetStream) limits of an account JWT;
// -1 means unlimited.
type accountLimits struct {
	conns, subs, payload int64
	// data bounds the bytes queued for one connection (see client.mpend).
	data int64
}

var unlimitedAccount = &accountLimits{conns: -1, subs: -1, payload: -1, data: -1}

// ConnTotals are message and byte counters summed over connections.
type ConnTotals struct {
	InMsgs, OutMsgs, InBytes, OutBytes uint64
}

// clientSubs is the number of client subscriptions in the account.
func (a *Account) clientSubs() int { return int(a.clients.Load()) }

func newAccount(srv *Server, name string) *Account {
	a := &Account{name: name, srv: srv, subs: subject.NewIndex[*subscription]()}
	a.limits.Store(unlimitedAccount)
	a.cmu.clients = map[*client]struct{}{}
	return a
}

// Claims is the account's current JWT claims; nil in open mode. Callers
// must not modify them.
func (a *Account) Claims() *jwt.AccountClaims { return a.claims.Load() }

// Name identifies the account ("$G" in open mode, else its public key).
func (a *Account) Name() string { return a.name }

// subscription is one SUB of one client, or an internal subscription
// (client nil, handler or fwd set).
type subscription struct {
	acc     *Account
	client  *client
	handler PacedHandler
	fwd     forwarder // set on imports: delivery crosses to another account
	subject []byte
	queue   []byte
	sid     []byte
	// max is the UNSUB auto-unsubscribe limit; 0 means none.
	max       atomic.Int64
	delivered atomic.Int64
}

// pickQueueMember chooses the member of a queue group that gets a message.
// Round robin over the group spreads load evenly, which is what users of
// queue groups expect.
func pickQueueMember(members []*subscription) *subscription {
	if len(members) == 1 {
		return members[0]
	}
	return members[int(members[0].acc.rr.Add(1))%len(members)]
}

// unsubscribe removes the subscription wherever it is held; idempotent.
func (sub *subscription) unsubscribe() {
	if sub.client != nil {
		sub.client.unsubscribe(sub)
		return
	}
	sub.acc.removeSub(string(sub.subject), "", sub)
}

// GlobalAccount is the account every client joins in open mode.
func (s *Server) GlobalAccount() *Account { return s.global }
