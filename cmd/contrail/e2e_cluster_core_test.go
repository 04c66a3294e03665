package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// waitInterest waits until a publish on subj from nc reaches sub: interest
// crosses routes asynchronously.
func waitInterest(t *testing.T, nc *nats.Conn, sub *nats.Subscription, subj string) {
	t.Helper()
	waitFor(t, 5*time.Second, "interest in "+subj+" across the route", func() bool {
		publish(t, nc, subj, []byte("probe"))
		flush(t, nc)
		_, err := sub.NextMsg(50 * time.Millisecond)
		return err == nil
	})
	for { // drain late probes
		if _, err := sub.NextMsg(20 * time.Millisecond); err != nil {
			return
		}
	}
}

func TestClusterCorePubSub(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL
	}
	conns := clusterScenarios(t, urls)

	t.Run("monitoring", func(t *testing.T) {
		v := varz(t, nodes[0].MonURL)
		if c, _ := v["cluster"].(map[string]any); c["name"] != "contrail" {
			t.Errorf("varz cluster = %v", v["cluster"])
		}
		rz := nodes[0].routez(t)
		names := map[any]bool{}
		for _, r := range rz["routes"].([]any) {
			names[r.(map[string]any)["remote_name"]] = true
		}
		if !names["n2"] || !names["n3"] {
			t.Errorf("routez remote names %v", names)
		}
	})

	t.Run("restart rejoins", func(t *testing.T) {
		sub := subscribeSync(t, conns[0], "after.restart")
		flush(t, conns[0])
		nodes[2].kill(t)
		nodes[2].restart(t)
		waitMesh(t, nodes)
		nc := connect(t, nodes[2].URL)
		waitInterest(t, nc, sub, "after.restart")
		rsub := subscribeSync(t, nc, "to.restarted")
		flush(t, nc)
		waitInterest(t, conns[1], rsub, "to.restarted")
	})
}

// clusterScenarios runs the cross-node checks every cluster must pass,
// Contrail's or nats-server's, with one client per node, and returns
// those clients.
func clusterScenarios(t *testing.T, urls []string) []*nats.Conn {
	conns := make([]*nats.Conn, len(urls))
	for i, u := range urls {
		conns[i] = connect(t, u)
	}
	t.Run("each direction", func(t *testing.T) {
		for i := range urls {
			for j := range urls {
				if i == j {
					continue
				}
				subj := fmt.Sprintf("dir.%d.%d", i, j)
				sub := subscribeSync(t, conns[j], subj)
				flush(t, conns[j])
				waitInterest(t, conns[i], sub, subj)
				publish(t, conns[i], subj, []byte("hello"))
				if m := nextMsg(t, sub); string(m.Data) != "hello" {
					t.Fatalf("%s: got %q", subj, m.Data)
				}
			}
		}
	})

	t.Run("wildcards once per route", func(t *testing.T) {
		a := subscribeSync(t, conns[1], "wild.*")
		b := subscribeSync(t, conns[1], "wild.>")
		flush(t, conns[1])
		waitInterest(t, conns[0], a, "wild.x")
		for b.Pending(); ; {
			if _, err := b.NextMsg(20 * time.Millisecond); err != nil {
				break
			}
		}
		publish(t, conns[0], "wild.y", []byte("1"))
		flush(t, conns[0])
		nextMsg(t, a)
		nextMsg(t, b)
		if m, err := a.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("duplicate delivery %q", m.Subject)
		}
	})

	t.Run("queue group once cluster-wide", func(t *testing.T) {
		var mu sync.Mutex
		got := map[string]int{}
		perNode := make([]int, 3)
		for i, nc := range conns {
			for k := 0; k < 2; k++ {
				if _, err := nc.QueueSubscribe("work", "q", func(m *nats.Msg) {
					mu.Lock()
					got[string(m.Data)]++
					perNode[i]++
					mu.Unlock()
				}); err != nil {
					t.Fatal(err)
				}
			}
			flush(t, nc)
		}
		// Make sure the other nodes' groups are known on n1.
		probe := subscribeSync(t, conns[2], "work")
		flush(t, conns[2])
		waitInterest(t, conns[0], probe, "work")
		probe.Unsubscribe()
		mu.Lock()
		clear(got)
		perNode = make([]int, 3)
		mu.Unlock()
		const n = 300
		for k := 0; k < n; k++ {
			publish(t, conns[0], "work", []byte(fmt.Sprint(k)))
		}
		flush(t, conns[0])
		waitFor(t, 5*time.Second, "all queue messages", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == n
		})
		time.Sleep(100 * time.Millisecond) // would-be duplicates arrive meanwhile
		mu.Lock()
		defer mu.Unlock()
		for k, c := range got {
			if c != 1 {
				t.Fatalf("message %s delivered %d times", k, c)
			}
		}
		// Every node has two members: each gets a fair share, not
		// just the publisher's node.
		for i, c := range perNode {
			if c < n/6 {
				t.Errorf("queue deliveries per node %v: node %d got too few", perNode, i+1)
			}
		}
	})

	t.Run("request reply and no responders", func(t *testing.T) {
		if _, err := conns[1].Subscribe("svc.echo", func(m *nats.Msg) { m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
			t.Fatal(err)
		}
		flush(t, conns[1])
		// Each node learns of the responder over its own route from n2.
		waitFor(t, 5*time.Second, "responder across the routes", func() bool {
			for _, nc := range []*nats.Conn{conns[0], conns[2]} {
				if _, err := nc.Request("svc.echo", []byte("x"), 200*time.Millisecond); err != nil {
					return false
				}
			}
			return true
		})
		m, err := conns[2].Request("svc.echo", []byte("hi"), 2*time.Second)
		if err != nil || string(m.Data) != "re:hi" {
			t.Fatalf("request: %v %v", m, err)
		}
		if _, err := conns[0].Request("svc.nobody", nil, 2*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request to nobody: %v, want no responders", err)
		}
	})

	t.Run("discovered servers", func(t *testing.T) {
		nc := connect(t, urls[0])
		waitFor(t, 5*time.Second, "discovered servers", func() bool { return len(nc.DiscoveredServers()) >= len(urls)-1 })
		found := map[string]bool{}
		for _, u := range nc.DiscoveredServers() {
			found[u] = true
		}
		for _, u := range urls[1:] {
			if !found[u] {
				t.Errorf("discovered %v, missing %s", nc.DiscoveredServers(), u)
			}
		}
	})
	return conns
}

