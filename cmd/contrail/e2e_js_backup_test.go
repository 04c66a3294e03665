package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream backups with the stock nats CLI: `nats backup account|stream`
// and `nats backup restore`, whose STREAM.SNAPSHOT and STREAM.RESTORE
// requests and chunk protocol are nats-server's.

// streamDump is everything a restore must bring back of a stream: its
// state, every message as stored (sequence, subject, header, data,
// time), and its durable consumers' delivery state.
type streamDump struct {
	Config    string
	State     jetstream.StreamState
	Msgs      []string
	Consumers map[string]string
}

// dumpStream reads name's dump through nats.go.
func dumpStream(t testing.TB, js jetstream.JetStream, name string) streamDump {
	t.Helper()
	ctx := ctxT(t)
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info := s.CachedInfo()
	cfg, _ := json.Marshal(info.Config)
	d := streamDump{Config: string(cfg), State: info.State, Consumers: map[string]string{}}
	d.State.Consumers = 0 // compared one by one below
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("stream %s message %d: %v", name, seq, err)
		}
		hdr, _ := json.Marshal(m.Header)
		data := fmt.Sprintf("%q", m.Data)
		if len(m.Data) > 64 {
			data = fmt.Sprintf("%d bytes sha256 %x", len(m.Data), sha256.Sum256(m.Data))
		}
		d.Msgs = append(d.Msgs, fmt.Sprintf("%d %s %s %s %s", m.Sequence, m.Subject, hdr, data, m.Time.UTC().Format(time.RFC3339Nano)))
	}
	for name := range s.ConsumerNames(ctx).Name() {
		c, err := s.Consumer(ctx, name)
		if err != nil {
			t.Fatalf("consumer %s: %v", name, err)
		}
		ci := c.CachedInfo()
		d.Consumers[name] = fmt.Sprintf("delivered %d/%d ack floor %d/%d pending %d ack pending %d redelivered %d filter %q",
			ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream,
			ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Config.FilterSubject)
	}
	return d
}

// wantSameDump fails on any difference between two dumps of a stream.
func wantSameDump(t testing.TB, name string, before, after streamDump) {
	t.Helper()
	if before.Config != after.Config {
		t.Errorf("%s config\nbefore %s\nafter  %s", name, before.Config, after.Config)
	}
	if !reflect.DeepEqual(before.State, after.State) {
		t.Errorf("%s state\nbefore %+v\nafter  %+v", name, before.State, after.State)
	}
	if strings.Join(before.Msgs, "\n") != strings.Join(after.Msgs, "\n") {
		t.Errorf("%s messages\nbefore:\n%s\nafter:\n%s", name, strings.Join(before.Msgs, "\n"), strings.Join(after.Msgs, "\n"))
	}
	if !reflect.DeepEqual(before.Consumers, after.Consumers) {
		t.Errorf("%s consumers\nbefore %v\nafter  %v", name, before.Consumers, after.Consumers)
	}
}

// fillOrders makes a stream with what a backup must keep exactly: gaps
// at its start (a purge), inside (a delete) and at its end (the last
// message deleted), headers, a message id, a per-message TTL, several
// subjects; a durable pull consumer with acknowledged and unacknowledged
// deliveries, a filtered durable, and an ephemeral (which a backup
// leaves out, as it ends with its client).
func fillOrders(t testing.TB, js jetstream.JetStream, replicas int) {
	t.Helper()
	ctx := ctxT(t)
	s := createStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, AllowMsgTTL: true, Replicas: replicas})
	for i := 1; i <= 20; i++ {
		m := nats.NewMsg(fmt.Sprintf("orders.%d", i%3))
		m.Data = []byte(fmt.Sprintf("order %d", i))
		if i%4 == 0 {
			m.Header.Set("X-Kind", "big")
			m.Header.Set("Nats-Msg-Id", fmt.Sprintf("id-%d", i))
		}
		if i == 7 {
			m.Header.Set("Nats-TTL", "1h")
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{5, 20} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatalf("delete %d: %v", seq, err)
		}
	}
	work, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "WORK", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := work.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range batch.Messages() {
		if i < 3 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		i++
	}
	if i != 5 {
		t.Fatalf("fetched %d of 5", i)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "ONES", FilterSubject: "orders.1", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
}

