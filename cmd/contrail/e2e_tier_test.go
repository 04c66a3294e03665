package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/contrail/contrail/dataplane/tier/tiertest"
)

// startVersity runs versitygw (a real S3 server) on loopback with one
// bucket, and returns its endpoint URL and the bucket's directory. The
// node started after it takes the credentials from the standard AWS
// environment, which the helper sets for the test.
func startVersity(t *testing.T, bucket string) (endpoint, bucketDir string) {
	t.Helper()
	s := tiertest.StartT(t, bucket)
	return s.Endpoint, s.BucketDir(bucket)
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(t testing.TB, dir string) (n int64, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if strings.HasSuffix(d.Name(), ".seg") || !strings.HasPrefix(d.Name(), ".") {
			n += info.Size()
			files++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n, files
}

// dirKinds sums a directory's file sizes by kind (extension), largest
// files named: what a data dir that stays too large holds.
func dirKinds(t testing.TB, dir string) string {
	t.Helper()
	kinds := map[string]int64{}
	var big []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		kinds[filepath.Ext(d.Name())] += info.Size()
		if info.Size() >= 1<<20 {
			rel, _ := filepath.Rel(dir, path)
			big = append(big, fmt.Sprintf("%s %.1f MiB", rel, float64(info.Size())/(1<<20)))
		}
		return nil
	})
	return fmt.Sprintf("by kind %v; files of 1 MiB or more: %s", kinds, strings.Join(big, ", "))
}

func segFiles(t testing.TB, dir string) (n int64, files int) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".seg") {
			if info, err := d.Info(); err == nil {
				n += info.Size()
				files++
			}
		}
		return nil
	})
	return n, files
}

// tierPayload is message i's data: distinct per message, so a wrong
// block or offset never reads back as right.
func tierPayload(i, size int) []byte {
	b := bytes.Repeat([]byte(fmt.Sprintf("%08d|", i)), size/9+1)[:size]
	return b
}

type tierJsz struct {
	Tier *struct {
		LocalBytes int64 `json:"local_bytes"`
		ColdBytes  int64 `json:"cold_bytes"`
		ColdMsgs   int64 `json:"cold_messages"`
		Segments   int   `json:"segments"`
		Uploads    int64 `json:"uploads"`
		ColdReads  int64 `json:"cold_reads"`
		OverBudget bool  `json:"over_budget"`
	} `json:"tier"`
}

