package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Replica is what a group's leader knows of one other member: the
// cluster field's replicas[] entry.
type Replica struct {
	// Name is the member's node name (its raft id without incarnation).
	Name string
	// Voter is false while the member is being repaired: it receives
	// the log but neither votes nor counts toward a quorum.
	Voter bool
	// Current is true when the member answered within CurrentWithin
	// and holds the log up to CurrentLag entries of the leader's.
	Current bool
	// Offline is true when the member has not answered for OfflineAfter.
	Offline bool
	// Active is the time since the member last answered.
	Active time.Duration
	// Lag is the number of entries the leader has that the member has
	// not acknowledged.
	Lag uint64
}

// The thresholds of Replica, at timing multiplier 1.
const (
	// CurrentWithin bounds the silence of a current member: several
	// heartbeat rounds (they go every 25-50 ms).
	CurrentWithin = time.Second
	// OfflineAfter is the silence after which a member is offline.
	OfflineAfter = 3 * time.Second
	// CurrentLag is how far behind a current member may be: one full
	// AppendEntries batch, so that a member keeping up under load stays
	// current while the last batch is in flight.
	CurrentLag = 512
)

// progress is the leader's record of each follower's answers, kept by
// the transport wrapper. It is reset when the node becomes leader: what a
// past leadership learned is stale.
type progress struct {
	mu struct {
		sync.Mutex
		since time.Time                    // guarded by mu; when the current leadership began
		peers map[raft.ServerID]*peerState // guarded by mu
		// heard is closed, and replaced, each time a peer answers the
		// current leadership for the first time (awaitHeard).
		heard chan struct{} // guarded by mu
	}
}

type peerState struct {
	contact time.Time
	// held is when the follower last answered an AppendEntries of the
	// leadership's term as its follower (its answer's term the
	// request's), and lastLog what that answer said of its log: the
	// standing of a thinned heartbeat (heldWithin).
	held    time.Time
	term    uint64
	lastLog uint64
	// acked is the highest index the follower is known to hold.
	// Invariant: acked <= the leader's LastIndex.
	acked uint64
}

func newProgress() *progress {
	p := &progress{}
	p.reset()
	return p
}

func (p *progress) reset() {
	p.mu.Lock()
	p.mu.since = time.Now()
	p.mu.peers = map[raft.ServerID]*peerState{}
	if p.mu.heard != nil {
		close(p.mu.heard)
	}
	p.mu.heard = make(chan struct{})
	p.mu.Unlock()
}

// awaitHeard waits until one of the peers in ids has answered the
// current leadership, or until the leadership is within old, or until
// grace has passed, whichever comes first. A new leader knows nothing of
// its followers until their first answers, a heartbeat round after it
// won; one that never answers is dead or cut off, which within tells
// apart.
func (p *progress) awaitHeard(ids []raft.ServerID, within, grace time.Duration) {
	until := time.Now().Add(grace)
	for {
		p.mu.Lock()
		heardOne := false
		for _, id := range ids {
			heardOne = heardOne || p.mu.peers[id] != nil
		}
		heard := p.mu.heard
		left := min(time.Until(p.mu.since.Add(within)), time.Until(until))
		p.mu.Unlock()
		if heardOne || len(ids) == 0 || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-heard:
		case <-t.C:
		}
		t.Stop()
	}
}

// record notes an answered AppendEntries. Any answer is contact; a
// successful one that is not a bare heartbeat shows that the follower's
// log matches the leader's up to PrevLogEntry+len(Entries).
func (p *progress) record(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.mu.peers[id]
	if ps == nil {
		ps = &peerState{}
		p.mu.peers[id] = ps
		close(p.mu.heard)
		p.mu.heard = make(chan struct{})
	}
	ps.contact = now
	if resp.Term == req.Term {
		ps.held, ps.term, ps.lastLog = now, req.Term, resp.LastLog
	}
	if !resp.Success || isHeartbeat(req) {
		return
	}
	if acked := req.PrevLogEntry + uint64(len(req.Entries)); acked > ps.acked {
		ps.acked = acked
	}
}

// heldWithin returns the answer id gave to an AppendEntries of term as
// its follower, if it gave one within the last within.
func (p *progress) heldWithin(id raft.ServerID, term uint64, within time.Duration) (raft.AppendEntriesResponse, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.mu.peers[id]
	if ps == nil || ps.term != term || time.Since(ps.held) >= within {
		return raft.AppendEntriesResponse{}, false
	}
	return raft.AppendEntriesResponse{Term: term, LastLog: ps.lastLog, Success: true}, true
}

// answered reports whether id has answered this leadership within the
// last within (a member never heard from has not, however recent the
// leadership).
func (p *progress) answered(id raft.ServerID, within time.Duration, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.mu.peers[id]
	return ps != nil && sinceContact(now, ps.contact) <= within
}

// acked returns the highest index id is known to hold and when it last
// answered (the leadership's start if it never has).
func (p *progress) acked(id raft.ServerID) (uint64, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps := p.mu.peers[id]; ps != nil {
		return ps.acked, ps.contact
	}
	return 0, p.mu.since
}

// replica reports server s as the leader sees it, with lastIndex the
// leader's last log index and mult the timing multiplier.
// sinceContact is how long before now a peer was last heard from, never
// negative: the contact time is written by raft's goroutines while the
// caller reads the clock, so a contact can land just after now, and a
// negative "active" breaks clients that check it (natscli refuses a
// stream create reply whose replica was active -78µs).
func sinceContact(now, contact time.Time) time.Duration {
	return max(now.Sub(contact), 0)
}

func (p *progress) replica(s raft.Server, lastIndex uint64, mult time.Duration, now time.Time) Replica {
	acked, contact := p.acked(s.ID)
	r := Replica{Name: nodeName(s.ID), Voter: s.Suffrage == raft.Voter, Active: sinceContact(now, contact)}
	if acked < lastIndex {
		r.Lag = lastIndex - acked
	}
	r.Offline = r.Active > OfflineAfter*mult
	r.Current = r.Active <= CurrentWithin*mult && r.Lag <= CurrentLag && acked > 0
	return r
}
