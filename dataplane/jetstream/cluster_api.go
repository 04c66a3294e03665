package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// On a cluster every node receives every API request of an account (the
// API subjects are subscribed on each node, and routes carry each request
// to all of them); exactly one answers, as with nats-server:
//
//   - stream create, update and delete: the meta leader checks them
//     against the catalog and puts them in the meta log; the node that
//     holds the stream runs and answers them once applied;
//   - account info, stream names and lists: the meta leader;
//   - everything naming a stream: the node holding it (its partition's
//     leader, or the R1 stream's owner); a stream the catalog does not
//     know is answered (not found) by the meta leader.
//
// The others stay silent. With no leader to answer (none known for the
// meta group, or for the partition of a stream the catalog knows), a node
// says 10008 after errRespDelay, as nats-server does; a client with a
// shorter timeout hears nothing. A partition's new leader still loading
// it (take) holds the requests for its streams until it serves them
// (holdRequest): the old leader has let go of them by then. A request the
// old leader admitted and can no longer answer is passed on to the new
// one (passOn). Never a definite answer from a node that does not know: a
// stream the catalog holds is never "not found".

// metaOps are the operations decided by the meta leader.
var metaOps = map[string]bool{"STREAM.CREATE": true, "STREAM.UPDATE": true, "STREAM.DELETE": true, "STREAM.RESTORE": true}

// catalogReads are answered by the meta leader from the catalog.
var catalogReads = map[string]bool{"INFO": true, "STREAM.NAMES": true, "STREAM.LIST": true}

// systemOps are served in the system account only: an account's request
// for them goes unanswered, as on nats-server.
var systemOps = map[string]bool{"META.LEADER.STEPDOWN": true, "SERVER.REMOVE": true}

// errRespDelay is how long a node waits before saying there is no leader,
// as nats-server's errRespDelay: a leader elected meanwhile answers first.
const errRespDelay = 500 * time.Millisecond

// clusterAdmit decides whether this node answers the request on subject;
// meta operations it accepts are marked for the meta path. A request
// nobody can answer for want of a leader gets 10008 on reply, later.
func (a *jsAccount) clusterAdmit(subj, rep, hdr, msg []byte) (answer, meta bool) {
	c := a.e.cl
	if c.r == nil {
		return false, false
	}
	subject, reply := string(subj), string(rep)
	op := a.apiOpName(subject)
	if systemOps[op] {
		return false, false // served by cluster_sys.go in the system account only
	}
	if !a.enabled.Load() {
		// Nothing of the account runs anywhere: one node says so.
		return c.metaLeader(), false
	}
	r, name, routed := routeOf(op)
	route, rest := op, ""
	if routed {
		route = strings.TrimSuffix(op[:len(op)-len(name)], ".")
		rest = name
	} else if rest, routed = strings.CutPrefix(op, "DIRECT.GET."); routed {
		route = "DIRECT.GET"
	}
	leaderless := func(g uint16) bool {
		if c.r.Group(g).Leader() == "" && r.fail != nil {
			a.replyLeaderless(reply, r)
		}
		return false
	}
	switch {
	case metaOps[route]:
		if c.metaLeader() {
			return true, true
		}
		return leaderless(0), false
	case catalogReads[route]:
		if c.metaLeader() {
			return true, false
		}
		return leaderless(0), false
	}
	stream, _, _ := strings.Cut(rest, ".")
	if stream != "" {
		if s := a.lookup(stream); s != nil {
			if g := groupOf(s.id); g != 0 && !c.r.Group(g).IsLeader() {
				// Deposed: raft has another node lead the partition (or
				// elect a leader for it) and this one holds the stream
				// only until its release runs. The new leader answers
				// (holdRequest), or with none yet, 10008 comes later;
				// an answer from here could contradict the new
				// leader's (a stepdown "not the leader", a 10008 for a
				// request the new leader runs).
				return leaderless(g), false
			}
			return true, false
		}
		if asg := c.catalog.lookup(a.acc.Name(), stream); asg != nil {
			if g := asg.group(); g != 0 {
				if c.r.Group(g).IsLeader() {
					// Served meanwhile: answered if the stream is loaded
					// now (one not loaded yet is never "not found").
					served := c.holdRequest(g, a, r, subj, rep, hdr, msg)
					return served && a.lookup(stream) != nil, false
				}
				return leaderless(g), false
			}
			return false, false
		}
		if route == "DIRECT.GET" {
			// No such stream: a mirror_direct mirror of it answers, on
			// the node that holds the mirror.
			if m := c.catalog.directMirror(a.acc.Name(), stream); m != "" {
				return a.lookup(m) != nil, false
			}
		}
	}
	if c.metaLeader() {
		return true, false
	}
	return leaderless(0), false
}