// coldTierScenario is the scenario on a started node: 40 MiB of
// 10 KiB messages with a 4 MiB local budget and 1 MiB segments. At least
// 30 MiB must land in the bucket, the data dir stay within 20 MiB, every
// message read back byte for byte by sequence and through an ordered
// consumer, before and after a restart; a purge empties the bucket.
func coldTierScenario(t *testing.T, start func(dir string) *node, bucketDir string) {
	const size, total = 10 << 10, 40 << 20
	const n = total / size
	n1 := start("")
	nc := connect(t, n1.URL)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for i := 1; i <= n; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("t.%d", i%5), tierPayload(i, size)); err != nil {
			t.Fatal(err)
		}
		if i%256 == 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal("publishes not acknowledged")
			}
		}
	}
	<-js.PublishAsyncComplete()
	t.Logf("published %d MiB in %v", total>>20, time.Since(began).Round(time.Millisecond))
	// A race-built node moves segments several times slower.
	within := time.Minute
	if raceEnabled() {
		within = 4 * time.Minute
	}
	var jz tierJsz
	waitFor(t, within, "tiering to bring local bytes within the budget", func() bool {
		jz = tierJsz{}
		getJSON(t, n1.MonURL+"/jsz", &jz)
		return jz.Tier != nil && jz.Tier.LocalBytes <= 4<<20 && jz.Tier.ColdBytes >= 30<<20
	})
	cold, objects := segFiles(t, bucketDir)
	if cold < 30<<20 {
		t.Fatalf("bucket holds %d bytes, want ≥ 30 MiB", cold)
	}
	// The disk follows the budget once the store has dropped what moved:
	// its log rotates and its compactions reclaim the removed messages
	// in the background, so the bound is awaited, not checked at once.
	var data int64
	deadline := time.Now().Add(within)
	for data, _ = dirBytes(t, n1.DataDir); data > 20<<20; data, _ = dirBytes(t, n1.DataDir) {
		if time.Now().After(deadline) {
			t.Fatalf("the data dir holds %.1f MiB after %v, want at most 20 MiB: %s",
				float64(data)/(1<<20), within, dirKinds(t, n1.DataDir))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("bucket %d MiB in %d objects, data dir %.1f MiB (%s), jsz %+v", cold>>20, objects, float64(data)/(1<<20),
		dirKinds(t, n1.DataDir), *jz.Tier)
	readAll := func(js jetstream.JetStream) {
		t.Helper()
		s, err := js.Stream(ctx, "T")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != n || info.State.FirstSeq != 1 || info.State.LastSeq != n {
			t.Fatalf("state %+v", info.State)
		}
		for _, seq := range []uint64{1, 2, n / 3, n / 2, n - 1, n} {
			m, err := s.GetMsg(ctx, seq)
			if err != nil || !bytes.Equal(m.Data, tierPayload(int(seq), size)) || m.Subject != fmt.Sprintf("t.%d", seq%5) {
				t.Fatalf("get %d: %v", seq, err)
			}
		}
		began := time.Now()
		oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		it, err := oc.Messages()
		if err != nil {
			t.Fatal(err)
		}
		defer it.Stop()
		for i := 1; i <= n; i++ {
			m, err := it.Next()
			if err != nil {
				t.Fatalf("ordered consumer at %d: %v", i, err)
			}
			md, _ := m.Metadata()
			if md.Sequence.Stream != uint64(i) || !bytes.Equal(m.Data(), tierPayload(i, size)) {
				t.Fatalf("ordered consumer: message %d is seq %d, data ok %v", i, md.Sequence.Stream, bytes.Equal(m.Data(), tierPayload(i, size)))
			}
		}
		el := time.Since(began)
		t.Logf("ordered consumer read %d MiB in %v (%.0f MB/s)", total>>20, el.Round(time.Millisecond), float64(total)/el.Seconds()/1e6)
	}
	readAll(js)
	// Every sequence by MSG.GET too, cold ones through the block cache.
	s, _ := js.Stream(ctx, "T")
	for seq := uint64(1); seq <= n; seq += 7 {
		m, err := s.GetMsg(ctx, seq)
		if err != nil || !bytes.Equal(m.Data, tierPayload(int(seq), size)) {
			t.Fatalf("get %d: %v", seq, err)
		}
	}
	nc.Close()
	n1.stop()

	n2 := start(n1.Dir)
	nc2 := connect(t, n2.URL)
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	readAll(js2)
	if err := func() error {
		s, err := js2.Stream(ctx, "T")
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	}(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, within, "the bucket to empty after the purge", func() bool {
		_, files := segFiles(t, bucketDir)
		return files == 0
	})
}

// TestTierS3 runs the scenario against versitygw, a real S3 server.
func TestTierS3(t *testing.T) {
	endpoint, bucketDir := startVersity(t, "tier")
	coldTierScenario(t, func(dir string) *node {
		return startNode(t, nodeOpts{dir: dir, args: []string{"--tier-url", "s3://tier/contrail", "--tier-endpoint", endpoint,
			"--tier-segment-bytes", "1MiB", "--tier-local-bytes", "4MiB"}})
	}, bucketDir)
}

// TestTierLocalDir runs the scenario with the file:// backend, set in
// the config file's jetstream { tier { ... } } block.
func TestTierLocalDir(t *testing.T) {
	bucketDir := t.TempDir()
	coldTierScenario(t, func(dir string) *node {
		return startNode(t, nodeOpts{dir: dir, config: fmt.Sprintf(`
jetstream {
  tier {
    url: "file://%s"
    segment_bytes: "1MiB"
    local_bytes: "4MiB"
  }
}`, bucketDir)})
	}, bucketDir)
}

// TestTierRetention runs KV buckets, work-queue and interest streams,
// subject purges and deletes over cold segments: each acts as if every
// message were local, and once the streams are gone so are the objects.
func TestTierRetention(t *testing.T) {
	bucketDir := t.TempDir()
	n := startNode(t, nodeOpts{config: fmt.Sprintf(`
jetstream {
  tier { url: "file://%s", segment_bytes: "64KiB", local_bytes: "256KiB" }
}`, bucketDir)})
	nc := connect(t, n.URL)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const size = 2 << 10
	coldOf := func(stream string) int64 {
		var jz struct {
			Tier *struct {
				Streams []struct {
					Stream    string `json:"stream"`
					ColdMsgs  int64  `json:"cold_messages"`
					Segments  int    `json:"segments"`
					LocalByte int64  `json:"local_bytes"`
				} `json:"streams"`
			} `json:"tier"`
		}
		getJSON(t, n.MonURL+"/jsz", &jz)
		for _, s := range jz.Tier.Streams {
			if s.Stream == stream {
				return s.ColdMsgs
			}
		}
		return 0
	}
	waitCold := func(stream string) {
		t.Helper()
		waitFor(t, time.Minute, stream+" tiered", func() bool { return coldOf(stream) > 50 })
	}

	// KV: the latest value of every key, cold or not; a delete hides it.
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cfg", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i), tierPayload(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i), tierPayload(1000+i, size)); err != nil {
			t.Fatal(err)
		}
	}
	waitCold("KV_cfg")
	for i := range 300 {
		want := tierPayload(i, size)
		if i < 20 {
			want = tierPayload(1000+i, size)
		}
		e, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
		if err != nil || !bytes.Equal(e.Value(), want) {
			t.Fatalf("kv get k%d: %v", i, err)
		}
	}
	if err := kv.Delete(ctx, "k30"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "k30"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("deleted key: %v", err)
	}

	// Work queue and interest: consumed and acknowledged from the cold
	// start, they empty.
	for _, r := range []struct {
		name string
		ret  jetstream.RetentionPolicy
	}{{"WQ", jetstream.WorkQueuePolicy}, {"IN", jetstream.InterestPolicy}} {
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: r.name, Subjects: []string{strings.ToLower(r.name) + ".>"}, Retention: r.ret})
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 300; i++ {
			if _, err := js.Publish(ctx, strings.ToLower(r.name)+".x", tierPayload(i, size)); err != nil {
				t.Fatal(err)
			}
		}
		waitCold(r.name)
		for i := 1; i <= 300; {
			batch, err := c.Fetch(50, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				md, _ := m.Metadata()
				if md.Sequence.Stream != uint64(i) || !bytes.Equal(m.Data(), tierPayload(i, size)) {
					t.Fatalf("%s: message %d is seq %d", r.name, i, md.Sequence.Stream)
				}
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
				i++
			}
			if batch.Error() != nil {
				t.Fatal(batch.Error())
			}
		}
		info, err := s.Info(ctx)
		if err != nil || info.State.Msgs != 0 {
			t.Fatalf("%s after acks: %+v %v", r.name, info.State, err)
		}
	}

	// A subject purge and a delete over cold segments.
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 300; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("p.%c", "ab"[i%2]), tierPayload(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	waitCold("P")
	if err := s.Purge(ctx, jetstream.WithPurgeSubject("p.a")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, 3); err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 149 {
		t.Fatalf("after the subject purge and a delete: %+v %v", info.State, err)
	}
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 299; want += 2 {
		if want == 3 {
			continue
		}
		m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("ordered consumer waiting for %d: %v", want, err)
		}
		md, _ := m.Metadata()
		if md.Sequence.Stream != uint64(want) || m.Subject() != "p.b" || !bytes.Equal(m.Data(), tierPayload(want, size)) {
			t.Fatalf("ordered consumer: got seq %d on %s, want %d", md.Sequence.Stream, m.Subject(), want)
		}
	}

	// Deleting the streams deletes their objects.
	for _, name := range []string{"KV_cfg", "WQ", "IN", "P"} {
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "the bucket to empty", func() bool {
		_, files := segFiles(t, bucketDir)
		return files == 0
	})
}

