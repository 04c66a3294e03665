package server

import (
	"fmt"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/contrail/contrail/dataplane/cluster/mux"
	"github.com/contrail/contrail/dataplane/config"
)

// startMesh runs n in-process nodes with routes between them and waits
// for the full mesh.
func startMesh(t *testing.T, n int) []*Server {
	t.Helper()
	return startMeshWith(t, n, nil)
}

// startMeshWith is startMesh with tweak, if set, adjusting node i's
// options.
func startMeshWith(t *testing.T, n int, tweak func(i int, o *config.Options)) []*Server {
	t.Helper()
	lns := make([]net.Listener, n)
	var peers []config.Peer
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		peers = append(peers, config.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: ln.Addr().String()})
	}
	servers := make([]*Server, n)
	for i := range servers {
		s := startServer(t, func(o *config.Options) {
			o.ServerName = peers[i].ID
			o.Cluster = &config.ClusterOptions{Name: "test", Host: "127.0.0.1", Peers: peers}
			if tweak != nil {
				tweak(i, o)
			}
		})
		m := mux.New(lns[i], s.log, testSecret, nil)
		t.Cleanup(func() { m.Close() })
		if err := s.StartCluster(m); err != nil {
			t.Fatal(err)
		}
		servers[i] = s
	}
	waitUntil(t, "full mesh", func() bool {
		for _, s := range servers {
			if len(s.Routes()) != n-1 {
				return false
			}
		}
		return true
	})
	return servers
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// HasInterest and WatchInterest (push consumers) count interest that
// arrives over a route, and lose it when the remote subscriber goes.
func TestClusterInterestAcrossRoutes(t *testing.T) {
	s := startMesh(t, 2)
	acc := s[0].GlobalAccount()
	fired := make(chan struct{}, 1)
	cancel := acc.WatchInterest("deliver.x", func() {
		select {
		case fired <- struct{}{}:
		default:
		}
	})
	defer cancel()
	if acc.HasInterest("deliver.x") {
		t.Fatal("interest before anyone subscribed")
	}
	nc := connect(t, s[1])
	sub, err := nc.SubscribeSync("deliver.*")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchInterest did not fire for a remote subscriber")
	}
	if !acc.HasInterest("deliver.x") {
		t.Fatal("HasInterest misses the remote subscriber")
	}
	if n1, n2 := acc.clientSubs(), s[1].GlobalAccount().clientSubs(); n1 != 0 || n2 != 1 {
		t.Errorf("client subscriptions n1=%d n2=%d, want 0 and 1 (route interest is not a client's)", n1, n2)
	}
	// An internal publish on n1 reaches the client on n2.
	acc.Publish("deliver.x", "", nil, []byte("hi"))
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("remote delivery: %v %v", m, err)
	}
	sub.Unsubscribe()
	nc.Flush()
	waitUntil(t, "remote interest to go", func() bool { return !acc.HasInterest("deliver.x") })
	if n1, n2 := acc.clientSubs(), s[1].GlobalAccount().clientSubs(); n1 != 0 || n2 != 0 {
		t.Errorf("client subscriptions after unsubscribe n1=%d n2=%d, want 0", n1, n2)
	}
}

