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
		for try := 0; ; try++ {
			var resp api.StreamCreateResponse
			acc.apiCall(t, "$JS.API.STREAM.CREATE."+name, api.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3}, &resp)
			if resp.Error == nil {
				break
			}
			if resp.Error.ErrCode != api.CodeClusterNotAvailable || try == 10 {
				t.Fatalf("create %s: %v", name, resp.Error)
			}
		}
		return waitAssigned(t, nodes, "A", name).ID
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
