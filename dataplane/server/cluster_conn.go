package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/dataplane/subject"
)

// route is one connection of the mesh.
//
// Threading: the read loop parses and applies what the peer sends; the
// writer goroutine writes out. Any goroutine may queue on out (a
// publisher forwarding a message, a subscriber's RS+).
type route struct {
	cl     *cluster
	conn   net.Conn
	out    *routeOut
	dialed bool // this node dialed it
	rid    uint64
	start  time.Time
	log    *slog.Logger

	// From the peer's INFO; set before register, read-only after.
	remoteID, remoteName string
	clientURLs           []string

	// rsubs is the interest the peer announced, by account; guarded by
	// cl.mu. A subscription's acc is nil while this node has not loaded
	// the account.
	rsubs  map[string]map[ikey]*subscription
	nrsubs int // guarded by cl.mu
	// refusing names the accounts whose interest past a bound this route
	// refused, so each is logged once while the route lasts; guarded by
	// cl.mu.
	refusing map[string]bool

	inMsgs, outMsgs, inBytes, outBytes atomic.Uint64
	// dropped counts messages dropped for an account over its share.
	dropped      atomic.Uint64
	lastActivity atomic.Int64
	pingSent     atomic.Int64
	rtt          atomic.Int64
	closeOnce    sync.Once
	closed       atomic.Bool
	writerDone   chan struct{}
	// pending is what the handshake read past INFO; the read loop's.
	pending []byte
	// paces: the peer's INFO says it honours PAUSE and RESUME.
	paces bool
	// pauses holds, per account this node asked the peer to pause, the
	// backlogs still to drain before it is resumed (see pause).
	pauses struct {
		sync.Mutex
		m map[string][]<-chan struct{} // guarded by the mutex
	}
}

// routeInfo is the INFO nodes exchange.
type routeInfo struct {
	ID          string   `json:"server_id"`
	Name        string   `json:"server_name"`
	Version     string   `json:"version"`
	GoVersion   string   `json:"go"`
	Cluster     string   `json:"cluster"`
	Headers     bool     `json:"headers"`
	MaxPayload  int32    `json:"max_payload"`
	ConnectURLs []string `json:"connect_urls,omitempty"`
	// Pace: this node honours PAUSE and RESUME. A node without it would
	// cut the route on them, so they are sent only to peers that say so.
	Pace bool `json:"pace,omitempty"`
}

// handshake exchanges INFO with a new connection and registers the route.
// On errRouteDuplicate the returned route names the peer.
func (cl *cluster) handshake(conn net.Conn, dialed bool, want string) (*route, error) {
	s := cl.srv
	local := ""
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		local = a.IP.String()
	}
	info := routeInfo{ID: s.id, Name: s.name, Version: Version, GoVersion: runtime.Version(),
		Cluster: cl.name, Headers: true, MaxPayload: s.opts.MaxPayload, Pace: true}
	if u := s.clientURL(local); u != "" {
		info.ConnectURLs = []string{u}
	}
	b, _ := json.Marshal(&info)
	line := append(append([]byte("INFO "), b...), "\r\n"...)
	if dialed {
		cb, _ := json.Marshal(map[string]any{"name": s.name, "cluster": cl.name, "headers": true, "verbose": false})
		line = append(append(append(line, "CONNECT "...), cb...), "\r\n"...)
	}
	conn.SetDeadline(time.Now().Add(routeHandshake))
	if _, err := conn.Write(line); err != nil {
		conn.Close()
		return nil, fmt.Errorf("route info: %w", err)
	}
	peer, rest, err := readRouteInfo(conn, int(s.opts.MaxControlLine)+64<<10)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	limitSocketBuffers(conn)
	r := &route{cl: cl, conn: conn, out: newRouteOut(), dialed: dialed, start: time.Now(),
		remoteID: peer.ID, remoteName: peer.Name, clientURLs: peer.ConnectURLs, paces: peer.Pace,
		rsubs: map[string]map[ikey]*subscription{}, writerDone: make(chan struct{})}
	if r.remoteName == "" {
		r.remoteName = r.remoteID
	}
	r.log = s.log.With("route", r.remoteName, "remote", conn.RemoteAddr().String())
	switch {
	case peer.ID == s.id:
		conn.Close()
		return nil, errRouteSelf
	case peer.Cluster != cl.name:
		r.log.Warn("route refused: another cluster", "their_cluster", peer.Cluster, "cluster", cl.name)
		conn.Write([]byte("-ERR 'Cluster Name Conflict'\r\n"))
		conn.Close()
		return nil, fmt.Errorf("%w: %q", errRouteCluster, peer.Cluster)
	case r.remoteName == s.name:
		r.log.Warn("route refused: the peer has this node's name")
		conn.Close()
		return nil, errRouteSelf
	case want != "" && r.remoteName != want:
		r.log.Warn("route refused: the peer's name is not the configured one", "want", want)
		conn.Close()
		return nil, fmt.Errorf("route: peer is %q, want %q", r.remoteName, want)
	}
	r.touch()
	r.pending = rest
	go r.writeLoop()
	old, err := cl.register(r)
	if err != nil {
		r.close(err.Error())
		return r, err
	}
	if old != nil {
		old.close("replaced by a newer route")
	}
	r.log.Info("route connected", "remote_id", r.remoteID, "dialed", dialed)
	return r, nil
}

