package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// ErrRepair is what a group in repair answers to a TimeoutNow, and what
// its own vote requests fail with: a node whose state for the group was
// lost must not take part in an election until it has been repaired.
var ErrRepair = errors.New("cluster: group in repair")

// errDraining is the answer to a TimeoutNow while the node shuts down: a
// leaving node must not take leadership back.
var errDraining = errors.New("cluster: node shutting down")

// transport wraps a group's NetworkTransport. It watches the leader's
// AppendEntries answers to learn each follower's progress (raft does not
// expose it), and it keeps a node in repair out of elections: incoming
// vote and pre-vote requests are refused and TimeoutNow is rejected before
// raft sees them, and the node's own vote requests are never sent.
//
// Heartbeats take the NetworkTransport's fast path straight to raft and
// do not pass the filter: they carry no vote.
type transport struct {
	*raft.NetworkTransport
	sl       *streamLayer
	group    uint16
	progress *progress
	in       chan raft.RPC
	done     chan struct{}
	stopped  sync.Once
	repair   atomic.Bool
	draining atomic.Bool
	// refused counts the vote, pre-vote and TimeoutNow requests refused
	// while in repair.
	refused atomic.Uint64
	// thin is heartbeatThin at the node's timing multiplier (0: every
	// heartbeat is sent); thinned counts the heartbeats answered here.
	thin    time.Duration
	thinned atomic.Uint64
}

// heartbeatThin is how recently a follower must have answered this
// term's leader for the leader's next heartbeat to it to be answered by
// the transport instead of sent. raft sends a leader's heartbeats every
// tenth of its heartbeat timeout (50-100 ms, see paceHeartbeats) to
// every follower of every group, whether or not entries flow; under load
// the appends are the contact, and their heartbeats are answered here.
// A follower still hears from its leader at least every 100 ms, well
// inside its 250-500 ms election timeout.
//
// What the leader gives up: its lease (250 ms; it steps down when a
// quorum has not answered within it) counts a thinned heartbeat as an
// answer, so a leader cut off steps down up to heartbeatThin later.
// Nothing here reads under that lease (raft's VerifyLeader is not used),
// and commits still need a quorum's real answers.
const heartbeatThin = 50 * time.Millisecond

// Transport sizing. NetworkTransport gives each connection a 256 KiB
// buffer (send side on the dialer, receive side on the acceptor) whatever
// the pool size, so the pool is kept to what one follower uses at once:
// the heartbeat and one synchronous AppendEntries (the pipeline has its
// own connection).
const (
	transportMaxPool = 2
	transportTimeout = 10 * time.Second
)

func newTransport(sl *streamLayer, group uint16, lg *hclogAdapter) *transport {
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  sl,
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  lg.Named("net"),
	})
	t := &transport{
		NetworkTransport: nt,
		sl:               sl,
		group:            group,
		progress:         newProgress(),
		in:               make(chan raft.RPC),
		done:             make(chan struct{}),
	}
	go t.filter()
	return t
}

// isHeartbeat reports whether req is a leader's bare heartbeat (no
// entries, no log position, no commit index), as raft's own transport
// tells them.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return req.Term != 0 && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// SetRepair puts the group in or out of repair on this node.
func (t *transport) SetRepair(on bool) { t.repair.Store(on) }

// Repair reports whether the group is in repair on this node.
func (t *transport) Repair() bool { return t.repair.Load() }

func (t *transport) Consumer() <-chan raft.RPC { return t.in }

// filter passes incoming RPCs to raft, answering the ones a node in
// repair must not act on itself.
func (t *transport) filter() {
	src := t.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-src:
			if t.refuse(rpc) {
				continue
			}
			select {
			case t.in <- rpc:
			case <-t.done:
				rpc.Respond(nil, raft.ErrTransportShutdown)
				return
			}
		case <-t.done:
			return
		}
	}
}

// refuse answers rpc if it is an election request this node must not
// take part in, and reports whether it did. A refusal is a plain "not
// granted" at the candidate's own term, so the candidate neither steps
// down nor logs a transport error.
func (t *transport) refuse(rpc raft.RPC) bool {
	repair := t.repair.Load()
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		if !repair {
			return false
		}
		t.refused.Add(1)
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: t.header(), Term: req.Term}, nil)
	case *raft.RequestPreVoteRequest:
		if !repair {
			return false
		}
		t.refused.Add(1)
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: t.header(), Term: req.Term}, nil)
	case *raft.TimeoutNowRequest:
		switch {
		case repair:
			t.refused.Add(1)
			rpc.Respond(nil, ErrRepair)
		case t.draining.Load():
			rpc.Respond(nil, errDraining)
		default:
			return false
		}
	default:
		return false
	}
	return true
}

func (t *transport) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(t.LocalAddr())}
}

func (t *transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.repair.Load() {
		return ErrRepair
	}
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

func (t *transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.repair.Load() {
		return ErrRepair
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

// probe sends the follower a heartbeat of term from self, as this
// term's leader sends them, and reports whether it was accepted at that
// term. It always goes out (no thinning: the answer must postdate the
// call) on a connection of its own use, so the answer is to this
// request.
func (t *transport) probe(id raft.ServerID, target raft.ServerAddress, self raft.ServerID, term uint64) bool {
	req := raft.AppendEntriesRequest{RPCHeader: t.header(), Term: term}
	req.ID = []byte(self)
	var resp raft.AppendEntriesResponse
	if err := t.NetworkTransport.AppendEntries(id, target, &req, &resp); err != nil {
		return false
	}
	t.progress.record(id, &req, &resp)
	return resp.Success && resp.Term == term
}

// AppendEntries sends args to the follower, except a heartbeat to a
// follower that answered this term's leader within heartbeatThin: that
// one is answered here, as the follower would.
func (t *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.thin > 0 && isHeartbeat(args) {
		if r, ok := t.progress.heldWithin(id, args.Term, t.thin); ok {
			r.RPCHeader = raft.RPCHeader{ProtocolVersion: args.ProtocolVersion, ID: []byte(id), Addr: []byte(target)}
			*resp = r
			t.thinned.Add(1)
			return nil
		}
	}
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.progress.record(id, args, resp)
	}
	return err
}

func (t *transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	wp := &pipeline{AppendPipeline: p, id: id, t: t, out: make(chan raft.AppendFuture), stop: make(chan struct{})}
	go wp.relay()
	return wp, nil
}

// Close stops the filter and the NetworkTransport and cuts its pooled
// connections. Raft calls it on Shutdown.
func (t *transport) Close() error {
	t.stopped.Do(func() { close(t.done) })
	err := t.NetworkTransport.Close()
	t.NetworkTransport.CloseStreams()
	return err
}

// pipeline records the progress each pipelined AppendEntries answer
// shows on its way back to raft.
type pipeline struct {
	raft.AppendPipeline
	id    raft.ServerID
	t     *transport
	out   chan raft.AppendFuture
	stop  chan struct{}
	close sync.Once
}

func (p *pipeline) relay() {
	src := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-src:
			// The future is on the consumer channel only once it is
			// answered, so Error does not wait.
			if f.Error() == nil {
				p.t.progress.record(p.id, f.Request(), f.Response())
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *pipeline) Close() error {
	p.close.Do(func() { close(p.stop) })
	return p.AppendPipeline.Close()
}

var (
	_ raft.Transport      = (*transport)(nil)
	_ raft.WithPreVote    = (*transport)(nil)
	_ raft.WithClose      = (*transport)(nil)
	_ raft.AppendPipeline = (*pipeline)(nil)
)