// heldRequest is an API request held by a partition's new leader until
// it serves the partition (holdRequest), or by its old leader until the
// hand-over is done (deferRequest).
type heldRequest struct {
	a                        *jsAccount
	fail                     func(*api.Error) any
	subject, reply, hdr, msg []byte
	size                     int       // what it counts against the bounds below
	deadline                 time.Time // when it is told 10008 if still held
}

// heldQueue is one partition's held requests, oldest first, and the one
// timer that tells them 10008 as their deadlines pass: every request
// waits holdTimeout from its arrival, so arrival order is deadline order.
type heldQueue struct {
	reqs  []*heldRequest
	timer *time.Timer
}

// Bounds on the requests held (held, handing), node-wide, in bytes
// counted with heldOverhead per request (so they bound tiny requests'
// count too): an account holds at most maxHeldAccountBytes, and past
// maxHeldBytes only an account below an equal share holds more
// (fairShare). A request past them is treated as if nothing held it.
// One held for a loading leader waits holdTimeout at most before it is
// told 10008.
const (
	heldOverhead        = 512
	maxHeldAccountBytes = 4 << 20
	maxHeldBytes        = 16 << 20
	holdTimeout         = 2 * time.Second
)

// holdRequest keeps an API request for a stream of partition g, which
// raft says this node leads but which it has not loaded yet, until take
// serves g and runs it again; if that does not happen within holdTimeout
// the requester is told 10008. The old leader stopped answering for g
// when it let go, and every node got the request: without this, a
// request that arrived between the two went unanswered. It reports
// whether g is served already, so the request is answered now.
func (c *clusterState) holdRequest(g uint16, a *jsAccount, r apiRoute, subject, reply, hdr, msg []byte) (served bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.parts[g] != nil {
		return true
	}
	if h := c.holdLocked(a, r, subject, reply, hdr, msg); h != nil {
		c.queueHeldLocked(g, h)
	}
	return false
}

// queueHeldLocked adds h, counted already, to partition g's held
// requests, to wait holdTimeout at most. Called with c.mu held.
func (c *clusterState) queueHeldLocked(g uint16, h *heldRequest) {
	h.deadline = time.Now().Add(holdTimeout)
	q := c.mu.held[g]
	if q == nil {
		q = &heldQueue{}
		c.mu.held[g] = q
		q.timer = time.AfterFunc(holdTimeout, func() { c.expireHeld(g, q) })
	}
	q.reqs = append(q.reqs, h)
}

// holdLocked copies a request to hold and counts it against the bounds
// on what is held, or returns nil if they refuse it. Called with c.mu
// held.
func (c *clusterState) holdLocked(a *jsAccount, r apiRoute, subject, reply, hdr, msg []byte) *heldRequest {
	size := heldOverhead + len(subject) + len(reply) + len(hdr) + len(msg)
	// An account holding nothing may always hold one request, so that
	// another account's flood never leaves it unanswered.
	if mine, holding := c.mu.heldBy[a]; holding &&
		(mine+size > maxHeldAccountBytes || !fairShare(mine, size, c.mu.heldBytes, maxHeldBytes, len(c.mu.heldBy))) {
		return nil
	}
	c.mu.heldBy[a] += size
	c.mu.heldBytes += size
	return &heldRequest{a: a, fail: r.fail, subject: bytes.Clone(subject), reply: bytes.Clone(reply),
		hdr: bytes.Clone(hdr), msg: bytes.Clone(msg), size: size}
}

