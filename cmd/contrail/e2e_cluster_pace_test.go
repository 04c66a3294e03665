package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterObjectPutThroughAnyNode: an object store's put publishes its
// chunks asynchronously, thousands in flight, far past a stream's ingest
// backlog. A client on the stream's own node is paced by its read loop;
// one on another node used to have its chunks cross the route as fast as
// it sent them, so past the backlog's bound they were refused (429) and
// the put failed. Now the stream's node pauses the account's publishers
// on the peer (PAUSE/RESUME on the route), and a put through another
// node succeeds, for an R1 bucket (on one node) and an R3 one (on its
// partition's leader), and reads back whole.
func TestClusterObjectPutThroughAnyNode(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	_, js := clusterJS(t, clusterURLs(nodes))

	const size = 24 << 20 // more than the 16 MiB a stream's backlog holds
	blob := make([]byte, size)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	for _, replicas := range []int{1, 3} {
		bucket := fmt.Sprintf("R%d", replicas)
		waitFor(t, clusterTimeout(), "bucket "+bucket+" created", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Replicas: replicas})
			return err == nil
		})
		// Through a node that is not the stream's: the put crosses a route.
		leader, _ := streamLeader(t, js, nodes, "OBJ_"+bucket)
		cn := without(nodes, leader)[0]
		nc := connect(t, cn.URL)
		njs, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*clusterTimeout())
		obs, err := njs.ObjectStore(ctx, bucket)
		if err != nil {
			t.Fatalf("bucket %s via %s: %v", bucket, cn.ID, err)
		}
		start := time.Now()
		if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "blob"}, bytes.NewReader(blob)); err != nil {
			t.Fatalf("put %d MiB into %s (on %s) through %s: %v", size>>20, bucket, leader.ID, cn.ID, err)
		}
		t.Logf("put %d MiB into %s (on %s) through %s in %v", size>>20, bucket, leader.ID, cn.ID, time.Since(start).Round(time.Millisecond))
		r, err := obs.Get(ctx, "blob")
		if err != nil {
			t.Fatalf("get %s/blob: %v", bucket, err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, blob) {
			t.Fatalf("get %s/blob: %d bytes back (err %v), want the %d put", bucket, len(got), err, size)
		}
		cancel()
		nc.Close()
	}
	// Nothing was refused along the way: no node logged a full backlog.
	for _, cn := range nodes {
		if n := strings.Count(cn.proc.out.String(), "ingest backlog is full"); n > 0 {
			t.Errorf("%s refused publishes %d times", cn.ID, n)
		}
	}
}
