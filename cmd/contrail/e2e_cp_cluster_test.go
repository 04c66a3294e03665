package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// r3Tier is a tier body for the REST API.
func r3Tier(storage, streams int64) map[string]any {
	return map[string]any{"max_memory": 0, "max_storage": storage, "max_streams": streams,
		"max_consumers": -1, "max_ack_pending": -1, "max_stream_bytes": -1}
}

// TestCPClusterCell runs the control plane against a cell of three
// Contrail nodes, listed by all their URLs: an account given R3 limits
// through the API gets an R3 stream through one node, is held to its R3
// tier, its usage is read from the whole cluster (each stream once), and
// a limit change pushed to the cell reaches every node.
func TestCPClusterCell(t *testing.T) {
	dir := t.TempDir()
	cpDir := filepath.Join(dir, "cp")
	// The nodes trust the control plane's operator, so it starts first;
	// it is started again, on the same address, once the nodes' URLs are
	// known. Its resolver stays up while the nodes start: a node leaves a
	// failing resolver alone for a while.
	first := startControlplane(t, "", cpDir, "nats://127.0.0.1:1")
	sys := strings.TrimSpace(string(mustRead(t, filepath.Join(cpDir, "system_account.pub"))))
	nodes := startCluster(t, 3, clusterOpts{args: func(_ int, _ string) []string {
		return []string{"--operator", filepath.Join(cpDir, "operator.jwt"),
			"--resolver", first.URL + "/jwt/v1/accounts/", "--system-account", sys}
	}})
	waitMesh(t, nodes)
	first.stop()
	cp := startControlplane(t, first.HTTPAddr, cpDir, clusterURLs(nodes))
	api := newAPI(t, cp.URL)
	waitReadyz(t, api, 200)

	a, _ := api.signup("owner@example.com", "Owner")
	acc := a.createAccount("replicated", map[string]any{"jetstream": map[string]any{
		"max_memory": 0, "max_storage": 0, "max_streams": -1, "max_consumers": -1, "max_ack_pending": -1,
		"tiers": map[string]any{"R1": r3Tier(64<<20, -1), "R3": r3Tier(8<<20, 2)},
	}})
	if acc.NatsURL != clusterURLs(nodes) {
		t.Fatalf("account nats_url %q, want the cell's URLs %q", acc.NatsURL, clusterURLs(nodes))
	}
	_, creds := a.createUser(acc.ID, "app", dir)

	nc := connectCreds(t, nodes[1].URL, creds)
	js, _ := jetstream.New(nc)
	jsReady(t, js)
	for _, name := range []string{"ONE", "TWO"} {
		if err := createOnce(js, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Replicas: 3}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if err := createOnce(js, jetstream.StreamConfig{Name: "THREE", Subjects: []string{"three.>"}, Replicas: 3}); apiCode(err) != 10027 {
		t.Fatalf("third R3 stream with an R3 tier of 2: %v, want 10027", err)
	}
	for i := range 5 {
		publishAcked(t, js, "one.x", "m"+string(rune('0'+i)))
	}

	var u cpUsage
	waitFor(t, 10*time.Second, "usage from the whole cell", func() bool {
		a.do("GET", "/v1/accounts/"+acc.ID+"/usage", nil, 200, &u)
		return u.Streams == 2 && u.Messages == 5 && u.Connections == 1
	})
	if u.StorageBytes == 0 {
		t.Fatalf("usage %+v: no storage", u)
	}
	var streams struct {
		Items []struct {
			Name     string `json:"name"`
			Messages uint64 `json:"messages"`
		} `json:"items"`
	}
	a.do("GET", "/v1/accounts/"+acc.ID+"/streams", nil, 200, &streams)
	if len(streams.Items) != 2 || streams.Items[0].Name != "ONE" || streams.Items[0].Messages != 5 {
		t.Fatalf("streams %+v", streams.Items)
	}

	// JetStream off for the account: the push reaches every node.
	a.do("PATCH", "/v1/accounts/"+acc.ID, map[string]any{"limits": map[string]any{"jetstream": map[string]any{
		"tiers": map[string]any{"R1": r3Tier(0, -1), "R3": r3Tier(0, 2)}}}}, 200, nil)
	for _, n := range nodes {
		cn := connectCreds(t, n.URL, creds)
		jn, _ := jetstream.New(cn)
		waitFor(t, 10*time.Second, "JetStream off for the account through "+n.ID, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := jn.AccountInfo(ctx)
			return apiCode(err) == 10039
		})
	}
}
