package jetstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/hashicorp/raft"
)

// TestClusterFileStoreLimitIsNodeWide: max_file_store bounds what a
// node's store holds, whichever partition (or R1 stream) holds it. Two R3
// streams on different partitions: once the first holds most of the
// limit, the second takes only the rest, and so does an R1 stream; each
// publish past it is refused as insufficient resources. And every node
// reports both replicated streams in its snapshot (/jsz), leader or not.
func TestClusterFileStoreLimitIsNodeWide(t *testing.T) {
	const limit = 64 << 10
	acc := newFakeAccount("A")
	nodes := startTestClusterOn(t, memFSs(3), 2, acc, func(o *Options, _ *raft.Config) {
		if o != nil {
			o.MaxFileStore = limit
		}
	})
	waitClusterReady(t, nodes)
	payload := strings.Repeat("x", 1000)
	create := func(name string, replicas int) *assignment {
		t.Helper()
		var resp api.StreamCreateResponse
		acc.apiCall(t, "$JS.API.STREAM.CREATE."+name, api.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name)}, Replicas: replicas}, &resp)
		if resp.Error != nil {
			t.Fatalf("create %s: %v", name, resp.Error)
		}
		return waitAssigned(t, nodes, "A", name)
	}
	// publish sends n messages to subj; it returns how many were stored
	// and fails on any refusal but insufficient resources.
	publish := func(subj string, n int) int {
		t.Helper()
		stored := 0
		for i := range n {
			b, ok := acc.tryRequest(subj, nil, []byte(payload), replicateTimeout)
			if !ok {
				t.Fatalf("publish %d to %s: no answer", i, subj)
			}
			var ack api.PubAckResponse
			if err := json.Unmarshal(b, &ack); err != nil {
				t.Fatal(err)
			}
			if ack.Error != nil {
				if ack.Error.ErrCode != api.NewInsufficientResourcesError().ErrCode {
					t.Fatalf("publish %d to %s: %v", i, subj, ack.Error)
				}
				continue
			}
			stored++
		}
		return stored
	}
	one, two := create("ONE", 3), create("TWO", 3)
	if one.group() == two.group() {
		t.Fatalf("both streams on partition %d", one.group())
	}
	if got := publish("one", 40); got != 40 {
		t.Fatalf("ONE stored %d of 40 messages, under the limit", got)
	}
	// caughtUp waits until every node holds what the leader of a's
	// partition holds of it.
	caughtUp := func(a *assignment) {
		t.Helper()
		want := streamDigest(t, leaderOf(nodes, a.group()).st, a.ID)
		for _, nd := range nodes {
			waitForCond(t, nd.name+" caught up with "+a.Name, func() bool { return bytes.Equal(streamDigest(t, nd.st, a.ID), want) })
		}
	}
	// Every node holds ONE's 40 messages and counts them, leader or not.
	caughtUp(one)
	caughtUp(two)
	for _, nd := range nodes {
		nd.e.cl.countReplicas()
		snap := nd.e.Snapshot()
		if snap.Streams != 2 || snap.Messages != 40 || snap.Store < 40_000 {
			t.Fatalf("%s reports %d streams, %d messages, %d bytes stored; want 2, 40, >= 40000", nd.name, snap.Streams, snap.Messages, snap.Store)
		}
	}
	// TWO gets what is left of the limit, not a limit of its own.
	got := publish("two", 40)
	if got == 0 || got >= 40 {
		t.Fatalf("TWO stored %d of 40 messages beside ONE's 40 under a %d byte limit", got, limit)
	}
	caughtUp(two)
	for _, nd := range nodes {
		nd.e.cl.countReplicas()
		if used := nd.e.fileStoreUsed(); used > limit+2_000 {
			t.Fatalf("%s holds %d bytes, past its %d byte limit by more than a message", nd.name, used, limit)
		}
	}
	// So does an R1 stream, wherever it is placed.
	create("SOLO", 1)
	if got := publish("solo", 5); got != 0 {
		t.Fatalf("R1 stream SOLO stored %d messages on a full node", got)
	}
}

// memFSs is n fresh in-memory filesystems, one per node.
func memFSs(n int) []vfs.FS {
	fss := make([]vfs.FS, n)
	for i := range fss {
		fss[i] = vfs.NewMem()
	}
	return fss
}
