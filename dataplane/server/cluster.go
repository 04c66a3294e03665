package server

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/cluster/mux"
	"github.com/contrail/contrail/dataplane/config"
)

// The cluster layer: a full mesh of routes between the nodes named in
// the options, each carrying account-scoped interest (RS+/RS-) and the
// messages that match it. A message crosses at most one route (one hop):
// what arrives from a route is delivered to local subscribers only.

// Route timing. Dials back off from routeBackoffMin to routeBackoffMax
// with jitter, so restarted nodes rejoin quickly without a dial storm.
const (
	routeDialTimeout  = 2 * time.Second
	routeBackoffMin   = 50 * time.Millisecond
	routeBackoffMax   = 2 * time.Second
	routeHandshake    = 5 * time.Second
	routePingInterval = 5 * time.Second
	// routeStale: a route that has sent nothing (not even PONG) for this
	// long is cut and redialed.
	routeStale = 3 * routePingInterval
	// maxRemoteSubs bounds the interest one route may announce, all
	// accounts together (queue groups by weight): the cluster port is
	// hostile input too. Each account has its own, smaller bound
	// (Options.MaxAccountSubs), so it takes many accounts at theirs to
	// reach this one.
	maxRemoteSubs = 1 << 22
)

// Why a route ended.
var (
	errRouteSelf      = errors.New("route to self")
	errRouteDuplicate = errors.New("duplicate route")
	errRouteCluster   = errors.New("cluster name mismatch")
)

// ikey is one interest: a subject filter and, for a queue group, its name.
type ikey struct{ subj, queue string }

// cluster is the server's cluster layer.
type cluster struct {
	srv  *Server
	opts *config.ClusterOptions
	name string

	mu struct {
		sync.Mutex
		routes map[string]*route // by remote server name; guarded by mu
		// local counts this node's own interest per account: what RS+
		// announced. Interest learnt from routes is never in it.
		local   map[string]map[ikey]int // guarded by mu
		changed chan struct{}           // closed and replaced when routes change; guarded by mu
		ln      net.Listener            // guarded by mu
		addr    string                  // the bound cluster address; guarded by mu
		closed  bool                    // guarded by mu
		nextRID uint64                  // guarded by mu
		// urls is the client URL set last told to clients.
		urls []string // guarded by mu
	}
	wg   sync.WaitGroup
	done chan struct{}
}

func newCluster(s *Server, o *config.ClusterOptions) *cluster {
	cl := &cluster{srv: s, opts: o, name: o.Name, done: make(chan struct{})}
	cl.mu.routes = map[string]*route{}
	cl.mu.local = map[string]map[ikey]int{}
	cl.mu.changed = make(chan struct{})
	return cl
}

// StartCluster starts the routes: it accepts route connections on m's
// route channel and dials every configured peer, redialing with backoff
// for as long as the server runs. Call it after the server's accounts and
// services are set up (SetOperatorMode, JetStream) and before or after
// Serve; it needs options with a Cluster block.
func (s *Server) StartCluster(m *mux.Mux) error {
	cl := s.cluster
	if cl == nil {
		return errors.New("cluster: no cluster options")
	}
	ln, err := m.Listen(mux.KindRoute, 0)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cl.mu.Lock()
	if cl.mu.closed {
		cl.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	cl.mu.ln = ln
	cl.mu.addr = m.Addr().String()
	cl.mu.Unlock()
	s.log.Info("cluster listening", "addr", m.Addr().String(), "cluster", cl.name, "peers", len(cl.opts.Peers))
	cl.wg.Add(1)
	go cl.acceptLoop(ln)
	for _, p := range cl.opts.Peers {
		if p.ID != "" && p.ID == s.name {
			continue
		}
		cl.wg.Add(1)
		go cl.dialLoop(ln, p)
	}
	return nil
}

// ClusterName is the cluster's name, or "" when the node runs alone.
func (s *Server) ClusterName() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.name
}

// close cuts every route and stops dialing.
func (cl *cluster) close() {
	cl.mu.Lock()
	if cl.mu.closed {
		cl.mu.Unlock()
		return
	}
	cl.mu.closed = true
	close(cl.done)
	ln := cl.mu.ln
	routes := make([]*route, 0, len(cl.mu.routes))
	for _, r := range cl.mu.routes {
		routes = append(routes, r)
	}
	cl.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, r := range routes {
		r.close("server shutdown")
	}
	cl.wg.Wait()
}