// passOn hands a request this node admitted for a stream (name's first
// token) of a partition it no longer serves, or is handing over, to the
// partition's next leader: kept until the hand-over is done (deferRequest)
// or sent again for the leader now known (resendToLeader). It reports
// whether the request was passed on, so that it is not answered here.
func (a *jsAccount) passOn(req apiRequest, r apiRoute, name string) bool {
	c := a.e.cl
	if c == nil || c.r == nil || req.reply == "" {
		return false
	}
	stream, _, _ := strings.Cut(name, ".")
	asg := c.catalog.lookup(a.acc.Name(), stream)
	if asg == nil || asg.group() == 0 {
		return false
	}
	g := asg.group()
	if a.deferRequest(req, r, g) || a.resendToLeader(req, c.r.Group(g)) {
		return true
	}
	// This node leads still, between two terms of its own (a hand-over
	// that failed, a reload): the next term's take runs the request, as
	// it runs those held for a new leader. If it ran already, the caller
	// answers.
	return c.r.Group(g).IsLeader() &&
		!c.holdRequest(g, a, r, []byte(req.subject), []byte(req.reply), req.hdr, req.body)
}

// deferRequest keeps req (served by route r), refused as never
// appended, if partition g is being handed over from this node:
// HandOver's after publishes it again once the transfer is done. It
// reports whether req was kept.
func (a *jsAccount) deferRequest(req apiRequest, r apiRoute, g uint16) bool {
	c := a.e.cl
	c.mu.Lock()
	defer c.mu.Unlock()
	deferred, handing := c.mu.handing[g]
	if !handing {
		return false
	}
	h := c.holdLocked(a, r, []byte(req.subject), []byte(req.reply), req.hdr, req.body)
	if h == nil {
		return false
	}
	c.mu.handing[g] = append(deferred, h)
	return true
}

// expireHeld tells q's requests whose deadline passed 10008 and arms
// q's timer for the next one; q is done with once empty or taken.
func (c *clusterState) expireHeld(g uint16, q *heldQueue) {
	c.mu.Lock()
	if c.mu.held[g] != q {
		c.mu.Unlock()
		return // taken: take runs them
	}
	now := time.Now()
	var expired []*heldRequest
	for len(q.reqs) > 0 && !q.reqs[0].deadline.After(now) {
		h := q.reqs[0]
		q.reqs[0] = nil
		q.reqs = q.reqs[1:]
		c.unholdLocked(h)
		expired = append(expired, h)
	}
	if len(q.reqs) == 0 {
		delete(c.mu.held, g)
	} else {
		q.timer = time.AfterFunc(q.reqs[0].deadline.Sub(now), func() { c.expireHeld(g, q) })
	}
	c.mu.Unlock()
	for _, h := range expired {
		if len(h.reply) > 0 && h.fail != nil {
			h.a.reply(string(h.reply), h.fail(api.NewClusterNotAvailableError()))
		}
	}
}

// takeHeldLocked removes partition g's held requests, for take to run
// now that this node serves g. Called with c.mu held.
func (c *clusterState) takeHeldLocked(g uint16) []*heldRequest {
	q := c.mu.held[g]
	if q == nil {
		return nil
	}
	delete(c.mu.held, g)
	q.timer.Stop()
	for _, h := range q.reqs {
		c.unholdLocked(h)
	}
	return q.reqs
}

// unholdLocked takes h off the bounds' counts. Called with c.mu held.
func (c *clusterState) unholdLocked(h *heldRequest) {
	c.mu.heldBytes -= h.size
	if c.mu.heldBy[h.a] -= h.size; c.mu.heldBy[h.a] <= 0 {
		delete(c.mu.heldBy, h.a)
	}
}

// runHeld runs again the requests held for a partition this node now
// serves, in arrival order.
func runHeld(held []*heldRequest) {
	for _, h := range held {
		h.a.onAPI(h.subject, h.reply, h.hdr, h.msg)
	}
}

// readFenceTimeout bounds a read's wait for its group's leadership to be
// proved (ReadFence); past it the read goes unanswered here.
const readFenceTimeout = 2 * time.Second

// maxFencingReplies bounds an account's replies waiting for their read
// fence off the API workers (serve): at a round trip per fence round a
// few suffice; only a group that cannot commit fills them.
const maxFencingReplies = 256

