package server

import (
	"sync/atomic"

	"github.com/contrail/contrail/dataplane/subject"
)

// Account is an isolated subject space. Clients of one account never
// receive messages published in another.
type Account struct {
	Name string
	subs *subject.Index[*subscription]
	rr   atomic.Uint32 // spreads queue-group deliveries
}

func newAccount(name string) *Account {
	return &Account{Name: name, subs: subject.NewIndex[*subscription]()}
}

// subscription is one SUB of one client.
type subscription struct {
	client  *client
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
func (a *Account) pickQueueMember(members []*subscription) *subscription {
	if len(members) == 1 {
		return members[0]
	}
	return members[int(a.rr.Add(1))%len(members)]
}