// readRouteInfo reads the peer's first line, which must be INFO, and
// returns what was read past it.
func readRouteInfo(conn net.Conn, max int) (*routeInfo, []byte, error) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	for {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			var op routeOp
			if _, err := parseRoute(buf[:i+1], routeLimits{maxControlLine: max}, &op); err != nil {
				return nil, nil, err
			}
			if op.kind != routeOpInfo {
				return nil, nil, fmt.Errorf("%w: first operation is not INFO", errRouteProtocol)
			}
			var info routeInfo
			if err := json.Unmarshal(op.arg, &info); err != nil || info.ID == "" {
				return nil, nil, fmt.Errorf("%w: bad INFO", errRouteProtocol)
			}
			return &info, bytes.Clone(buf[i+1:]), nil
		}
		if len(buf) > max {
			return nil, nil, errRouteControlLine
		}
		n, err := conn.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			return nil, nil, fmt.Errorf("route info: %w", err)
		}
	}
}

// routeSocketBuffer bounds the kernel's buffers of a route's socket. What
// the kernel holds is first in, first out for every account; kept small,
// the backlog waits in the route's own queue, where accounts take turns
// (cluster_out.go). 256 KiB in flight still fills a link with a
// millisecond of round trip at 2 Gbit/s.
const routeSocketBuffer = 256 << 10

// limitSocketBuffers applies routeSocketBuffer to a TCP connection,
// under TLS too (the cluster port's TLS wraps the socket).
func limitSocketBuffers(c net.Conn) {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(routeSocketBuffer)
		_ = tc.SetReadBuffer(routeSocketBuffer)
	}
}

func (r *route) touch() { r.lastActivity.Store(time.Now().UnixNano()) }

// maxPending bounds what the route may have queued; past it the peer is
// too slow and the route is cut (and redialed).
func (r *route) maxPending() int64 { return r.cl.srv.opts.MaxPending }

// send queues raw protocol bytes.
func (r *route) send(b []byte) {
	o := r.out
	o.mu.Lock()
	if o.mu.stop {
		o.mu.Unlock()
		return
	}
	o.appendCtlLocked(b)
	slow := o.mu.pending > r.maxPending()
	o.mu.Unlock()
	if slow {
		r.slow()
		return
	}
	o.wake()
}

// slow cuts a route whose peer does not keep up.
func (r *route) slow() {
	r.cl.srv.stats.slowRoutes.Add(1)
	r.log.Warn("slow route: outbound queue over its bound, cutting the route", "max_pending", r.maxPending())
	go r.close("slow route")
}

// close ends the route; idempotent.
func (r *route) close(reason string) {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		o := r.out
		o.mu.Lock()
		o.mu.stop = true
		o.dropLocked()
		o.unstallLocked(r.maxPending())
		o.mu.Unlock()
		o.wake()
		r.conn.Close()
		r.cl.unregister(r)
		if reason != errRouteDuplicate.Error() {
			r.log.Info("route closed", "reason", reason)
		}
	})
}