// readLeadership names the group whose leadership makes this node the
// one to answer op, when op is a read answered from this node's memory:
// the partition of a replicated stream held here, or the meta group for
// catalog reads and for the meta leader's "not found". Such an answer is
// sent only once ReadFence proves the leadership outlived the read: a
// deposed leader that has not yet heard of its successor (paused,
// starved, cut off) would otherwise answer from state the new leader has
// moved past, as an ack floor below acks already confirmed. Direct gets
// are left out: nats-server does not promise them current either (any
// replica may answer one there), and they are the KV read path.
func (a *jsAccount) readLeadership(op, name string) (ReplicaGroup, bool) {
	c := a.e.cl
	if c == nil || c.r == nil || !apiReadOnly(op) || strings.HasPrefix(op, "DIRECT.GET.") {
		return nil, false
	}
	if stream, _, _ := strings.Cut(name, "."); stream != "" {
		if s := a.lookup(stream); s != nil {
			if g := groupOf(s.id); g != 0 {
				return c.r.Group(g), true
			}
			return nil, false // an R1 stream: its one copy is here
		}
	}
	return c.r.Group(0), true
}

// maxLeaderlessReplies bounds an account's 10008 answers waiting out
// errRespDelay. An election takes about that long, so honest clients
// keep few waiting; past the bound the answer goes at once, and an
// account flooding requests while a group has no leader costs a bounded
// number of timers, not one per request.
const maxLeaderlessReplies = 1024

// replyLeaderless answers 10008 in r's reply shape after errRespDelay, or
// at once past maxLeaderlessReplies of the account's waiting.
func (a *jsAccount) replyLeaderless(reply string, r apiRoute) {
	if reply == "" {
		return
	}
	answer := func() { a.reply(reply, r.fail(api.NewClusterNotAvailableError())) }
	if a.leaderless.Add(1) > maxLeaderlessReplies {
		a.leaderless.Add(-1)
		answer()
		return
	}
	time.AfterFunc(errRespDelay, func() {
		defer a.leaderless.Add(-1)
		answer()
	})
}

// catalogNames lists an account's streams from the catalog in name
// order, optionally only those whose subjects overlap filter.
func (c *clusterState) catalogNames(account, filter string) []*assignment {
	if filter == "" {
		return c.catalog.streams(account)
	}
	return c.catalog.matching(account, filter)
}

// gatherTimeout bounds the meta leader's wait for the infos of streams
// other nodes hold, when it lists them.
const gatherTimeout = time.Second

// catalogInfos is what the meta leader lists for streams: each stream's
// info from the node that holds it (its leader knows its replicas and
// consumers), asked for in the account as a client would ask; where no
// answer comes in time, catalogInfo's.
func (a *jsAccount) catalogInfos(list []*assignment) []*api.StreamInfo {
	infos := make([]*api.StreamInfo, len(list))
	pending := map[string]int{}
	for i, asg := range list {
		if a.lookup(asg.Name) != nil {
			infos[i] = a.catalogInfo(asg)
		} else {
			pending[asg.Name] = i
		}
	}
	if len(pending) > 0 {
		a.gatherInfos(list, infos, pending)
	}
	for i, asg := range list {
		if infos[i] == nil {
			infos[i] = a.catalogInfo(asg)
		}
	}
	return infos
}

// gatherInfos asks the holders of the pending streams (name → index in
// list) for their infos and fills in those that answer in time.
func (a *jsAccount) gatherInfos(list []*assignment, infos []*api.StreamInfo, pending map[string]int) {
	var mu sync.Mutex
	closed := false // guarded by mu: the caller reads infos from then on
	left := len(pending)
	all := make(chan struct{})
	inbox := newInbox()
	prefix := inbox + "."
	unsub, err := a.acc.SubscribeInternal(prefix+"*", func(subject, _, _, msg []byte) {
		name := strings.TrimPrefix(string(subject), prefix)
		var resp api.StreamInfoResponse
		if json.Unmarshal(msg, &resp) != nil || resp.Error != nil || resp.StreamInfo == nil {
			return // no leader (10008), or unreadable: the catalog's view stands
		}
		mu.Lock()
		defer mu.Unlock()
		i, ok := pending[name]
		if closed || !ok || infos[i] != nil {
			return
		}
		// Listed as stored, without what an info reply adds to the config.
		resp.StreamInfo.Config = *list[i].Config
		infos[i] = resp.StreamInfo
		if left--; left == 0 {
			close(all)
		}
	})
	if err != nil {
		return
	}
	for name := range pending {
		// Stream names are valid subject tokens: the reply names the stream.
		a.acc.Publish("$JS.API.STREAM.INFO."+name, prefix+name, nil, nil)
	}
	select {
	case <-all:
	case <-time.After(gatherTimeout):
	}
	unsub()
	mu.Lock()
	closed = true
	mu.Unlock()
}