func (cl *cluster) acceptLoop(ln net.Listener) {
	defer cl.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			r, err := cl.handshake(conn, false, "")
			if err != nil {
				cl.srv.log.Debug("route refused", "remote", conn.RemoteAddr().String(), "err", err)
				return
			}
			r.run()
		}()
	}
}

// dialLoop keeps a route to one configured peer. While a route to that
// peer exists (dialed by either side) it waits; when it goes, it dials
// again with backoff.
func (cl *cluster) dialLoop(ln *mux.Listener, p config.Peer) {
	defer cl.wg.Done()
	name := p.ID
	backoff := routeBackoffMin
	for {
		cl.mu.Lock()
		changed := cl.mu.changed
		_, connected := cl.mu.routes[name]
		cl.mu.Unlock()
		if name != "" && connected {
			select {
			case <-changed:
				continue
			case <-cl.done:
				return
			}
		}
		conn, err := ln.Dial(p.Addr, mux.KindRoute, 0, routeDialTimeout)
		if errors.Is(err, mux.ErrHandshake) {
			// A peer that is up but holds another secret never joins:
			// say so where the operator looks (once per backoff step).
			cl.srv.log.Warn("route refused: the peer does not hold this node's cluster secret", "peer", p.Addr, "err", err)
		}
		if err == nil {
			var r *route
			r, err = cl.handshake(conn, true, name)
			switch {
			case errors.Is(err, errRouteSelf):
				return
			case err == nil:
				name = r.remoteName
				start := time.Now()
				r.run()
				if time.Since(start) > routeBackoffMax {
					backoff = routeBackoffMin
				}
			case errors.Is(err, errRouteDuplicate):
				name = r.remoteName // the other route serves; wait on it
				backoff = routeBackoffMin
				continue
			default:
				cl.srv.log.Debug("route handshake failed", "peer", p.Addr, "err", err)
			}
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, routeBackoffMax)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-cl.done:
			t.Stop()
			return
		}
	}
}

// register makes r the route to its peer, unless a route to that peer
// exists that the rule keeps: of two connections between one pair, the
// one dialed by the node with the lower name stays, so both ends choose
// the same. A route from a restarted peer (new server id) replaces the
// old one at once. On success the full local interest is queued on r
// before any incremental RS+/RS- can be, under one lock.
func (cl *cluster) register(r *route) (old *route, err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.mu.closed {
		return nil, ErrServerClosed
	}
	if cur := cl.mu.routes[r.remoteName]; cur != nil {
		if cur.remoteID == r.remoteID && !cl.prefer(r, cur) {
			return nil, errRouteDuplicate
		}
		old = cur
	}
	cl.mu.nextRID++
	r.rid = cl.mu.nextRID
	var b []byte
	for acct, m := range cl.mu.local {
		for k, n := range m {
			b = appendRS(b, true, acct, k.subj, k.queue, queueWeight(n))
			if len(b) > chunkSize {
				r.send(b)
				b = b[:0]
			}
		}
	}
	if len(b) > 0 {
		r.send(b)
	}
	cl.mu.routes[r.remoteName] = r
	cl.changedLocked()
	return old, nil
}

// prefer reports whether route a should replace b (same peer, same
// incarnation): the one dialed by the lower-named node wins.
func (cl *cluster) prefer(a, b *route) bool {
	if a.dialed == b.dialed {
		return false
	}
	dialer := func(r *route) string {
		if r.dialed {
			return cl.srv.name
		}
		return r.remoteName
	}
	return dialer(a) < dialer(b)
}

// unregister drops r and the interest it announced.
func (cl *cluster) unregister(r *route) {
	cl.mu.Lock()
	if cl.mu.routes[r.remoteName] == r {
		delete(cl.mu.routes, r.remoteName)
		cl.changedLocked()
	}
	for _, m := range r.rsubs {
		for k, sub := range m {
			uninstallRemote(sub.acc, k, sub)
		}
	}
	r.rsubs, r.nrsubs = nil, 0
	cl.mu.Unlock()
}