// writeLoop writes what is queued until the route closes.
func (r *route) writeLoop() {
	defer close(r.writerDone)
	o := r.out
	var bufs net.Buffers
	for range o.signal {
		// One turn per write, until the queue is empty: what arrives
		// meanwhile takes its place in the next turn.
		for {
			o.mu.Lock()
			taken := o.takeTurnLocked(bufs[:0])
			stop := o.mu.stop
			o.mu.Unlock()
			if len(taken) == 0 {
				if stop {
					return
				}
				break
			}
			keep := append(net.Buffers(nil), taken...)
			r.conn.SetWriteDeadline(time.Now().Add(r.cl.srv.opts.WriteDeadline))
			_, err := taken.WriteTo(r.conn)
			release(keep)
			if err != nil {
				go r.close("write error: " + err.Error())
				return
			}
			o.mu.Lock()
			o.unstallLocked(r.maxPending())
			o.mu.Unlock()
			if stop {
				return
			}
		}
	}
}

// run reads and applies the peer's operations until the route closes.
func (r *route) run() {
	defer r.close("connection closed")
	s := r.cl.srv
	lim := routeLimits{
		maxControlLine: int(s.opts.MaxControlLine) + 64<<10,
		maxPayload:     int(s.opts.MaxPayload) + 64<<10,
	}
	ping := time.NewTicker(routePingInterval)
	defer ping.Stop()
	go func() {
		for {
			select {
			case <-ping.C:
				if time.Since(time.Unix(0, r.lastActivity.Load())) > routeStale {
					r.log.Warn("stale route, closing")
					r.close("stale connection")
					return
				}
				r.pingSent.Store(time.Now().UnixNano())
				r.send([]byte("PING\r\n"))
			case <-r.writerDone:
				return
			}
		}
	}()
	snd := &sender{srv: s, noRoute: true, paced: r.paces}
	buf := make([]byte, max(minReadBuf, 2*len(r.pending)))
	end := copy(buf, r.pending)
	r.pending = nil
	start := 0
	var op routeOp
	for {
		for start < end {
			used, err := parseRoute(buf[start:end], lim, &op)
			if err != nil {
				r.log.Warn("route protocol error, closing", "err", err)
				r.send([]byte("-ERR 'Protocol Error'\r\n"))
				return
			}
			if used == 0 {
				break
			}
			if !r.process(snd, &op) {
				return
			}
			start += used
		}
		snd.stall = nil
		snd.wakePending()
		buf, start, end = compact(buf, start, end)
		n, err := r.conn.Read(buf[end:])
		if n > 0 {
			r.touch()
		}
		end += n
		if err != nil {
			return
		}
	}
}

// process applies one operation; false ends the route.
func (r *route) process(snd *sender, op *routeOp) bool {
	switch op.kind {
	case routeOpPing:
		r.send([]byte("PONG\r\n"))
	case routeOpPong:
		if t := r.pingSent.Load(); t != 0 {
			r.rtt.Store(time.Now().UnixNano() - t)
		}
	case routeOpErr:
		r.log.Warn("route error from peer", "err", string(op.arg))
	case routeOpSub:
		return r.remoteSub(string(op.acct), string(op.subj), string(op.queue), op.weight)
	case routeOpUnsub:
		r.remoteUnsub(string(op.acct), string(op.subj), string(op.queue))
	case routeOpPause, routeOpResume:
		o := r.out
		o.mu.Lock()
		o.pauseLocked(string(op.acct), op.kind == routeOpPause, r.maxPending())
		o.mu.Unlock()
		o.wake()
	case routeOpMsg:
		r.inMsgs.Add(1)
		r.inBytes.Add(uint64(len(op.msg)))
		r.deliverRouted(snd, op)
		if snd.drain {
			// A stream here has a backlog past its stall threshold. The
			// read loop must not wait for it (every account's traffic
			// comes through here), so the peer is asked to hold back
			// the account's publishers until it drains.
			r.pause(string(op.acct), snd.stall)
		}
		snd.stall, snd.drain = nil, false
	}
	return true
}

// pause asks the peer to pause acct's publishers until the backlog that
// wait watches has drained (and any others noted meanwhile), then to
// resume them. Without it a publisher on another node than the stream's
// had no back-pressure at all: its publishes crossed the route as fast
// as it sent them, and past the backlog's bound they were refused (an
// object store's chunks are published 4,000 at a time), while one on the
// stream's own node simply waits. Messages already on their way are
// still taken: a routed publish may overdraw the stream's backlog bound
// for them (see PacedHandler).
func (r *route) pause(acct string, wait <-chan struct{}) {
	if !r.paces {
		return
	}
	r.pauses.Lock()
	waits, paused := r.pauses.m[acct]
	if paused {
		if !slices.Contains(waits, wait) {
			r.pauses.m[acct] = append(waits, wait)
		}
		r.pauses.Unlock()
		return
	}
	if r.pauses.m == nil {
		r.pauses.m = map[string][]<-chan struct{}{}
	}
	r.pauses.m[acct] = []<-chan struct{}{wait}
	// Sent under the lock, as RESUME is: the peer sees them in the order
	// the pauses were decided.
	r.send(appendPause(nil, true, acct))
	r.pauses.Unlock()
	go r.resumeWhenDrained(acct)
}