// catalogInfo is what the meta leader lists for a stream: the stream's own
// info where it lives here, else its config and the state its records in
// this node's store (a replica of every partition) hold.
func (a *jsAccount) catalogInfo(asg *assignment) *api.StreamInfo {
	if s := a.lookup(asg.Name); s != nil {
		if info, err := s.info(nil); err == nil {
			info.Config = *s.config()
			return info
		}
	}
	info := &api.StreamInfo{Config: *asg.Config, Created: asg.Created, Domain: a.e.opts.Domain,
		TimeStamp: a.e.opts.Now().UTC(), Cluster: a.e.cl.clusterInfo(asg.ID)}
	if st, err := a.e.opts.Store.LoadStream(asg.ID); err == nil {
		info.State = stateOf(st.State)
	}
	return info
}

// stepdown hands the leadership of the stream's partition to another
// member (or, with a preferred placement, to that one), within this
// node's budget of such moves for the partition (moveBudget).
func (a *jsAccount) stepdown(s *stream, preferred string) *api.Error {
	c := a.e.cl
	g := groupOf(s.id)
	if c == nil || g == 0 {
		return api.NewClusterRequiredError()
	}
	preferred, aerr := c.preferredLeader(g, preferred)
	if aerr != nil {
		return aerr
	}
	if wait := c.moves.take(g, a.e.opts.Now()); wait > 0 {
		return api.NewStreamGeneralError(fmt.Errorf("partition P%d (this stream and the others it carries) was moved by stepdown requests %d times lately; try again in %s",
			g, stepdownBurst, wait.Round(100*time.Millisecond)))
	}
	if err := c.r.Group(g).TransferLeadership(preferred); err != nil {
		c.moves.refund(g)
		return api.NewStreamGeneralError(err)
	}
	return nil
}

// A stream's leader is its partition's, so a stepdown (of a stream or of
// a consumer) moves every stream the partition carries, whatever their
// accounts, and each move costs them a moment without a leader. Each
// node lets requests move a partition it leads stepdownBurst times at
// once and once per stepdownRefill after that: one tenant asking in a
// loop moves a partition about once per stepdownRefill/(nodes) and not
// as fast as it asks. Moves by failover or balancing are not counted.
const (
	stepdownBurst  = 2
	stepdownRefill = 10 * time.Second
)

// moveBudget is a node's token bucket of requested leadership moves, per
// partition.
type moveBudget struct {
	mu sync.Mutex
	// left is each partition's tokens and when they were counted; a
	// partition not in it has a full bucket. Guarded by mu.
	left map[uint16]moveTokens
}

type moveTokens struct {
	n  float64
	at time.Time
}

// take spends one of partition g's tokens at now and returns 0, or, when
// none is left, how long until one is.
func (b *moveBudget) take(g uint16, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.left[g]
	if !ok {
		t = moveTokens{n: stepdownBurst, at: now}
	}
	if now.After(t.at) {
		t.n = min(stepdownBurst, t.n+float64(now.Sub(t.at))/float64(stepdownRefill))
		t.at = now
	}
	if t.n < 1 {
		return time.Duration((1 - t.n) * float64(stepdownRefill))
	}
	t.n--
	if b.left == nil {
		b.left = map[uint16]moveTokens{}
	}
	b.left[g] = t
	return 0
}

// refund returns the token of a move that did not happen.
func (b *moveBudget) refund(g uint16) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.left[g]; ok {
		t.n = min(stepdownBurst, t.n+1)
		b.left[g] = t
	}
}