// Internal subscriptions are announced: a client on n2 reaches a service
// subscribed inside the server on n1, and its reply comes back.
func TestClusterInternalSubscription(t *testing.T) {
	s := startMesh(t, 3)
	unsub, err := s[0].GlobalAccount().SubscribeInternal("svc.internal", func(_, reply, _, msg []byte) {
		s[0].GlobalAccount().Publish(string(reply), "", nil, append([]byte("re:"), msg...))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	nc := connect(t, s[2])
	waitUntil(t, "the internal service across the route", func() bool {
		m, err := nc.Request("svc.internal", []byte("x"), 100*time.Millisecond)
		return err == nil && string(m.Data) == "re:x"
	})
	unsub()
	waitUntil(t, "no responders once it goes", func() bool {
		_, err := nc.Request("svc.internal", nil, time.Second)
		return err == nats.ErrNoResponders
	})
}

// Two connections between one pair collapse to one, whichever side
// dialed first, and the mesh stays at one route per peer.
func TestClusterOneRoutePerPair(t *testing.T) {
	s := startMesh(t, 3)
	time.Sleep(3 * routeBackoffMin) // any duplicate dial would have landed
	for _, srv := range s {
		seen := map[string]bool{}
		for _, r := range srv.Routes() {
			if seen[r.RemoteName] {
				t.Errorf("%s: two routes to %s", srv.Name(), r.RemoteName)
			}
			seen[r.RemoteName] = true
		}
		if len(seen) != 2 {
			t.Errorf("%s: routes to %v", srv.Name(), seen)
		}
	}
}

// A peer of another cluster name is refused.
// testSecret is the cluster secret of the tests' meshes.
var testSecret = []byte("test-cluster-secret")

func TestClusterNameMismatch(t *testing.T) {
	s := startMesh(t, 2)
	other := startServer(t, func(o *config.Options) {
		o.ServerName = "x"
		o.Cluster = &config.ClusterOptions{Name: "other", Host: "127.0.0.1"}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := mux.New(ln, other.log, testSecret, nil)
	defer m.Close()
	if err := other.StartCluster(m); err != nil {
		t.Fatal(err)
	}
	s[0].cluster.mu.Lock()
	addr := s[0].cluster.mu.addr
	s[0].cluster.mu.Unlock()
	c, err := m.Dial(addr, mux.KindRoute, 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.cluster.handshake(c, true, ""); err == nil {
		t.Fatal("a route between clusters of different names was accepted")
	}
	if n := len(s[0].Routes()); n != 1 {
		t.Errorf("n1 has %d routes, want 1", n)
	}
}

// A queue group is announced with its member count, and peers weigh it
// by that count; the last member's going removes it everywhere.
func TestClusterQueueWeight(t *testing.T) {
	s := startMesh(t, 2)
	acc := s[0].GlobalAccount()
	nc := connect(t, s[1])
	var subs []*nats.Subscription
	for i := 0; i < 3; i++ {
		sub, err := nc.QueueSubscribeSync("jobs", "workers")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	nc.Flush()
	// The peer's group is in n1's index once per member.
	weight := func() int {
		r := acc.subs.Match([]byte("jobs"))
		if len(r.Queues) != 1 {
			return len(r.Queues)
		}
		return len(r.Queues[0])
	}
	waitUntil(t, "weight 3 on n1", func() bool { return weight() == 3 })
	subs[0].Unsubscribe()
	nc.Flush()
	waitUntil(t, "weight 2 on n1", func() bool { return weight() == 2 })
	subs[1].Unsubscribe()
	subs[2].Unsubscribe()
	nc.Flush()
	waitUntil(t, "no interest on n1", func() bool { return weight() == 0 && !acc.HasInterest("jobs") })
	if n := acc.clientSubs(); n != 0 {
		t.Errorf("client subscriptions on n1 = %d, want 0", n)
	}
}

// A message for more queue groups than one route frame holds (by count,
// or by the length of their names) crosses as several frames: every group
// gets it once, the plain subscriber once, and the route, which every
// tenant's traffic shares, stays up. One frame of it all was refused by
// the receiver, which cut the route.
func TestClusterManyQueueGroupsOneMessage(t *testing.T) {
	s := startMesh(t, 2)
	var groups []string
	for i := range maxRouteQueues + 100 {
		groups = append(groups, fmt.Sprintf("q%d", i))
	}
	for i := range 20 {
		groups = append(groups, fmt.Sprintf("long%04d-%s", i, strings.Repeat("x", 4000)))
	}
	got := make([]atomic.Int32, len(groups))
	var total atomic.Int32
	nc := connect(t, s[1])
	for i, q := range groups {
		if _, err := nc.QueueSubscribe("many.x", q, func(*nats.Msg) { got[i].Add(1); total.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := nc.SubscribeSync("many.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the interest on n1", func() bool { return s[0].Routes()[0].Subs >= len(groups)+1 })
	// Two nodes dialing each other at start keep one of the two routes;
	// by now that is settled, and a route cut from here on is a new one.
	settled := time.Now()
	pub := connect(t, s[0])
	const msgs = 3
	for range msgs {
		if err := pub.Publish("many.x", []byte("hi")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish("many.end", nil); err != nil {
		t.Fatal(err)
	}
	// Frames keep their order on the route: once the plain subscriber
	// has many.end, it has had every copy it was sent.
	for i := 0; ; i++ {
		m, err := plain.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("plain subscriber after %d messages: %v", i, err)
		}
		if m.Subject == "many.end" {
			if i != msgs {
				t.Fatalf("plain subscriber got %d copies of %d messages", i, msgs)
			}
			break
		}
	}
	waitUntil(t, "every queue group's messages", func() bool { return int(total.Load()) >= msgs*len(groups) })
	for i := range got {
		if n := got[i].Load(); n != msgs {
			t.Fatalf("queue group %.10s… got %d of %d messages", groups[i], n, msgs)
		}
	}
	if r := s[0].Routes(); len(r) != 1 || r[0].Start.After(settled) {
		t.Fatalf("the route was cut: %+v", r)
	}
}

// One account's subscriptions are bounded on each node
// (max_account_subscriptions): the SUB past the bound gets nats-server's
// error, and a route refuses a peer's interest for one account past its
// own bound for it (remoteAccountSubs) while keeping the others' and
// staying up. n2 allows more than n1, so n2 announces to n1 more of
// account A's interest than n1 takes.
func TestClusterAccountSubscriptionBound(t *testing.T) {
	const n1Max, n2Max, subsA = 50, 1000, 300
	none := config.AccountLimits{MaxConnections: -1, MaxSubscriptions: -1, MaxPayload: -1, MaxLeafNodes: -1}
	s := startMeshWith(t, 2, func(i int, o *config.Options) {
		o.MaxAccountSubs = n1Max
		if i == 1 {
			o.MaxAccountSubs = n2Max
		}
		o.Accounts = []*config.Account{
			{Name: "A", Users: []config.User{{Name: "a", Password: "a"}}, Limits: none},
			{Name: "B", Users: []config.User{{Name: "b", Password: "b"}}, Limits: none},
		}
	})
	errs := make(chan error, 16)
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })

	a2 := connect(t, s[1], nats.UserInfo("a", "a"), onErr)
	var subs []*nats.Subscription
	for i := range subsA {
		sub, err := a2.SubscribeSync(fmt.Sprintf("a.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	b2 := connect(t, s[1], nats.UserInfo("b", "b"), onErr)
	bsub, err := b2.SubscribeSync("b.x")
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{a2, b2} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("n2 refused a subscription within its bound: %v", err)
	default:
	}
	// n1 holds as many of A's interests as it takes, and B's one.
	waitUntil(t, "n1 to hold the interest it takes", func() bool { return s[0].Routes()[0].Subs == int(remoteAccountSubs(n1Max))+1 })
	settled := time.Now() // see TestClusterManyQueueGroupsOneMessage

	// B is untouched and the route stayed up: B's message crosses it.
	b1 := connect(t, s[0], nats.UserInfo("b", "b"))
	if err := b1.Publish("b.x", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if m, err := bsub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "b" {
		t.Fatalf("account B across the route: %v %v", m, err)
	}
	// A's interest within n1's bound (announced first) works too.
	a1 := connect(t, s[0], nats.UserInfo("a", "a"), onErr)
	if err := a1.Publish("a.0", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if m, err := subs[0].NextMsg(5 * time.Second); err != nil || string(m.Data) != "a" {
		t.Fatalf("account A within the bound across the route: %v %v", m, err)
	}
	if r := s[0].Routes(); len(r) != 1 || r[0].Start.After(settled) {
		t.Fatalf("the route was cut: %+v", r)
	}

	// On n1 itself, A's SUB past the bound is refused with nats-server's
	// error; the connection stays.
	for i := range n1Max + 1 {
		if _, err := a1.SubscribeSync(fmt.Sprintf("own.%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "maximum subscriptions exceeded") {
			t.Fatalf("SUB past the bound: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no error for the SUB past the account's bound")
	}
	if err := a1.Flush(); err != nil || a1.IsClosed() {
		t.Fatalf("connection after the refused SUB: %v, closed %v", err, a1.IsClosed())
	}
}

// A route's bound on one account's interest follows the configured
// client bound and saturates at the top of int64 instead of wrapping.
func TestRemoteAccountSubs(t *testing.T) {
	for _, tt := range []struct{ in, want int64 }{
		{1, 4}, {1 << 16, 1 << 18}, {math.MaxInt64 / 4, math.MaxInt64 / 4 * 4},
		{math.MaxInt64/4 + 1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64},
	} {
		if got := remoteAccountSubs(tt.in); got != tt.want {
			t.Errorf("remoteAccountSubs(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
