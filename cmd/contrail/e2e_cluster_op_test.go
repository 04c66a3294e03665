package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// tiered gives an account JWT tiered JetStream limits (R1 and R3) in
// place of untiered ones.
func tiered(r1, r3 jwt.JetStreamLimits) func(*jwt.AccountClaims) {
	return func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{}
		ac.Limits.JetStreamTieredLimits = jwt.JetStreamTieredLimits{"R1": r1, "R3": r3}
	}
}

// opCluster starts three nodes trusting w's operator.
func opCluster(t *testing.T, w *opWorld) []*clusterNode {
	t.Helper()
	nodes := startCluster(t, 3, clusterOpts{args: func(_ int, dir string) []string { return w.nodeArgs(dir) }})
	waitMesh(t, nodes)
	return nodes
}

// jsReady waits until the cluster answers the account's JetStream API
// (the meta group has a leader with the account loaded).
func jsReady(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	waitFor(t, startTimeout, "jetstream answering", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
}

// createOnce creates a stream with one request, which must be answered.
func createOnce(js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, cfg)
	return err
}

// apiCode is the JetStream error code of err, 0 if none.
func apiCode(err error) int {
	var ae jetstream.JetStreamError
	if errors.As(err, &ae) && ae.APIError() != nil {
		return int(ae.APIError().ErrorCode)
	}
	return 0
}

// names lists the account's streams as the node the client is on answers.
func names(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []string
	l := js.StreamNames(ctx)
	for n := range l.Name() {
		out = append(out, n)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("stream names: %v", err)
	}
	slices.Sort(out)
	return out
}