// resumeWhenDrained waits for each backlog noted for acct to drain, then
// sends RESUME. A backlog of queued work always drains (see
// PacedHandler); the route's end ends the wait, and the peer's pauses
// with it.
func (r *route) resumeWhenDrained(acct string) {
	for {
		r.pauses.Lock()
		waits := r.pauses.m[acct]
		if len(waits) == 0 {
			delete(r.pauses.m, acct)
			r.send(appendPause(nil, false, acct))
			r.pauses.Unlock()
			return
		}
		wait := waits[0]
		r.pauses.m[acct] = waits[1:]
		r.pauses.Unlock()
		select {
		case <-wait:
		case <-r.writerDone:
			return
		}
	}
}

// remoteSub records interest the peer announced, and puts it in the
// account's index when this node has the account loaded. An RS+ for a
// queue group the peer announced before changes its weight.
func (r *route) remoteSub(acct, subj, queue string, weight int) bool {
	cl := r.cl
	k := ikey{subj, queue}
	weight = queueWeight(weight)
	if queue == "" {
		weight = 1
	}
	cl.mu.Lock()
	if r.rsubs == nil { // unregistered: the route is closing
		cl.mu.Unlock()
		return false
	}
	m := r.rsubs[acct]
	sub := m[k]
	old := 0
	if sub != nil {
		old = sub.fwd.(*routeSub).weight
		if old == weight {
			cl.mu.Unlock()
			return true
		}
	}
	// Past a bound the interest is refused and the route stays: cutting
	// it would cut every tenant's traffic, and the peer would announce
	// the same set again when it redials.
	if perAcct := remoteAccountSubs(cl.srv.opts.MaxAccountSubs); (sub == nil && int64(len(m)) >= perAcct) || r.nrsubs-old+weight > maxRemoteSubs {
		first := !r.refusing[acct]
		if r.refusing == nil {
			r.refusing = map[string]bool{}
		}
		r.refusing[acct] = true
		cl.mu.Unlock()
		if first {
			r.log.Warn("route interest past its bound refused: messages from this node will not reach the subscriptions past it",
				"account", acct, "max_account_subscriptions", perAcct, "max_route_interest", maxRemoteSubs)
		}
		return true
	}
	if m == nil {
		m = map[ikey]*subscription{}
		r.rsubs[acct] = m
	}
	if sub == nil {
		sub = &subscription{subject: []byte(subj), queue: []byte(queue), fwd: &routeSub{r: r, acct: acct, queue: []byte(queue)}}
		sub.acc = cl.srv.routedAccount(acct)
	}
	a := sub.acc
	if a != nil {
		uninstallRemote(a, k, sub)
		if err := installRemote(a, k, sub, weight); err != nil {
			delete(m, k)
			r.nrsubs -= old
			cl.mu.Unlock()
			r.log.Debug("route interest refused", "account", acct, "subject", subj, "err", err)
			return true
		}
	}
	sub.fwd.(*routeSub).weight = weight
	m[k] = sub
	r.nrsubs += weight - old
	cl.mu.Unlock()
	if a != nil && old == 0 {
		a.notifyInterest(subj)
	}
	return true
}

// remoteAccountSubs is how much of one account's interest a route takes:
// a peer announces its clients' subscriptions (at most maxClient, as here)
// and the server's own for the account (JetStream's stream captures,
// consumers and API, imports), which no client bound counts; the room
// above maxClient is theirs. It saturates: a bound configured near the
// int64 limit must not wrap to a negative one that refuses everything.
func remoteAccountSubs(maxClient int64) int64 {
	if maxClient > math.MaxInt64/4 {
		return math.MaxInt64
	}
	return 4 * maxClient
}