// changedLocked wakes dial loops and tells clients of the new server set.
func (cl *cluster) changedLocked() {
	close(cl.mu.changed)
	cl.mu.changed = make(chan struct{})
	urls := cl.connectURLsLocked()
	if !slices.Equal(urls, cl.mu.urls) {
		cl.mu.urls = urls
		go cl.srv.sendInfoUpdates()
	}
}

// connectURLsLocked is the client URL set of the cluster: this node's and
// every connected peer's, sorted.
func (cl *cluster) connectURLsLocked() []string {
	var urls []string
	if own := cl.srv.clientURL(""); own != "" {
		urls = append(urls, own)
	}
	for _, r := range cl.mu.routes {
		urls = append(urls, r.clientURLs...)
	}
	slices.Sort(urls)
	return slices.Compact(urls)
}

// connectURLs is connectURLsLocked for INFO.
func (cl *cluster) connectURLs() []string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.connectURLsLocked()
}

// clientURL is the host:port clients reach this node on. An unspecified
// listen host is replaced by the cluster host, or by via (the local
// address a peer reached us on).
func (s *Server) clientURL(via string) string {
	a, ok := s.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	host := s.opts.Host
	if unspecified(host) && s.cluster != nil {
		host = s.cluster.opts.Host
	}
	if unspecified(host) {
		host = via
	}
	if unspecified(host) {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port))
}

func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// sendInfoUpdates sends a fresh INFO (with the new connect_urls) to every
// client that said it understands asynchronous INFO (protocol >= 1).
func (s *Server) sendInfoUpdates() {
	for _, c := range s.clientList() {
		if c.infoUpdates.Load() && !c.closed.Load() {
			c.queue(s.infoFor(c))
			c.out.wake()
		}
	}
}

// localInterest records a change of this node's interest in subj (queue)
// of acct and tells every route when the interest appears or goes.
func (cl *cluster) localInterest(acct, subj, queue string, delta int) {
	k := ikey{subj, queue}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	m := cl.mu.local[acct]
	if m == nil {
		if delta < 0 {
			return
		}
		m = map[ikey]int{}
		cl.mu.local[acct] = m
	}
	n := m[k] + delta
	switch {
	case n <= 0:
		if _, had := m[k]; !had {
			return
		}
		delete(m, k)
		if len(m) == 0 {
			delete(cl.mu.local, acct)
		}
		cl.broadcastLocked(appendRS(nil, false, acct, subj, queue, 0))
	case n == 1 && delta > 0, queue != "" && queueWeight(n) != queueWeight(m[k]):
		// A queue group's RS+ is sent again when its weight changes, so
		// peers choose among nodes in proportion to their members.
		m[k] = n
		cl.broadcastLocked(appendRS(nil, true, acct, subj, queue, queueWeight(n)))
	default:
		m[k] = n
	}
}

// maxQueueWeight caps the weight a queue group is announced with (and
// accepted with), which bounds the copies a peer's interest puts in an
// index.
const maxQueueWeight = 64

func queueWeight(members int) int { return min(max(members, 1), maxQueueWeight) }

func (cl *cluster) broadcastLocked(b []byte) {
	for _, r := range cl.mu.routes {
		r.send(b)
	}
}