// TestClusterOperatorAccounts runs three nodes in operator mode: an
// account whose only client is on n1 creates R3 streams (each create
// answered on its first request, wherever the meta leader and the
// stream's partition leader are), publishes and reads through n1, is
// held to its R3 tier cluster-wide, never sees another account's streams
// on any node, and finds its streams after every node restarted, with
// the nodes that lost their stored JWTs loading the account for the
// streams their catalog names.
func TestClusterOperatorAccounts(t *testing.T) {
	w := newOpWorld(t)
	r1 := jwt.JetStreamLimits{DiskStorage: 64 << 20, MemoryStorage: 16 << 20, Streams: -1, Consumer: -1}
	r3 := jwt.JetStreamLimits{DiskStorage: 1 << 20, Streams: 4, Consumer: -1}
	a := w.account("A", tiered(r1, r3))
	b := w.account("B", tiered(r1, r3))
	nodes := opCluster(t, w)
	aCreds, _ := a.user("a", nil)
	bCreds, _ := b.user("b", nil)

	began := time.Now()
	ncA := connectCreds(t, nodes[0].URL, aCreds)
	t.Logf("first connect of the account (loaded on every node before it returns): %v", time.Since(began))
	jsA, _ := jetstream.New(ncA)
	jsReady(t, jsA)
	cfgs := []jetstream.StreamConfig{
		{Name: "S1", Subjects: []string{"s1.>"}, Replicas: 3, MaxBytes: 512 << 10},
		{Name: "S2", Subjects: []string{"s2.>"}, Replicas: 3},
		{Name: "S3", Subjects: []string{"s3.>"}, Replicas: 3},
	}
	for _, cfg := range cfgs {
		if err := createOnce(jsA, cfg); err != nil {
			t.Fatalf("create %s: %v", cfg.Name, err)
		}
	}
	// The R3 tier's storage, across the cluster: S1 reserves 512 KiB of
	// the tier's 1 MiB wherever it lives.
	if err := createOnce(jsA, jetstream.StreamConfig{Name: "S4", Subjects: []string{"s4.>"}, Replicas: 3, MaxBytes: 600 << 10}); apiCode(err) != 10047 {
		t.Fatalf("R3 create past the tier's storage: %v, want 10047", err)
	}
	if err := createOnce(jsA, jetstream.StreamConfig{Name: "S4", Subjects: []string{"s4.>"}, Replicas: 3, MaxBytes: 256 << 10}); err != nil {
		t.Fatalf("create S4: %v", err)
	}
	// The tier's stream count, across the cluster; R1 is a tier apart.
	if err := createOnce(jsA, jetstream.StreamConfig{Name: "S5", Subjects: []string{"s5.>"}, Replicas: 3}); apiCode(err) != 10027 {
		t.Fatalf("fifth R3 stream: %v, want 10027", err)
	}
	if err := createOnce(jsA, jetstream.StreamConfig{Name: "L1", Subjects: []string{"l1.>"}, Replicas: 1}); err != nil {
		t.Fatalf("R1 stream beside four R3 ones: %v", err)
	}

	// A stream led elsewhere than n1, used through n1.
	var far string
	leaders := map[string]string{}
	for _, name := range []string{"S1", "S2", "S3", "S4"} {
		leader, _ := streamLeader(t, jsA, nodes, name)
		leaders[name] = leader.ID
		if leader.ID != nodes[0].ID && far == "" {
			far = name
		}
	}
	t.Logf("leaders %v", leaders)
	if far == "" {
		// Early on n1 may lead every partition these streams went to
		// (the balancer has not run yet): hand one of them to another
		// node, as an operator would.
		far = "S1"
		to := nodes[1].ID
		r := clusterAPI(t, ncA, "$JS.API.STREAM.LEADER.STEPDOWN."+far, `{"placement":{"preferred":"`+to+`"}}`)
		if !r.Success {
			t.Fatalf("stepdown of %s to %s: %+v", far, to, r.Error)
		}
		waitFor(t, clusterTimeout(), far+" led by "+to, func() bool {
			l, _ := streamLeader(t, jsA, nodes, far)
			return l.ID == to
		})
	}
	subj := strings.ToLower(far) + ".x"
	for i := range 10 {
		publishAcked(t, jsA, subj, fmt.Sprintf("m%d", i))
	}
	readAll := func(js jetstream.JetStream) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cons, err := js.OrderedConsumer(ctx, far, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatalf("ordered consumer on %s: %v", far, err)
		}
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
		}
		return got
	}
	if got := readAll(jsA); len(got) != 10 || got[0] != "m0" || got[9] != "m9" {
		t.Fatalf("read back %v", got)
	}

	// Account B, through n2: its own streams, none of A's, on every node.
	ncB := connectCreds(t, nodes[1].URL, bCreds)
	jsB, _ := jetstream.New(ncB)
	jsReady(t, jsB)
	if err := createOnce(jsB, jetstream.StreamConfig{Name: "B1", Subjects: []string{"s1.>"}, Replicas: 3}); err != nil {
		t.Fatalf("B's stream on A's subjects and name space: %v", err)
	}
	wantA := []string{"L1", "S1", "S2", "S3", "S4"}
	for _, n := range nodes {
		ca := connectCreds(t, n.URL, aCreds)
		ja, _ := jetstream.New(ca)
		if got := names(t, ja); !slices.Equal(got, wantA) {
			t.Errorf("A's streams through %s: %v, want %v", n.ID, got, wantA)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := ja.Stream(ctx, "B1"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("A's info of B's stream through %s: %v", n.ID, err)
		}
		cancel()
		cb := connectCreds(t, n.URL, bCreds)
		jb, _ := jetstream.New(cb)
		if got := names(t, jb); !slices.Equal(got, []string{"B1"}) {
			t.Errorf("B's streams through %s: %v", n.ID, got)
		}
	}

	// A claim update pushed to n3 reaches every node, each of which
	// installs it and answers; the meta leader, wherever it is, then
	// lets a fifth R3 stream in.
	sysCreds, _ := w.sys.user("sys", nil)
	sysConn := connectCreds(t, nodes[2].URL, sysCreds)
	a.claims.Limits.JetStreamTieredLimits["R3"] = jwt.JetStreamLimits{DiskStorage: 1 << 20, Streams: 5, Consumer: -1}
	inbox := nats.NewInbox()
	answers, err := sysConn.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := sysConn.PublishRequest("$SYS.REQ.ACCOUNT."+a.pub+".CLAIMS.UPDATE", inbox, []byte(w.publish(a))); err != nil {
		t.Fatal(err)
	}
	servers := map[string]bool{}
	for range nodes {
		m, err := answers.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("claim update answers from %v: %v", servers, err)
		}
		var r struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
			Data struct {
				Code int `json:"code"`
			} `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Data.Code != 200 {
			t.Fatalf("claim update answer %s", m.Data)
		}
		servers[r.Server.Name] = true
	}
	if len(servers) != len(nodes) {
		t.Fatalf("claim update answered by %v", servers)
	}
	if err := createOnce(jsA, jetstream.StreamConfig{Name: "S5", Subjects: []string{"s5.>"}, Replicas: 3}); err != nil {
		t.Fatalf("fifth R3 stream after the limit was raised through n3: %v", err)
	}
	wantA = append(wantA, "S5")
	sysConn.Close()

	// Every node restarts; n2 and n3 lose the JWTs they stored, so only
	// their catalog tells them the account exists.
	ncA.Close()
	ncB.Close()
	for _, n := range nodes {
		n.stop()
	}
	for _, n := range nodes[1:] {
		if err := os.RemoveAll(filepath.Join(n.DataDir, "accounts")); err != nil {
			t.Fatal(err)
		}
	}
	restartAll(t, nodes)
	waitMesh(t, nodes)
	for _, n := range nodes[1:] {
		waitFor(t, startTimeout, n.ID+" loading A and B for its catalog", func() bool {
			var m map[string]any
			if err := fetchJSON(n.MonURL+"/accountz", &m); err != nil {
				return false
			}
			list := strings.Join(anyStrings(m["accounts"]), ",")
			return strings.Contains(list, a.pub) && strings.Contains(list, b.pub)
		})
	}
	ncA = connectCreds(t, nodes[0].URL, aCreds)
	jsA, _ = jetstream.New(ncA)
	jsReady(t, jsA)
	if got := names(t, jsA); !slices.Equal(got, wantA) {
		t.Fatalf("A's streams after the restart: %v", got)
	}
	if got := readAll(jsA); len(got) != 10 {
		t.Fatalf("read back after the restart: %v", got)
	}
}

// startRefOpCluster starts three nats-servers as one JetStream cluster in
// operator mode with w's accounts (as they are now) preloaded, and
// returns their client URLs once each accepts a client with creds. Their
// health waits for the cluster, so they are started together and awaited
// through a client.
func startRefOpCluster(t *testing.T, w *opWorld, creds string) []string {
	t.Helper()
	bin := findTool(t, "nats-server", "github.com/nats-io/nats-server/v2", "v2.15.2")
	var addrs, croutes, urls []string
	for range 3 {
		addrs = append(addrs, freeAddr(t))
		croutes = append(croutes, "nats-route://"+freeAddr(t))
	}
	for i := range 3 {
		dir := t.TempDir()
		conf := fmt.Sprintf("%sserver_name: r%d\nlisten: %s\njetstream { store_dir: %q }\n"+
			"cluster { name: ref, listen: %s, routes: [%s] }\n",
			w.memResolverConf(), i+1, addrs[i], filepath.Join(dir, "js"),
			strings.TrimPrefix(croutes[i], "nats-route://"), strings.Join(croutes, ", "))
		p, err := startProc(t, fmt.Sprintf("r%d", i+1), bin, "-c", writeFile(t, dir, "ref.conf", conf))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		urls = append(urls, "nats://"+addrs[i])
	}
	waitFor(t, startTimeout, "reference cluster accepting clients", func() bool {
		for _, u := range urls {
			nc, err := nats.Connect(u, nats.UserCredentials(creds))
			if err != nil {
				return false
			}
			nc.Close()
		}
		return true
	})
	return urls
}

// tierScenario creates streams against an account's tiered R3 limits
// (1 MiB of file storage, 4 streams) and an untiered account's (1 MiB),
// and reports each create's outcome: the error code, or 0.
func tierScenario(t *testing.T, tieredJS, flatJS jetstream.JetStream) []int {
	t.Helper()
	var out []int
	for _, c := range []struct {
		js  jetstream.JetStream
		cfg jetstream.StreamConfig
	}{
		{tieredJS, jetstream.StreamConfig{Name: "T1", Subjects: []string{"t1"}, Replicas: 3, MaxBytes: 512 << 10}},
		{tieredJS, jetstream.StreamConfig{Name: "T2", Subjects: []string{"t2"}, Replicas: 3, MaxBytes: 600 << 10}},
		{tieredJS, jetstream.StreamConfig{Name: "T2", Subjects: []string{"t2"}, Replicas: 3, MaxBytes: 256 << 10}},
		{tieredJS, jetstream.StreamConfig{Name: "T3", Subjects: []string{"t3"}, Replicas: 3}},
		{tieredJS, jetstream.StreamConfig{Name: "T4", Subjects: []string{"t4"}, Replicas: 3}},
		{tieredJS, jetstream.StreamConfig{Name: "T5", Subjects: []string{"t5"}, Replicas: 3}},
		{tieredJS, jetstream.StreamConfig{Name: "T6", Subjects: []string{"t6"}, Replicas: 1, MaxBytes: 900 << 10}},
		{tieredJS, jetstream.StreamConfig{Name: "T7", Subjects: []string{"t7"}, Replicas: 3, MaxConsumers: 9}},
		// Untiered limits count every replica: 3 x 400 KiB > 1 MiB.
		{flatJS, jetstream.StreamConfig{Name: "F1", Subjects: []string{"f1"}, Replicas: 3, MaxBytes: 400 << 10}},
		{flatJS, jetstream.StreamConfig{Name: "F1", Subjects: []string{"f1"}, Replicas: 3, MaxBytes: 300 << 10}},
		{flatJS, jetstream.StreamConfig{Name: "F2", Subjects: []string{"f2"}, Replicas: 1, MaxBytes: 200 << 10}},
	} {
		err := createOnce(c.js, c.cfg)
		if err != nil && apiCode(err) == 0 {
			t.Fatalf("create %s: %v", c.cfg.Name, err)
		}
		out = append(out, apiCode(err))
	}
	// Updates that grow a reservation: past the tier's storage (T1 and
	// T2 reserve 768 KiB of 1 MiB), then within it.
	for _, mb := range []int64{900 << 10, 700 << 10} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := tieredJS.UpdateStream(ctx, jetstream.StreamConfig{Name: "T1", Subjects: []string{"t1"}, Replicas: 3, MaxBytes: mb})
		cancel()
		if err != nil && apiCode(err) == 0 {
			t.Fatalf("update T1: %v", err)
		}
		out = append(out, apiCode(err))
	}
	return out
}

// TestClusterTieredLimitsReference holds the meta leader's checks of
// tiered and untiered limits to nats-server's, cluster against cluster,
// with the same JWTs.
func TestClusterTieredLimitsReference(t *testing.T) {
	w := newOpWorld(t)
	r1 := jwt.JetStreamLimits{DiskStorage: 1 << 20, Streams: -1, Consumer: -1}
	r3 := jwt.JetStreamLimits{DiskStorage: 1 << 20, Streams: 4, Consumer: 8}
	tieredAcc := w.account("T", tiered(r1, r3))
	flatAcc := w.account("F", func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{DiskStorage: 1 << 20, Streams: -1, Consumer: -1}
	})
	tCreds, _ := tieredAcc.user("t", nil)
	fCreds, _ := flatAcc.user("f", nil)
	run := func(urls []string) []int {
		tc := connectCreds(t, urls[0], tCreds)
		fc := connectCreds(t, urls[1], fCreds)
		tjs, _ := jetstream.New(tc)
		fjs, _ := jetstream.New(fc)
		jsReady(t, tjs)
		jsReady(t, fjs)
		out := tierScenario(t, tjs, fjs)
		// Account info, from the whole cluster: streams per tier, and
		// the R3 tier's storage in units of what was published: every
		// replica's copy counts (nats-server's figure gets there as its
		// servers report their usage to each other).
		payload := make([]byte, 1024)
		for range 10 {
			// Retried while no one answers: on a loaded CI machine the
			// reference cluster once had no responder for t3 right
			// after the scenario ("no response from stream"), and
			// nats.go's default is two tries 250 ms apart.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := tjs.Publish(ctx, "t3", payload,
				jetstream.WithRetryAttempts(40), jetstream.WithRetryWait(100*time.Millisecond)); err != nil {
				t.Fatalf("publish: %v", err)
			}
			cancel()
		}
		var info *jetstream.AccountInfo
		waitFor(t, 10*time.Second, "account info counting every replica's bytes", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var err error
			info, err = tjs.AccountInfo(ctx)
			return err == nil && info.Tiers["R3"].Store >= 30*1024
		})
		fi, err := fjs.AccountInfo(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return append(out, info.Tiers["R1"].Streams, info.Tiers["R3"].Streams, int(info.Tiers["R3"].Store/(10*1024)), fi.Streams)
	}
	refURLs := startRefOpCluster(t, w, tCreds)
	want := run(refURLs)
	nodes := opCluster(t, w)
	got := run([]string{nodes[0].URL, nodes[1].URL})
	t.Logf("nats-server %v, contrail %v", want, got)
	if !slices.Equal(got, want) {
		t.Fatalf("create outcomes %v, nats-server's %v", got, want)
	}
}

// TestClusterFirstConnectWaitsForEveryNode: the first connection of an
// account returns only once every node has loaded it, so the client's
// first request reaches the meta leader even when the leader is the
// slowest to load it (its resolver answers a second late). A node once
// counted its own load request's answer as a peer's and so waited for
// one peer fewer: the create below went unanswered.
func TestClusterFirstConnectWaitsForEveryNode(t *testing.T) {
	w := newOpWorld(t)
	nodes := startCluster(t, 3, clusterOpts{args: func(i int, dir string) []string { return w.nodeArgsAt(dir, i) }})
	waitMesh(t, nodes)
	sysCreds, _ := w.sys.user("sys", nil)
	lead := metaLeaderJSZ(t, connectCreds(t, nodes[0].URL, sysCreds), 3).Server.Name
	li := slices.IndexFunc(nodes, func(n *clusterNode) bool { return n.ID == lead })
	if li < 0 {
		t.Fatalf("meta leader %q is none of the nodes", lead)
	}
	w.slow[li].Store(int64(time.Second))
	a := w.account("A", func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() })
	creds, _ := a.user("a", nil)
	nc := connectCreds(t, nodes[(li+1)%3].URL, creds)
	js, _ := jetstream.New(nc)
	if err := createOnce(js, jetstream.StreamConfig{Name: "FIRST", Subjects: []string{"first"}, Replicas: 3}); err != nil {
		t.Fatalf("the account's first request, through a node other than the meta leader: %v", err)
	}
}