func (r *route) remoteUnsub(acct, subj, queue string) {
	cl := r.cl
	k := ikey{subj, queue}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	sub := r.rsubs[acct][k]
	if sub == nil {
		return
	}
	delete(r.rsubs[acct], k)
	if len(r.rsubs[acct]) == 0 {
		delete(r.rsubs, acct)
	}
	r.nrsubs -= sub.fwd.(*routeSub).weight
	uninstallRemote(sub.acc, k, sub)
}

// deliverRouted hands a message from the peer to this node's subscribers:
// every plain one and one member of each queue group the frame names.
// Nothing goes on to another route (snd.noRoute).
func (r *route) deliverRouted(snd *sender, op *routeOp) {
	a := r.cl.srv.routedAccount(string(op.acct))
	if a == nil {
		return // nobody here can be subscribed to it
	}
	r.cl.srv.stats.inMsgs.Add(1)
	r.cl.srv.stats.inBytes.Add(uint64(len(op.msg)))
	to := op.to
	var res *subject.Result[*subscription]
	if oneShot(to) {
		// Acks and replies crossing the route: matched into the route's
		// scratch, as a client's own are (client.route).
		res = a.subs.MatchOnceInto(to, &snd.match)
		defer snd.match.Reset() // holds no subscription past the message
	} else {
		res = a.subs.Match(to)
	}
	if res.Empty() {
		return
	}
	if !bytes.Equal(to, op.subj) {
		snd.links.deliverTo = to
	}
	if !op.queuesOnly {
		for _, sub := range res.Plain {
			if _, remote := sub.fwd.(*routeSub); remote {
				continue
			}
			snd.deliver(sub, op.subj, op.reply, op.hdrLen, op.msg)
		}
	}
	named := namedIn(op.queues)
	for _, members := range res.Queues {
		if len(members) == 0 || !named.has(members[0].queue) {
			continue
		}
		if sub := pickLocalMember(members); sub != nil {
			snd.deliver(sub, op.subj, op.reply, op.hdrLen, op.msg)
		}
	}
	snd.links = linkCtx{}
}

// queueNames is the queue groups a frame names, tested for membership by
// a scan for the few names a frame usually carries and through a set for
// many, so a frame naming hundreds of groups against as many local ones
// costs their sum, not their product, on the route's reader every tenant
// shares. A value: the usual frame's costs no allocation.
type queueNames struct {
	list [][]byte
	set  map[string]struct{}
}

func namedIn(queues [][]byte) queueNames {
	if len(queues) <= 16 {
		return queueNames{list: queues}
	}
	set := make(map[string]struct{}, len(queues))
	for _, q := range queues {
		set[string(q)] = struct{}{}
	}
	return queueNames{set: set}
}

// has reports whether the frame names q.
func (n queueNames) has(q []byte) bool {
	if n.set != nil {
		_, ok := n.set[string(q)]
		return ok
	}
	return named(n.list, q)
}

// named reports whether q is among queues.
func named(queues [][]byte, q []byte) bool {
	for _, x := range queues {
		if bytes.Equal(x, q) {
			return true
		}
	}
	return false
}

// pickLocalMember chooses among a queue group's members on this node.
func pickLocalMember(members []*subscription) *subscription {
	n := 0
	for _, m := range members {
		if _, remote := m.fwd.(*routeSub); !remote {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	i := int(members[0].acc.rr.Add(1)) % n
	for _, m := range members {
		if _, remote := m.fwd.(*routeSub); !remote {
			if i == 0 {
				return m
			}
			i--
		}
	}
	return nil
}

func (r *route) info() RouteInfo {
	ri := RouteInfo{RID: r.rid, RemoteID: r.remoteID, RemoteName: r.remoteName, Solicited: r.dialed,
		Start: r.start, LastActivity: time.Unix(0, r.lastActivity.Load()), RTT: time.Duration(r.rtt.Load()),
		InMsgs: r.inMsgs.Load(), OutMsgs: r.outMsgs.Load(), InBytes: r.inBytes.Load(), OutBytes: r.outBytes.Load(),
		DroppedMsgs: r.dropped.Load(),
		Subs:        r.nrsubs, ClientURLs: r.clientURLs}
	if a, ok := r.conn.RemoteAddr().(*net.TCPAddr); ok {
		ri.IP, ri.Port = a.IP.String(), a.Port
	}
	r.out.mu.Lock()
	ri.Pending = r.out.mu.pending
	r.out.mu.Unlock()
	return ri
}
