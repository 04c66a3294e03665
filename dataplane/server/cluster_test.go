package server

import (
	"fmt"
	"net"
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
	// An internal publish on n1 reaches the client on n2.
	acc.Publish("deliver.x", "", nil, []byte("hi"))
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("remote delivery: %v %v", m, err)
	}
	sub.Unsubscribe()
	nc.Flush()
	waitUntil(t, "remote interest to go", func() bool { return !acc.HasInterest("deliver.x") })
	if got := acc.clientSubs(); got != 0 {
		t.Errorf("client subscriptions on n1 = %d, want 0 (route interest is not a client's)", got)
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
	waitUntil(t, "weight 3 on n1", func() bool { return acc.remote.Load() == 3 })
	subs[0].Unsubscribe()
	nc.Flush()
	waitUntil(t, "weight 2 on n1", func() bool { return acc.remote.Load() == 2 })
	subs[1].Unsubscribe()
	subs[2].Unsubscribe()
	nc.Flush()
	waitUntil(t, "no interest on n1", func() bool { return acc.remote.Load() == 0 && !acc.HasInterest("jobs") })
}
