package jetstream

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// TestStreamIDsNeverReused: a stream created after the one with the
// highest id of its partition was deleted gets a new id, before and after
// the whole cluster restarts: a replica that has not applied the delete
// yet must never hold the old records under the new stream's id.
func TestStreamIDsNeverReused(t *testing.T) {
	acc := newFakeAccount("A")
	fss := make([]vfs.FS, 3)
	for i := range fss {
		fss[i] = vfs.NewMem()
	}
	nodes := startTestClusterOn(t, fss, 1, acc, nil)
	waitClusterReady(t, nodes)
	create := func(name string) uint64 {
		t.Helper()
		return createR3(t, acc, nodes, name, name+".>").ID
	}
	first := create("S1")
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.S1", nil, &del)
	if del.Error != nil || !del.Success {
		t.Fatalf("delete: %+v", del)
	}
	waitForCond(t, "S1 gone from every catalog", func() bool {
		for _, nd := range nodes {
			if nd.e.cl.catalog.lookup("A", "S1") != nil {
				return false
			}
		}
		return true
	})
	second := create("S2")
	if second <= first {
		t.Fatalf("S2 got id %d after S1's %d was deleted", second, first)
	}
	acc.apiCall(t, "$JS.API.STREAM.DELETE.S2", nil, &del)
	if del.Error != nil || !del.Success {
		t.Fatalf("delete: %+v", del)
	}
	waitForCond(t, "S2 gone from every catalog", func() bool {
		for _, nd := range nodes {
			if nd.e.cl.catalog.lookup("A", "S2") != nil {
				return false
			}
		}
		return true
	})
	for _, nd := range nodes {
		nd.stop()
	}
	acc = newFakeAccount("A")
	nodes = startTestClusterOn(t, fss, 1, acc, nil)
	waitClusterReady(t, nodes)
	if third := create("S3"); third <= second {
		t.Fatalf("after a restart S3 got id %d, S2 had %d", third, second)
	}
}

// TestCatalogIndexKeptUpToDate: the catalog's per-account subject index
// follows puts, updates and removes, so a create's overlap check and a
// filtered listing see exactly the catalog, without rebuilding anything.
func TestCatalogIndexKeptUpToDate(t *testing.T) {
	m := newMetaCatalog()
	put := func(account, name string, id uint64, subjects ...string) {
		m.put(&assignment{Account: account, Name: name, ID: id, Config: &api.StreamConfig{Name: name, Subjects: subjects}})
	}
	put("A", "S1", 1, "orders.>")
	put("A", "S2", 2, "billing.*")
	put("B", "S1", 3, "orders.>")
	for _, tc := range []struct {
		account, except string
		subjects        []string
		want            bool
	}{
		{"A", "", []string{"orders.new"}, true},
		{"A", "S1", []string{"orders.new"}, false}, // its own subjects, on an update
		{"A", "", []string{"billing.x.y"}, false},
		{"A", "", []string{">"}, true},
		{"C", "", []string{">"}, false},
	} {
		if got := m.overlaps(tc.account, tc.except, tc.subjects); got != tc.want {
			t.Errorf("overlaps(%s, except %q, %v) = %v", tc.account, tc.except, tc.subjects, got)
		}
	}
	put("A", "S1", 1, "shipping.>") // an update files the new subjects
	if m.overlaps("A", "", []string{"orders.x"}) || !m.overlaps("A", "", []string{"shipping.x"}) {
		t.Fatal("an update left the old subjects filed")
	}
	if got := m.matching("A", "shipping.>"); len(got) != 1 || got[0].Name != "S1" {
		t.Fatalf("matching: %v", got)
	}
	m.remove("A", "S1")
	m.remove("A", "S2")
	if m.overlaps("A", "", []string{">"}) || len(m.matching("A", ">")) != 0 {
		t.Fatal("removed streams still filed")
	}
	if !m.overlaps("B", "", []string{"orders.x"}) {
		t.Fatal("another account's stream lost")
	}
}