// A whole account backed up and restored with the nats CLI: a stream
// with gaps, headers and consumers, and a KV bucket, come back exactly,
// and go on as they were.
func TestJSBackupRestoreCLI(t *testing.T) {
	t.Parallel()
	natsCLI(t)
	n, tg := jsNode(t, nodeOpts{})
	js, ctx := tg.js, ctxT(t)
	fillOrders(t, js, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CFG", History: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, kvp := range [][2]string{{"k1", "v1"}, {"k1", "v2"}, {"k2", "x"}} {
		if _, err := kv.PutString(ctx, kvp[0], kvp[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	before := map[string]streamDump{"ORDERS": dumpStream(t, js, "ORDERS"), "KV_CFG": dumpStream(t, js, "KV_CFG")}
	if len(before["ORDERS"].Consumers) != 3 {
		t.Fatalf("consumers before the backup: %v", before["ORDERS"].Consumers)
	}
	delete(before["ORDERS"].Consumers, ephemeralName(before["ORDERS"]))

	dir := filepath.Join(t.TempDir(), "acct")
	out := runCLI(t, n.URL, "backup", "account", dir, "--consumers", "-f")
	t.Logf("backup:\n%s", out)
	for name := range before {
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	out = runCLI(t, n.URL, "backup", "restore", "account", dir)
	t.Logf("restore:\n%s", out)
	for name, b := range before {
		wantSameDump(t, name, b, dumpStream(t, js, name))
	}

	// The stream goes on from its last sequence, past the deleted one.
	ack := jsPublish(t, js, "orders.9", "after")
	if ack.Sequence != before["ORDERS"].State.LastSeq+1 {
		t.Errorf("first publish after the restore got sequence %d, want %d", ack.Sequence, before["ORDERS"].State.LastSeq+1)
	}
	// WORK goes on after its ack floor, and its two unacknowledged
	// deliveries come again once their ack wait has passed.
	work, err := js.Consumer(ctx, "ORDERS", "WORK")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]uint64{} // stream seq → delivery count
	for i := 0; i < 20 && (seen[7] == 0 || seen[8] == 0); i++ {
		batch, err := work.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			if seen[md.Sequence.Stream] != 0 {
				t.Errorf("WORK delivered %d twice after the restore", md.Sequence.Stream)
			}
			seen[md.Sequence.Stream] = md.NumDelivered
			m.Ack()
		}
	}
	for seq, dc := range seen {
		want := uint64(1)
		if seq == 7 || seq == 8 {
			want = 2
		}
		if seq < 7 || seq == 20 || dc != want {
			t.Errorf("WORK after the restore delivered stream seq %d for the %d. time", seq, dc)
		}
	}
	if seen[7] == 0 || seen[8] == 0 {
		t.Errorf("WORK's unacknowledged deliveries did not come again: %v", seen)
	}
	// The bucket reads as before: k1's history, k2 deleted.
	kv, err = js.KeyValue(ctx, "CFG")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k1"); err != nil || string(e.Value()) != "v2" || e.Revision() != 2 {
		t.Errorf("k1 after the restore: %v %v", e, err)
	}
	if _, err := kv.Get(ctx, "k2"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("k2 after the restore: %v, want deleted", err)
	}
	if h, err := kv.History(ctx, "k1"); err != nil || len(h) != 2 {
		t.Errorf("k1's history after the restore: %d entries, %v", len(h), err)
	}
}

// ephemeralName is the one consumer of d that is not named as the
// durables fillOrders makes.
func ephemeralName(d streamDump) string {
	for name := range d.Consumers {
		if name != "WORK" && name != "ONES" {
			return name
		}
	}
	return ""
}

// The refusals of STREAM.SNAPSHOT and STREAM.RESTORE, the same requests
// to nats-server and to Contrail, and the answers compared.
func TestJSBackupRefusalsCompared(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	for _, tg := range []*jsTarget{ours, ref} {
		createStream(t, tg.js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	}
	cases := []struct{ what, subj, body string }{
		{"snapshot, no body", "$JS.API.STREAM.SNAPSHOT.S", ""},
		{"snapshot of no stream", "$JS.API.STREAM.SNAPSHOT.NOPE", `{"deliver_subject":"x.y"}`},
		{"snapshot, bad JSON", "$JS.API.STREAM.SNAPSHOT.S", `{"deliver_subject":`},
		{"snapshot, wildcard deliver subject", "$JS.API.STREAM.SNAPSHOT.S", `{"deliver_subject":"x.*"}`},
		{"snapshot, no deliver subject", "$JS.API.STREAM.SNAPSHOT.S", `{"chunk_size":1024}`},
		{"restore, no body", "$JS.API.STREAM.RESTORE.T", ""},
		{"restore, bad JSON", "$JS.API.STREAM.RESTORE.T", `{"config":`},
		{"restore, name mismatch", "$JS.API.STREAM.RESTORE.T", `{"config":{"name":"U","subjects":["u"]},"state":{}}`},
		{"restore over a stream", "$JS.API.STREAM.RESTORE.S", `{"config":{"name":"S","subjects":["s.>"],"storage":"file","retention":"limits","max_msgs":-1,"max_bytes":-1,"max_age":0,"max_consumers":-1,"discard":"old","num_replicas":1},"state":{}}`},
		{"restore, invalid config", "$JS.API.STREAM.RESTORE.T", `{"config":{"name":"T","subjects":["t"],"max_msgs":-5,"retention":"nope"},"state":{}}`},
	}
	for _, c := range cases {
		o := apiRequest(t, ours.nc, c.subj, c.body)
		r := apiRequest(t, ref.nc, c.subj, c.body)
		sameReply(t, c.what, o, r)
	}
}

// What an attacker or a broken client does to a restore changes
// nothing: a backup of another server's, a damaged or truncated one, a
// client that stops sending. Each is refused with 10062, no stream is
// left behind, and the name can be restored afterwards.
func TestJSBackupHostile(t *testing.T) {
	t.Parallel()
	natsCLI(t)
	n, tg := jsNode(t, nodeOpts{})
	ref := startRefJS(t)
	js, ctx := tg.js, ctxT(t)
	fillOrders(t, js, 1)
	before := dumpStream(t, js, "ORDERS")
	delete(before.Consumers, ephemeralName(before))
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	runCLI(t, n.URL, "backup", "stream", "ORDERS", good, "--consumers")
	if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}

	// The same stream on nats-server, backed up there.
	refJS := jsConnect(t, "nats-server", ref.URL).js
	fillOrders(t, refJS, 1)
	theirs := filepath.Join(dir, "theirs")
	runCLI(t, ref.URL, "backup", "stream", "ORDERS", theirs)

	data := func(d string) string {
		matches, _ := filepath.Glob(filepath.Join(d, "stream.*.s2"))
		if len(matches) != 1 {
			t.Fatalf("backup %s holds %v", d, matches)
		}
		return matches[0]
	}
	variant := func(name string, change func([]byte) []byte) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		meta, _ := os.ReadFile(filepath.Join(good, "backup.json"))
		writeFile(t, d, "backup.json", string(meta))
		b, _ := os.ReadFile(data(good))
		writeFile(t, d, filepath.Base(data(good)), string(change(b)))
		return d
	}
	damaged := variant("damaged", func(b []byte) []byte {
		for i := 20; i < len(b); i += 23 {
			b[i] ^= 0x5a
		}
		return b
	})
	truncated := variant("truncated", func(b []byte) []byte { return b[:len(b)*2/3] })
	for _, c := range []struct{ what, dir, why string }{
		{"nats-server's backup", theirs, "not a Contrail stream backup"},
		{"a damaged backup", damaged, "archive corrupt"},
		{"a truncated backup", truncated, "archive corrupt"},
	} {
		out, err := tryCLI(t, n.URL, "backup", "restore", "stream", c.dir)
		if err == nil || !strings.Contains(out, c.why) {
			t.Errorf("restore of %s: %v\n%s", c.what, err, out)
		}
		if _, err := js.Stream(ctx, "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("after the refused restore of %s, the stream: %v", c.what, err)
		}
	}

	// A client that stops sending halfway: the restore gives up after
	// its stall timeout and leaves nothing.
	b, _ := os.ReadFile(data(good))
	meta, _ := os.ReadFile(filepath.Join(good, "backup.json"))
	r := mustAPI(t, tg.nc, "$JS.API.STREAM.RESTORE.ORDERS", string(meta))
	deliver, _ := r.doc["deliver_subject"].(string)
	if _, err := tg.nc.Request(deliver, b[:len(b)/2], ioTimeout); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	// While it waits, the name is taken (10130); once it gives up, a
	// new restore of the name is taken up.
	var again apiReply
	waitFor(t, 20*time.Second, "the stalled restore to give up", func() bool {
		again = apiRequest(t, tg.nc, "$JS.API.STREAM.RESTORE.ORDERS", string(meta))
		if c := again.errCode(); c != 0 && c != 10130 {
			t.Fatalf("a restore of a name being restored: %s, want 10130", again)
		}
		return again.errCode() == 0
	})
	// As on nats-server, the restore's subject is gone with it.
	if _, err := tg.nc.Request(deliver, b[len(b)/2:], ioTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("a chunk after the stall: %v, want no responders", err)
	}
	if _, err := js.Stream(ctx, "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("after the stalled restore, the stream: %v", err)
	}
	// The restore opened since ends with an empty backup: refused, and
	// it too leaves nothing.
	if resp, err := tg.nc.Request(again.doc["deliver_subject"].(string), nil, ioTimeout); err != nil || !strings.Contains(string(resp.Data), "10062") {
		t.Errorf("an empty restore's end: %v %q", err, resp.Data)
	}

	// A hostile client opens more restores at once than it may.
	var opened []string
	var refused int
	for i := 0; i < 6; i++ {
		r := apiRequest(t, tg.nc, fmt.Sprintf("$JS.API.STREAM.RESTORE.M%d", i), fmt.Sprintf(`{"config":{"name":"M%d","subjects":["m%d"]}}`, i, i))
		if d, _ := r.doc["deliver_subject"].(string); d != "" && r.errCode() == 0 {
			opened = append(opened, d)
		} else if r.errCode() == 10062 && strings.Contains(r.errDesc(), "too many") {
			refused++
		} else {
			t.Errorf("restore %d: %s", i, r)
		}
	}
	if len(opened) != 4 || refused != 2 {
		t.Errorf("6 restores at once: %d opened, %d refused; want 4 and 2", len(opened), refused)
	}
	// Ended at once by an empty chunk (no backup at all), each leaves
	// nothing, and frees its slot.
	for _, d := range opened {
		resp, err := tg.nc.Request(d, nil, ioTimeout)
		if err != nil || !strings.Contains(string(resp.Data), "10062") {
			t.Errorf("an empty restore's end: %v %q", err, resp.Data)
		}
	}
	names := streamNames(t, js)
	if len(names) != 0 {
		t.Errorf("streams left by refused restores: %v", names)
	}

	// After all of that the good backup restores, exactly.
	runCLI(t, n.URL, "backup", "restore", "stream", good)
	wantSameDump(t, "ORDERS", before, dumpStream(t, js, "ORDERS"))
}