// The same checks against a three-node nats-server cluster: what
// Contrail's routes are compared with.
func TestClusterCoreReference(t *testing.T) {
	var clusterAddrs, routes []string
	for i := 0; i < 3; i++ {
		clusterAddrs = append(clusterAddrs, freeAddr(t))
		routes = append(routes, "nats-route://"+clusterAddrs[i])
	}
	var urls []string
	for i := 0; i < 3; i++ {
		r := startNatsServer(t, "--name", fmt.Sprintf("r%d", i+1), "--cluster_name", "ref",
			"--cluster", "nats://"+clusterAddrs[i], "--routes", strings.Join(routes, ","))
		urls = append(urls, r.URL)
	}
	clusterScenarios(t, urls)
}

func TestClusterCoreOperatorAccounts(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	b := w.account("B", nil)
	nodes := startCluster(t, 3, clusterOpts{args: func(_ int, dir string) []string { return w.nodeArgs(dir) }})
	waitMesh(t, nodes)
	aCreds, _ := a.user("a", nil)
	bCreds, _ := b.user("b", nil)
	sysCreds, _ := w.sys.user("sys", nil)

	a1, a2 := connectCreds(t, nodes[0].URL, aCreds), connectCreds(t, nodes[1].URL, aCreds)
	b2 := connectCreds(t, nodes[1].URL, bCreds)
	aSub := subscribeSync(t, a2, "shared.>")
	bSub := subscribeSync(t, b2, "shared.>")
	flush(t, a2)
	flush(t, b2)
	waitInterest(t, a1, aSub, "shared.probe")
	publish(t, a1, "shared.x", []byte("for A"))
	flush(t, a1)
	if m := nextMsg(t, aSub); string(m.Data) != "for A" {
		t.Fatalf("A got %q", m.Data)
	}
	if m, err := bSub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("account B received account A's message %q", m.Data)
	}
	// B's own traffic crosses too.
	b1 := connectCreds(t, nodes[0].URL, bCreds)
	waitInterest(t, b1, bSub, "shared.probe")
	if m, err := aSub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("account A received account B's message %q", m.Data)
	}
	// Requests across nodes in an account.
	if _, err := a2.Subscribe("svc", func(m *nats.Msg) { m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	flush(t, a2)
	waitFor(t, 5*time.Second, "A's responder across the route", func() bool {
		_, err := a1.Request("svc", nil, 200*time.Millisecond)
		return err == nil
	})
	if _, err := b1.Request("svc", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("B's request reached A's responder: %v", err)
	}

	// The system account's services answer from every node.
	var list []byte
	waitFor(t, 10*time.Second, "nats server list showing 3 servers", func() bool {
		var err error
		list, err = exec.Command(natsCLI(t), "--creds", sysCreds, "-s", nodes[0].URL, "server", "list", "3", "--timeout", "2s").CombinedOutput()
		if err != nil {
			t.Logf("nats server list: %v\n%s", err, list)
			return false
		}
		for _, n := range nodes {
			if !strings.Contains(string(list), n.ID) {
				return false
			}
		}
		return true
	})
	t.Logf("nats server list:\n%s", list)
}

// A route whose peer stops reading: the flooding account's messages to
// it are dropped once its share of the bound (max_pending) is full, the
// route is cut once it cannot write for the write deadline, and it is
// redialed when the peer is back; meanwhile the publisher keeps being
// served.
func TestClusterCoreSlowRoute(t *testing.T) {
	nodes := startCluster(t, 2, clusterOpts{args: func(_ int, dir string) []string {
		return []string{"--config", writeFile(t, dir, "node.conf", "max_pending: 1MB\nwrite_deadline: 2s\n")}
	}})
	waitMesh(t, nodes)
	pub, subc := connect(t, nodes[0].URL), connect(t, nodes[1].URL)
	sub := subscribeSync(t, subc, "flood")
	flush(t, subc)
	waitInterest(t, pub, sub, "flood")
	nodes[1].signal(syscall.SIGSTOP)
	defer nodes[1].signal(syscall.SIGCONT)
	payload := make([]byte, 8<<10)
	// The flooding account's share of the queue fills first: its
	// messages to the peer are dropped, and the route, which other
	// accounts share, stays up until it cannot write for the write
	// deadline.
	waitFor(t, 20*time.Second, "the route cut after its writes stalled", func() bool {
		for i := 0; i < 256; i++ {
			publish(t, pub, "flood", payload)
		}
		flush(t, pub)
		out := nodes[0].out.String()
		return strings.Contains(out, "over its share") && strings.Contains(out, "route closed")
	})
	roundTrip(t, pub)
	nodes[1].signal(syscall.SIGCONT)
	waitMesh(t, nodes)
}

// A nats-server style config file: routes as bare URLs (this node's own
// among them), names learnt from each peer's INFO. Without peer names
// there is no JetStream cluster (raft needs the members' names up front),
// so this core-only cluster turns JetStream off. The cluster block's
// authorization, with the same pair in the route URLs as nats-server's
// configs carry it, is the cluster secret.
func TestClusterCoreConfigFile(t *testing.T) {
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var routes []string
	for _, a := range addrs {
		routes = append(routes, `"nats-route://route:pw-123@`+a+`"`)
	}
	var urls []string
	var nodes []*node
	for i, a := range addrs {
		conf := fmt.Sprintf("server_name: c%d\njetstream: disabled\ncluster {\n  name: filecluster\n  listen: %q\n"+
			"  authorization { user: route, password: pw-123 }\n  routes: [%s]\n}\n",
			i+1, a, strings.Join(routes, ", "))
		n := startNode(t, nodeOpts{config: conf})
		nodes = append(nodes, n)
		urls = append(urls, n.URL)
	}
	waitFor(t, startTimeout, "full mesh from the config file", func() bool {
		for _, n := range nodes {
			var m map[string]any
			if err := fetchJSON(n.MonURL+"/routez", &m); err != nil || m["num_routes"] != float64(2) {
				return false
			}
		}
		return true
	})
	nc0, nc2 := connect(t, urls[0]), connect(t, urls[2])
	sub := subscribeSync(t, nc2, "file.>")
	flush(t, nc2)
	waitInterest(t, nc0, sub, "file.x")
	if c, _ := varz(t, nodes[1].MonURL)["cluster"].(map[string]any); c["name"] != "filecluster" {
		t.Errorf("varz cluster %v", c)
	}
	for _, n := range nodes {
		if out := n.proc.out.String(); strings.Contains(out, "pw-123") || strings.Contains(out, "admits any peer") {
			t.Errorf("a node logged its secret or called its port open:\n%s", out)
		}
	}
}

// Imports across nodes: a stream import delivers an exporter's message
// published on another node once, and a service import's request and its
// response cross the routes both ways.
func TestClusterCoreImports(t *testing.T) {
	w := newOpWorld(t)
	exp := w.account("EXP", func(ac *jwt.AccountClaims) {
		ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "events.>"}, &jwt.Export{Type: jwt.Service, Subject: "help.>"})
	})
	imp := w.account("IMP", nil)
	imp.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "events.>", LocalSubject: "ext.>"},
		&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "help.>"})
	w.publish(imp)
	nodes := startCluster(t, 3, clusterOpts{args: func(_ int, dir string) []string { return w.nodeArgs(dir) }})
	waitMesh(t, nodes)
	expCreds, _ := exp.user("e", nil)
	impCreds, _ := imp.user("i", nil)

	// The exporter's responder on n1, the importer's requester on n2.
	e1 := connectCreds(t, nodes[0].URL, expCreds)
	if _, err := e1.Subscribe("help.>", func(m *nats.Msg) { m.Respond(append([]byte("help:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	flush(t, e1)
	i2 := connectCreds(t, nodes[1].URL, impCreds)
	var reply *nats.Msg
	waitFor(t, 5*time.Second, "the service import across the route", func() bool {
		var err error
		reply, err = i2.Request("help.me", []byte("q"), 200*time.Millisecond)
		return err == nil
	})
	if string(reply.Data) != "help:q" {
		t.Fatalf("service reply %q", reply.Data)
	}

	// The importer's subscriber on n3, the exporter's publisher on n2.
	i3 := connectCreds(t, nodes[2].URL, impCreds)
	sub := subscribeSync(t, i3, "ext.>")
	flush(t, i3)
	e2 := connectCreds(t, nodes[1].URL, expCreds)
	waitInterest(t, e2, sub, "events.probe")
	publish(t, e2, "events.one", []byte("1"))
	flush(t, e2)
	if m := nextMsg(t, sub); m.Subject != "ext.one" || string(m.Data) != "1" {
		t.Fatalf("stream import delivered %s %q", m.Subject, m.Data)
	}
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("stream import delivered twice: %s %q", m.Subject, m.Data)
	}
}

// A flood over a route to a subscriber that stopped reading does not hold
// up other traffic on the same route: the receiving node cuts the stuck
// subscriber, never the route, and requests keep being answered.
func TestClusterCoreFloodDoesNotStopOthers(t *testing.T) {
	nodes := startCluster(t, 2, clusterOpts{args: func(_ int, dir string) []string {
		return []string{"--config", writeFile(t, dir, "node.conf", "max_pending: 2MB\n")}
	}})
	waitMesh(t, nodes)
	stuck := connectRaw(t, nodes[1].NatsAddr, `{"verbose":false}`)
	stuck.send("SUB flood 1\r\nPING\r\n")
	stuck.expect("PONG") // and never reads again
	responder := connect(t, nodes[1].URL)
	if _, err := responder.Subscribe("ping", func(m *nats.Msg) { m.Respond([]byte("pong")) }); err != nil {
		t.Fatal(err)
	}
	flush(t, responder)
	flooder, requester := connect(t, nodes[0].URL), connect(t, nodes[0].URL)
	waitFor(t, 5*time.Second, "the responder across the route", func() bool {
		_, err := requester.Request("ping", nil, 200*time.Millisecond)
		return err == nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		payload := make([]byte, 16<<10)
		for i := 0; i < 2000; i++ { // 32 MiB, far past the stuck client's bound
			if flooder.Publish("flood", payload) != nil {
				return
			}
		}
		flooder.Flush()
	}()
	for i := 0; i < 20; i++ {
		if _, err := requester.Request("ping", nil, 2*time.Second); err != nil {
			t.Fatalf("request %d during the flood: %v", i, err)
		}
	}
	<-done
	if rz := nodes[0].routez(t); rz["num_routes"] != float64(1) {
		t.Errorf("the route went down during the flood: %v", rz["num_routes"])
	}
}

func TestClusterCoreFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-id", "n9", "--cluster-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:1,n2=127.0.0.1:2"}, `this node "n9" is not among them`},
		{[]string{"--peers", "n1=127.0.0.1:1"}, "need --cluster-addr"},
		{[]string{"--node-id", "n1", "--cluster-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:1,n1=127.0.0.1:2"}, `"n1" appears twice`},
		{[]string{"--node-id", "n1", "--cluster-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:1,n2=127.0.0.1:1"}, `"127.0.0.1:1" appears twice`},
		{[]string{"--node-id", "n1", "--cluster-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1"}, "not host:port"},
		{[]string{"--cluster-addr", "127.0.0.1:0", "--peers", "n1=127.0.0.1:1"}, "needs a name"},
	} {
		args := append([]string{"dataplane", "--data-dir", t.TempDir()}, tc.args...)
		code, _, stderr := runContrail(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestClusterSecret: the cluster port admits only nodes holding the
// cluster's secret. A node started with another secret forms no route
// and joins no raft group (its peers refuse it and it refuses them);
// restarted with the right one it joins. The nodes warn when they run
// without a secret (every other cluster test runs with one).
func TestClusterSecret(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, clusterOpts{late: 1, secret: func(i int) string {
		if i == 2 {
			return "not-the-secret"
		}
		return clusterTestSecret
	}})
	n1, n3 := nodes[0], nodes[2]
	n3.launch(t)
	waitFor(t, clusterTimeout(), "n1 to refuse n3", func() bool {
		return strings.Contains(n1.proc.out.String(), "refused a connection that does not hold the cluster secret")
	})
	waitFor(t, clusterTimeout(), "n3 to refuse its peers", func() bool {
		return strings.Contains(n3.proc.out.String(), "route refused: the peer does not hold this node's cluster secret")
	})
	if rz := n1.routez(t); rz["num_routes"] != float64(1) {
		t.Fatalf("n1 has %v routes with n3 holding another secret, want 1 (n2)", rz["num_routes"])
	}
	if rz := n3.routez(t); rz["num_routes"] != float64(0) {
		t.Fatalf("n3 has %v routes with another secret, want 0", rz["num_routes"])
	}
	if strings.Contains(n1.proc.out.String(), "admits any peer") {
		t.Error("a node with a secret warned that its port is open")
	}
	n3.terminate(t)
	n3.secret = clusterTestSecret
	n3.start(t)
	waitMesh(t, nodes)
}

// TestClusterTLS runs a cluster whose port speaks mutual TLS, configured
// as nats-server's cluster { tls { … } } block: each node presents its own
// certificate of the cluster's CA. The cluster forms and replicates; a
// plain TCP connection to the port is refused at the handshake, before
// any preface is read.
func TestClusterTLS(t *testing.T) {
	t.Parallel()
	caCert, caKey := makeCA(t, "cluster CA")
	pki := t.TempDir()
	caFile := writePEM(t, pki, "ca.pem", "CERTIFICATE", caCert.Raw)
	nodes := startCluster(t, 3, clusterOpts{args: func(i int, dir string) []string {
		der, key := makeLeaf(t, caCert, caKey, "127.0.0.1", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		cert := writePEM(t, dir, "node.pem", "CERTIFICATE", der)
		keyFile := writeKey(t, dir, "node-key.pem", key)
		conf := fmt.Sprintf("cluster {\n  tls {\n    cert_file: %q\n    key_file: %q\n    ca_file: %q\n    timeout: 2\n  }\n}\n",
			cert, keyFile, caFile)
		return []string{"--config", writeFile(t, dir, "node.conf", conf)}
	}})
	waitMesh(t, nodes)
	for _, cn := range nodes {
		if !strings.Contains(cn.proc.out.String(), "cluster port speaks mutual TLS") {
			t.Fatalf("%s did not say its cluster port speaks TLS", cn.ID)
		}
	}
	nc, js := clusterJS(t, nodes[0].URL)
	createR3(t, js, jetstream.StreamConfig{Name: "TLS", Subjects: []string{"tls.>"}, Replicas: 3})
	for i := range 10 {
		jsPublish(t, js, "tls.x", fmt.Sprint(i))
	}
	_, js2 := clusterJS(t, nodes[2].URL)
	if info := streamInfo(t, js2, "TLS"); info.State.Msgs != 10 || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream seen from n3: %+v %+v", info.State, info.Cluster)
	}
	nc.Close()

	c, err := net.Dial("tcp", nodes[1].ClusterAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("R\x00\x00 a route in the clear"))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the cluster port answered a plain TCP connection")
	}
	waitFor(t, clusterTimeout(), "n2 to log the refused handshake", func() bool {
		return strings.Contains(nodes[1].proc.out.String(), "failed the TLS handshake")
	})
}