// TestTierDev: `contrail dev` tiers to a directory of its data dir, with
// nothing else running; cold messages read back after a restart.
func TestTierDev(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	d := &devProc{DataDir: dataDir, httpAddr: freeAddr(t), natsAddr: freeAddr(t),
		args: []string{"--tier-segment-bytes", "64KiB", "--tier-local-bytes", "256KiB"}}
	d.URL, d.NatsURL = "http://"+d.httpAddr, "nats://"+d.natsAddr
	d.start(t)
	creds := filepath.Join(dataDir, "dev.creds")
	js, err := jetstream.New(connectCreds(t, d.NatsURL, creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "D", Subjects: []string{"d"}}); err != nil {
		t.Fatal(err)
	}
	const n, size = 400, 2 << 10
	for i := 1; i <= n; i++ {
		if _, err := js.Publish(ctx, "d", tierPayload(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	tierDir := filepath.Join(dataDir, "tier")
	waitFor(t, time.Minute, "segments in the dev tier directory", func() bool {
		b, _ := segFiles(t, tierDir)
		return b >= 400<<10
	})
	d.stop()
	d.start(t)
	js, err = jetstream.New(connectCreds(t, d.NatsURL, creds))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "D")
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 2, 100, n} {
		m, err := s.GetMsg(ctx, seq)
		if err != nil || !bytes.Equal(m.Data, tierPayload(int(seq), size)) {
			t.Fatalf("get %d after restart: %v", seq, err)
		}
	}
}

// TestTierDevCluster: `contrail dev --nodes 3` tiers every node to one
// directory of its data dir, so an R3 stream's replicas share its
// segments: after a restart (the partition's leader may be another
// node), cold messages still read back from the same objects.
func TestTierDevCluster(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	d, urls, _ := startDevCluster(t, dataDir, "--tier-segment-bytes", "64KiB", "--tier-local-bytes", "256KiB")
	creds := filepath.Join(dataDir, "dev.creds")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js, err := jetstream.New(connectCreds(t, strings.Join(urls, ","), creds))
	if err != nil {
		t.Fatal(err)
	}
	var s jetstream.Stream
	waitFor(t, startTimeout, "an R3 stream created", func() bool {
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "DC", Subjects: []string{"dc"}, Replicas: 3})
		return err == nil
	})
	const n, size = 400, 2 << 10
	for i := 1; i <= n; i++ {
		// Sent again under its message id if it falls into a leadership
		// move (the balancer spreads partitions right after start).
		for try := 0; ; try++ {
			_, err := js.Publish(ctx, "dc", tierPayload(i, size), jetstream.WithMsgID(fmt.Sprintf("dc-%d", i)))
			if err == nil {
				break
			}
			if try == 10 {
				t.Fatalf("publish %d: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tierDir := filepath.Join(dataDir, "tier")
	waitFor(t, time.Minute, "segments in the shared tier directory", func() bool {
		b, _ := segFiles(t, tierDir)
		return b >= 400<<10
	})
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, files := segFiles(t, filepath.Join(dataDir, id)); files != 0 {
			t.Fatalf("node %s keeps segment files in its own data dir", id)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, seq := range []uint64{1, 2, 100, n} {
			var m *jetstream.RawStreamMsg
			waitFor(t, startTimeout, fmt.Sprintf("message %d %s", seq, when), func() bool {
				m, err = s.GetMsg(ctx, seq)
				return err == nil
			})
			if !bytes.Equal(m.Data, tierPayload(int(seq), size)) {
				t.Fatalf("message %d %s: wrong data", seq, when)
			}
		}
	}
	check("after tiering")
	d.stop()
	d.start(t)
	js, err = jetstream.New(connectCreds(t, strings.Join(urls, ","), creds))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, startTimeout, "the stream after a restart", func() bool {
		s, err = js.Stream(ctx, "DC")
		return err == nil
	})
	check("after a restart")
}

// TestTierNodeName: a node without a server_name names its objects with
// a name made once and kept in its store directory.
func TestTierNodeName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "js")
	a, err := tierNodeName(dir)
	if err != nil || !strings.HasPrefix(a, "node-") {
		t.Fatalf("first name %q: %v", a, err)
	}
	if b, err := tierNodeName(dir); err != nil || b != a {
		t.Fatalf("second name %q (%v), want %q", b, err, a)
	}
}