// streamNames lists the account's streams.
func streamNames(t testing.TB, js jetstream.JetStream) []string {
	t.Helper()
	names, err := tryStreamNames(js)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// tryStreamNames is streamNames for a cluster that may be electing a
// meta leader.
func tryStreamNames(js jetstream.JetStream) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	var names []string
	l := js.StreamNames(ctx)
	for name := range l.Name() {
		names = append(names, name)
	}
	return names, l.Err()
}

// A backup's sender paces itself by the receiver's acknowledgements: a
// receiver that takes the first window and acknowledges nothing gets no
// more, and then the end with status 408, as from nats-server.
func TestJSBackupReceiverStops(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	for _, tg := range []*jsTarget{ours, ref} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			createStream(t, tg.js, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big"}})
			// Random bodies: what compresses away makes no chunks.
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 200; i++ {
				payload := make([]byte, 4000)
				for j := range payload {
					payload[j] = byte(rng.Uint32())
				}
				tg.js.PublishAsync("big", payload)
			}
			select {
			case <-tg.js.PublishAsyncComplete():
			case <-time.After(ioTimeout):
				t.Fatal("publishes not acknowledged")
			}
			inbox := nats.NewInbox()
			var mu sync.Mutex
			var chunks int
			end := make(chan *nats.Msg, 1)
			sub, err := tg.nc.Subscribe(inbox, func(m *nats.Msg) {
				if len(m.Data) == 0 {
					end <- m
					return
				}
				mu.Lock()
				chunks++
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			mustAPI(t, tg.nc, "$JS.API.STREAM.SNAPSHOT.BIG", fmt.Sprintf(`{"deliver_subject":%q,"chunk_size":1024,"window_size":4096}`, inbox))
			select {
			case m := <-end:
				mu.Lock()
				defer mu.Unlock()
				if st := m.Header.Get("Status"); st != "408" || chunks != 4 {
					t.Errorf("%s: ended with status %q after %d chunks, want 408 after 4 (%v)", tg.name, st, chunks, m.Header)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: the sender never gave up on a receiver that acknowledges nothing", tg.name)
			}
		})
	}
}

// On a cluster: an R3 stream and an R1 stream backed up through one
// node and restored through another come back exactly, the R3 one on
// all its replicas (its leader killed after the restore, the new one
// holds it all); a failed restore leaves nothing in the catalog.
func TestClusterBackupRestore(t *testing.T) {
	t.Parallel()
	natsCLI(t)
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	_, js := clusterJS(t, clusterURLs(nodes))
	waitFor(t, clusterTimeout(), "the meta group", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	fillOrders(t, js, 3)
	r1 := createR3(t, js, jetstream.StreamConfig{Name: "ONE", Subjects: []string{"one"}, Replicas: 1})
	for i := 0; i < 5; i++ {
		jsPublish(t, js, "one", fmt.Sprint(i))
	}
	if err := r1.DeleteMsg(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	before := map[string]streamDump{"ORDERS": dumpStream(t, js, "ORDERS"), "ONE": dumpStream(t, js, "ONE")}
	delete(before["ORDERS"].Consumers, ephemeralName(before["ORDERS"]))

	dir := filepath.Join(t.TempDir(), "acct")
	runCLI(t, nodes[1].URL, "backup", "account", dir, "--consumers", "-f")
	for name := range before {
		if err := js.DeleteStream(ctxT(t), name); err != nil {
			t.Fatal(err)
		}
	}
	runCLI(t, nodes[2].URL, "backup", "restore", "account", dir)
	for name, b := range before {
		wantSameDump(t, name, b, dumpStream(t, js, name))
	}

	leader, _ := streamLeader(t, js, nodes, "ORDERS")
	leader.kill(t)
	streamLeader(t, js, nodes, "ORDERS")
	wantSameDump(t, "ORDERS after its leader's loss", before["ORDERS"], dumpStream(t, js, "ORDERS"))
	leader.restart(t)

	// A damaged backup of ORDERS, restored after ORDERS is deleted:
	// refused, and no node's catalog keeps the stream it began.
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.MkdirAll(bad, 0o700); err != nil {
		t.Fatal(err)
	}
	meta, _ := os.ReadFile(filepath.Join(dir, "ORDERS", "backup.json"))
	writeFile(t, bad, "backup.json", string(meta))
	matches, _ := filepath.Glob(filepath.Join(dir, "ORDERS", "stream.*.s2"))
	if len(matches) != 1 {
		t.Fatalf("backup holds %v", matches)
	}
	b, _ := os.ReadFile(matches[0])
	writeFile(t, bad, filepath.Base(matches[0]), string(b[:len(b)/2]))
	if err := js.DeleteStream(ctxT(t), "ORDERS"); err != nil {
		t.Fatal(err)
	}
	if out, err := tryCLI(t, nodes[0].URL, "backup", "restore", "stream", bad); err == nil || !strings.Contains(out, "archive corrupt") {
		t.Errorf("restore of a truncated backup: %v\n%s", err, out)
	}
	for _, cn := range nodes {
		_, njs := clusterJS(t, cn.URL)
		waitFor(t, clusterTimeout(), "the failed restore's stream to leave "+cn.ID+"'s catalog", func() bool {
			names := streamNames(t, njs)
			return len(names) == 1 && names[0] == "ONE"
		})
	}
	runCLI(t, nodes[1].URL, "backup", "restore", "stream", filepath.Join(dir, "ORDERS"))
	wantSameDump(t, "ORDERS restored again", before["ORDERS"], dumpStream(t, js, "ORDERS"))

	// More restores than the nodes take at once (four per account on
	// each): the refused ones, and then the opened ones ended empty,
	// leave no stream in any node's catalog.
	nc := connect(t, clusterURLs(nodes))
	var opened []string
	refused := 0
	for i := 0; i < 15; i++ {
		r := apiRequest(t, nc, fmt.Sprintf("$JS.API.STREAM.RESTORE.R%d", i),
			fmt.Sprintf(`{"config":{"name":"R%d","subjects":["r%d"],"num_replicas":3}}`, i, i))
		switch d, _ := r.doc["deliver_subject"].(string); {
		case r.errCode() == 0 && d != "":
			opened = append(opened, d)
		case r.errCode() == 10062 && strings.Contains(r.errDesc(), "too many"):
			refused++
		default:
			t.Fatalf("restore R%d: %s", i, r)
		}
	}
	if refused < 3 {
		t.Errorf("15 restores at once on three nodes: %d refused, want at least 3", refused)
	}
	for _, d := range opened {
		if resp, err := nc.Request(d, nil, ioTimeout); err != nil || !strings.Contains(string(resp.Data), "10062") {
			t.Errorf("an empty restore's end: %v", err)
		}
	}
	for _, cn := range nodes {
		_, njs := clusterJS(t, cn.URL)
		waitFor(t, clusterTimeout(), "refused and failed restores to leave "+cn.ID+"'s catalog", func() bool {
			return len(streamNames(t, njs)) == 2
		})
	}

	// A restore whose node is killed halfway leaves no part of the
	// backup behind: the partition's next leader removes what it
	// finds, and the catalog forgets the stream, so the next try works.
	if err := js.DeleteStream(ctxT(t), "ORDERS"); err != nil {
		t.Fatal(err)
	}
	var bj struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(meta, &bj); err != nil || len(bj.Config) == 0 {
		t.Fatalf("backup.json: %v", err)
	}
	mark := logMark{}
	for _, cn := range nodes {
		mark[cn.proc] = cn.proc.out.len()
	}
	r := apiRequest(t, nc, "$JS.API.STREAM.RESTORE.ORDERS", fmt.Sprintf(`{"config":%s}`, bj.Config))
	deliver, _ := r.doc["deliver_subject"].(string)
	if deliver == "" {
		t.Fatalf("restore ORDERS: %s", r)
	}
	for half := b[:len(b)/2]; len(half) > 0; {
		n := min(len(half), 512)
		if resp, err := nc.Request(deliver, half[:n], ioTimeout); err != nil || len(resp.Data) > 0 {
			t.Fatalf("restore chunk: %v %q", err, resp.Data)
		}
		half = half[n:]
	}
	holder, _ := awaitLog(t, mark, clusterTimeout(), "the restore's node", nodes, "jetstream stream restore started", "stream=ORDERS")
	holder.kill(t)
	for _, cn := range without(nodes, holder) {
		_, njs := clusterJS(t, cn.URL)
		waitFor(t, clusterTimeout(), "the cut restore's stream to leave "+cn.ID+"'s catalog", func() bool {
			names, err := tryStreamNames(njs)
			return err == nil && len(names) == 1 && names[0] == "ONE"
		})
	}
	holder.restart(t)
	runCLI(t, nodes[0].URL, "backup", "restore", "stream", filepath.Join(dir, "ORDERS"))
	wantSameDump(t, "ORDERS restored after a cut restore", before["ORDERS"], dumpStream(t, js, "ORDERS"))
}

// A stream whose older messages moved to the object store backs up
// whole: the cold ones are fetched as the backup reads them, and the
// restored stream holds every message again.
func TestTierBackupRestore(t *testing.T) {
	t.Parallel()
	natsCLI(t)
	bucketDir := t.TempDir()
	n, tg := jsNode(t, nodeOpts{config: fmt.Sprintf(`
jetstream {
  tier {
    url: "file://%s"
    segment_bytes: "256KiB"
    local_bytes: "512KiB"
  }
}`, bucketDir)})
	js, ctx := tg.js, ctxT(t)
	createStream(t, js, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	for i := 1; i <= 300; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("t.%d", i%3), tierPayload(i, 8<<10)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishes not acknowledged")
	}
	within := time.Minute
	if raceEnabled() {
		within = 4 * time.Minute
	}
	waitFor(t, within, "a megabyte of the stream in the object store", func() bool {
		var jz tierJsz
		getJSON(t, n.MonURL+"/jsz", &jz)
		return jz.Tier != nil && jz.Tier.ColdBytes >= 1<<20
	})
	before := dumpStream(t, js, "T")
	dir := filepath.Join(t.TempDir(), "t")
	runCLI(t, n.URL, "backup", "stream", "T", dir)
	if err := js.DeleteStream(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	runCLI(t, n.URL, "backup", "restore", "stream", dir)
	wantSameDump(t, "T", before, dumpStream(t, js, "T"))
}
