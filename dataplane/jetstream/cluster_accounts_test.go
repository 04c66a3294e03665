package jetstream

import (
	"testing"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// TestClusterCreateWaitsForAccount: the node leading the partition a new
// R3 stream is placed in does not have the account. It asks for it
// (LoadAccount), and the create, applied meanwhile, runs and is answered
// once the account registers there.
func TestClusterCreateWaitsForAccount(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 1, acc)
	var meta, lead *testNode
	waitForCond(t, "meta and partition leaders", func() bool {
		meta, lead = nil, leaderOf(nodes, 1)
		for _, nd := range nodes {
			if nd.e.cl.metaLeader() {
				meta = nd
			}
		}
		return meta != nil && lead != nil
	})
	if meta == lead {
		to := without(nodes, meta)[0]
		if err := meta.group(1).TransferLeadership(to.name); err != nil {
			t.Fatal(err)
		}
		waitForCond(t, "partition led by "+to.name, func() bool { return leaderOf(nodes, 1) == to })
		lead = to
	}
	asked := make(chan string, 4)
	lead.e.opts.LoadAccount = func(name string) {
		asked <- name
		if err := lead.e.RegisterAccount(acc, nil); err != nil {
			t.Errorf("register: %v", err)
		}
	}
	lead.e.RemoveAccount("A")

	got := make(chan api.StreamCreateResponse, 1)
	go func() {
		var resp api.StreamCreateResponse
		acc.apiCall(t, "$JS.API.STREAM.CREATE.LATE", api.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}, Replicas: 3}, &resp)
		got <- resp
	}()
	select {
	case name := <-asked:
		if name != "A" {
			t.Fatalf("asked for account %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the partition leader never asked for the account")
	}
	select {
	case resp := <-got:
		if resp.Error != nil || resp.Cluster == nil || resp.Cluster.Leader != lead.name {
			t.Fatalf("create: %+v %v", resp.Cluster, resp.Error)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the create was never answered")
	}
	if a := lead.e.account("A"); a == nil || a.lookup("LATE") == nil {
		t.Fatal("stream not held by the partition leader")
	}
}