// routedAccount is the account named name if this node has it loaded.
// Routes never load accounts: interest for an account not loaded is kept
// with the route and installed when the account loads (accountLoaded),
// and a message for it has nobody to reach here.
func (s *Server) routedAccount(name string) *Account {
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

// accountLoaded installs the interest routes announced for an account
// before this node loaded it (or loaded it again after a delete).
func (cl *cluster) accountLoaded(a *Account) {
	cl.mu.Lock()
	var added []string
	for _, r := range cl.mu.routes {
		for k, sub := range r.rsubs[a.name] {
			if sub.acc == a {
				continue
			}
			uninstallRemote(sub.acc, k, sub)
			// A fresh subscription: the old one may still be in a
			// match result somewhere, reading its account.
			nsub := &subscription{acc: a, subject: sub.subject, queue: sub.queue, fwd: sub.fwd}
			r.rsubs[a.name][k] = nsub
			if installRemote(a, k, nsub, sub.fwd.(*routeSub).weight) == nil {
				added = append(added, k.subj)
			}
		}
	}
	cl.mu.Unlock()
	for _, subj := range added {
		a.notifyInterest(subj)
	}
}

// installRemote puts a peer's interest in a's index: once for a plain
// subscription, weight times for a queue group, so that picking a member
// weighs the peer by its member count. Called with cl.mu held.
func installRemote(a *Account, k ikey, sub *subscription, weight int) error {
	n := 1
	if k.queue != "" {
		n = weight
	}
	for i := 0; i < n; i++ {
		if err := a.subs.Insert(k.subj, k.queue, sub); err != nil {
			for ; i > 0; i-- {
				a.subs.Remove(k.subj, k.queue, sub)
			}
			return err
		}
	}
	return nil
}

// uninstallRemote takes every copy of sub out of its account's index;
// nothing when the account was not loaded. Called with cl.mu held.
func uninstallRemote(a *Account, k ikey, sub *subscription) {
	if a == nil {
		return
	}
	for a.subs.Remove(k.subj, k.queue, sub) {
		// again: a queue group's weight put it in more than once
	}
}

// RouteInfo describes one route for /routez.
type RouteInfo struct {
	RID          uint64
	RemoteID     string
	RemoteName   string
	Solicited    bool
	IP           string
	Port         int
	Start        time.Time
	LastActivity time.Time
	RTT          time.Duration
	Pending      int64
	InMsgs       uint64
	OutMsgs      uint64
	InBytes      uint64
	OutBytes     uint64
	// DroppedMsgs counts messages dropped because their account's
	// backlog to the peer was over its share (cluster_out.go).
	DroppedMsgs uint64
	Subs        int
	ClientURLs  []string
}

// Routes describes the node's routes, ordered by route id.
func (s *Server) Routes() []RouteInfo {
	if s.cluster == nil {
		return nil
	}
	cl := s.cluster
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := make([]RouteInfo, 0, len(cl.mu.routes))
	for _, r := range cl.mu.routes {
		out = append(out, r.info())
	}
	slices.SortFunc(out, func(a, b RouteInfo) int { return int(a.RID) - int(b.RID) })
	return out
}

// ClusterInfo is what /varz says of the cluster.
type ClusterInfo struct {
	Name string
	Host string
	Port int
	// URLs are the configured peers' cluster addresses.
	URLs []string
}

// Cluster describes the cluster layer; nil when the node runs alone.
func (s *Server) Cluster() *ClusterInfo {
	if s.cluster == nil {
		return nil
	}
	cl := s.cluster
	ci := &ClusterInfo{Name: cl.name, Host: cl.opts.Host, Port: cl.opts.Port}
	cl.mu.Lock()
	if a, err := net.ResolveTCPAddr("tcp", cl.mu.addr); err == nil && cl.mu.addr != "" {
		ci.Port = a.Port
	}
	cl.mu.Unlock()
	for _, p := range cl.opts.Peers {
		if p.ID == "" || p.ID != s.name {
			ci.URLs = append(ci.URLs, p.Addr)
		}
	}
	return ci
}

// ConnectURLs are the client URLs INFO advertises (nil when alone).
func (s *Server) ConnectURLs() []string {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.connectURLs()
}

// insertSub puts a subscription of this node in the account's index and,
// in a cluster, announces the interest to the routes.
func (a *Account) insertSub(filter, queue string, sub *subscription) error {
	if err := a.subs.Insert(filter, queue, sub); err != nil {
		return err
	}
	if sub.client != nil {
		a.clients.Add(1)
	}
	if cl := a.srv.cluster; cl != nil && announced(sub) {
		cl.localInterest(a.name, filter, queue, 1)
	}
	return nil
}

// removeSub takes a subscription of this node out of the index; the
// routes hear when the last one of its filter and queue goes.
func (a *Account) removeSub(filter, queue string, sub *subscription) bool {
	if !a.subs.Remove(filter, queue, sub) {
		return false
	}
	if sub.client != nil {
		a.clients.Add(-1)
	}
	if cl := a.srv.cluster; cl != nil && announced(sub) {
		cl.localInterest(a.name, filter, queue, -1)
	}
	return true
}

// announced reports whether routes hear of a subscription: clients' and
// internal ones, a stream import (messages published in the exporter on
// another node must reach it) and response routes; not a service import,
// which every node holds for itself and applies to its own publishers.
func announced(sub *subscription) bool {
	switch sub.fwd.(type) {
	case nil, *streamLink, *respTable:
		return true
	}
	return false
}
