package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// batchMsgHdr builds a batch message's header block: id, seq, commit ("" for
// none) and further key/value pairs.
func batchMsgHdr(id string, seq int, commit string, kv ...string) []byte {
	h := []string{api.HeaderBatchID, id, api.HeaderBatchSeq, strconv.Itoa(seq)}
	if commit != "" {
		h = append(h, api.HeaderBatchCommit, commit)
	}
	return appendHeaderBlock(nil, "", append(h, kv...)...)
}

// batchReply publishes one batch message with a reply subject and returns
// the reply: empty for a staged message, a PubAck (or its error) otherwise.
func batchReply(t *testing.T, acc *fakeAccount, subj string, hdr []byte) (string, api.PubAckResponse) {
	t.Helper()
	b := acc.request(t, subj, hdr, []byte("x"))
	var ack api.PubAckResponse
	if len(b) > 0 {
		if err := json.Unmarshal(b, &ack); err != nil {
			t.Fatalf("reply %q: %v", b, err)
		}
	}
	return string(b), ack
}

// openBatchesOf is how many batches stream name of account A holds open.
func openBatchesOf(e *Engine, name string) int {
	e.mu.Lock()
	a := e.mu.accounts["A"]
	e.mu.Unlock()
	return a.lookup(name).openBatchCount()
}

func streamMsgs(t *testing.T, acc *fakeAccount, name string) uint64 {
	t.Helper()
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO."+name, nil, &info)
	if info.Error != nil {
		t.Fatal(info.Error)
	}
	return info.State.Msgs
}

func TestAtomicBatchCommit(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowAtomicPublish: true})
	publish(t, acc, "s.before", nil, []byte("0"))
	for i := 1; i <= 2; i++ {
		if raw, _ := batchReply(t, acc, "s.a", batchMsgHdr("b1", i, "")); raw != "" {
			t.Fatalf("staged message %d got %q, want an empty reply", i, raw)
		}
	}
	if n := streamMsgs(t, acc, "S"); n != 1 || openBatchesOf(e, "S") != 1 {
		t.Fatalf("staged messages are visible: %d messages, %d open batches", n, openBatchesOf(e, "S"))
	}
	_, ack := batchReply(t, acc, "s.b", batchMsgHdr("b1", 3, "1"))
	if ack.Error != nil || ack.Sequence != 4 || ack.BatchID != "b1" || ack.BatchSize != 3 || ack.Stream != "S" {
		t.Fatalf("commit ack %+v", ack)
	}
	if n := openBatchesOf(e, "S"); n != 0 || e.batches.open.Load() != 0 || e.batches.staged.Load() != 0 {
		t.Fatalf("after the commit: %d open batches, node %d open, %d bytes staged", n, e.batches.open.Load(), e.batches.staged.Load())
	}
	var resp api.MsgGetResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET.S", api.MsgGetRequest{Seq: 4}, &resp)
	if resp.Error != nil || !strings.Contains(string(resp.Message.Header), "Nats-Batch-Commit: 1") {
		t.Fatalf("last message %+v", resp)
	}
	// The id can be used again once its batch committed.
	batchReply(t, acc, "s.a", batchMsgHdr("b1", 1, ""))
	_, ack = batchReply(t, acc, "s.a", batchMsgHdr("b1", 2, "eob"))
	if ack.Error != nil || ack.Sequence != 5 || ack.BatchSize != 1 {
		t.Fatalf("eob commit ack %+v", ack)
	}
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET.S", api.MsgGetRequest{Seq: 5}, &resp)
	if h := string(resp.Message.Header); !strings.Contains(h, "Nats-Batch-Commit: 1") || !strings.Contains(h, "Nats-Batch-Sequence: 1") {
		t.Fatalf("eob batch's last message header %q", h)
	}
}

// TestAtomicBatchRefusals: each refusal nats-server gives, with its code,
// and nothing of a refused batch stored.
func TestAtomicBatchRefusals(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem(), func(o *Options) { o.Batch = BatchLimits{MaxMsgs: 3, MaxInflightPerStream: 2} })
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowAtomicPublish: true,
		Duplicates: time.Minute, Discard: api.DiscardNew, MaxMsgs: 5})
	createStream(t, acc, api.StreamConfig{Name: "OFF", Subjects: []string{"off.>"}})
	createStream(t, acc, api.StreamConfig{Name: "DN", Subjects: []string{"dn.>"}, AllowAtomicPublish: true,
		Discard: api.DiscardNew, MaxMsgs: 1})
	type step struct {
		subj string
		hdr  []byte
		code int // err_code wanted; 0: staged (empty reply); -1: committed
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"disabled", []step{{"off.a", batchMsgHdr("x", 1, "1"), int(api.CodeAtomicPublishDisabled)}}},
		{"missing seq", []step{{"s.a", appendHeaderBlock(nil, "", api.HeaderBatchID, "x"), int(api.CodeAtomicPublishMissingSeq)}}},
		{"long id", []step{{"s.a", batchMsgHdr(strings.Repeat("i", 65), 1, ""), int(api.CodeAtomicPublishInvalidBatchID)}}},
		{"no start", []step{{"s.a", batchMsgHdr("x", 2, "1"), int(api.CodeAtomicPublishIncompleteBatch)}}},
		{"gap", []step{{"s.a", batchMsgHdr("g", 1, ""), 0}, {"s.a", batchMsgHdr("g", 3, ""), int(api.CodeAtomicPublishIncompleteBatch)},
			{"s.a", batchMsgHdr("g", 3, "1"), int(api.CodeAtomicPublishIncompleteBatch)}}},
		{"eob alone", []step{{"s.a", batchMsgHdr("e", 1, "eob"), int(api.CodeAtomicPublishIncompleteBatch)}}},
		{"bad commit", []step{{"s.a", batchMsgHdr("c", 1, ""), 0}, {"s.a", batchMsgHdr("c", 2, "yes"), int(api.CodeAtomicPublishInvalidBatchCommit)}}},
		{"too large", []step{{"s.a", batchMsgHdr("l", 1, ""), 0}, {"s.a", batchMsgHdr("l", 2, ""), 0}, {"s.a", batchMsgHdr("l", 3, ""), 0},
			{"s.a", batchMsgHdr("l", 4, "1"), int(api.CodeAtomicPublishTooLargeBatch)}}},
		{"too large unknown", []step{{"s.a", batchMsgHdr("u", 9, "1"), int(api.CodeAtomicPublishTooLargeBatch)}}},
		{"eob at the limit", []step{{"s.a", batchMsgHdr("m", 1, ""), 0}, {"s.a", batchMsgHdr("m", 2, ""), 0}, {"s.a", batchMsgHdr("m", 3, ""), 0},
			{"s.a", batchMsgHdr("m", 4, "eob"), -1}}},
		{"duplicate in batch", []step{{"s.a", batchMsgHdr("d", 1, "", api.HeaderMsgID, "m1"), 0},
			{"s.a", batchMsgHdr("d", 2, "1", api.HeaderMsgID, "m1"), int(api.CodeAtomicPublishContainsDuplicateMessage)}}},
		{"expected last msg id", []step{{"s.a", batchMsgHdr("h", 1, "1", api.HeaderExpectedLastMsgID, "m"), int(api.CodeAtomicPublishUnsupportedHeaderBatch)}}},
		{"expected last seq later", []step{{"s.a", batchMsgHdr("q", 1, ""), 0},
			{"s.a", batchMsgHdr("q", 2, "1", api.HeaderExpectedLastSeq, "4"), int(api.CodeWrongLastSequenceUnset)}}},
		{"wrong last seq", []step{{"s.a", batchMsgHdr("w", 1, "1", api.HeaderExpectedLastSeq, "9"), int(api.CodeWrongLastSequence)}}},
		{"discard new", []step{{"dn.a", batchMsgHdr("n", 1, ""), 0}, {"dn.a", batchMsgHdr("n", 2, "1"), int(api.CodeStreamStoreFailed)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := streamMsgs(t, acc, "S")
			committed := 0
			for i, st := range c.steps {
				raw, ack := batchReply(t, acc, st.subj, st.hdr)
				switch {
				case st.code == 0 && raw != "":
					t.Fatalf("step %d: %s, want an empty reply", i, raw)
				case st.code == -1 && (ack.Error != nil || raw == ""):
					t.Fatalf("step %d: %s, want a commit", i, raw)
				case st.code > 0 && (ack.Error == nil || int(ack.Error.ErrCode) != st.code):
					t.Fatalf("step %d: %s, want err_code %d", i, raw, st.code)
				}
				if st.code == -1 {
					committed = int(ack.BatchSize)
				}
			}
			if after := streamMsgs(t, acc, "S"); after != before+uint64(committed) {
				t.Fatalf("messages %d → %d, want %d more", before, after, committed)
			}
			if committed > 0 {
				// Make room for the next case (discard new, max 5).
				var pr api.StreamPurgeResponse
				acc.apiCall(t, "$JS.API.STREAM.PURGE.S", nil, &pr)
			}
		})
	}
	if n := streamMsgs(t, acc, "DN"); n != 0 {
		t.Fatalf("refused discard-new batch stored %d messages", n)
	}
	// Open batches per stream are bounded.
	batchReply(t, acc, "s.a", batchMsgHdr("o1", 1, ""))
	batchReply(t, acc, "s.a", batchMsgHdr("o2", 1, ""))
	if _, ack := batchReply(t, acc, "s.a", batchMsgHdr("o3", 1, "")); ack.Error == nil || ack.Error.ErrCode != api.CodeAtomicPublishTooManyInflight {
		t.Fatalf("third open batch: %+v", ack)
	}
}

// TestAtomicBatchAllOrNothing: a batch whose third message fails its
// check stores none of its messages, and the stream goes on unchanged.
func TestAtomicBatchAllOrNothing(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowAtomicPublish: true, Duplicates: time.Minute})
	publish(t, acc, "s.x", appendHeaderBlock(nil, "", api.HeaderMsgID, "old"), []byte("0"))
	batchReply(t, acc, "s.a", batchMsgHdr("b", 1, "", api.HeaderMsgID, "new1"))
	batchReply(t, acc, "s.a", batchMsgHdr("b", 2, "", api.HeaderExpectedLastSubjSeq, "0", api.HeaderExpectedLastSubjSeqSubj, "s.none"))
	_, ack := batchReply(t, acc, "s.a", batchMsgHdr("b", 3, "1", api.HeaderMsgID, "old"))
	if ack.Error == nil || ack.Error.ErrCode != api.CodeAtomicPublishContainsDuplicateMessage {
		t.Fatalf("commit %+v, want 10201", ack)
	}
	if n := streamMsgs(t, acc, "S"); n != 1 {
		t.Fatalf("%d messages after a refused batch, want 1", n)
	}
	// new1 was not recorded for dedup: a plain publish with it is stored.
	if ack := publish(t, acc, "s.a", appendHeaderBlock(nil, "", api.HeaderMsgID, "new1"), nil); ack.Error != nil || ack.Duplicate || ack.Sequence != 2 {
		t.Fatalf("publish after refused batch: %+v", ack)
	}
}

// TestAtomicBatchTimeout: a batch idle past the timeout is abandoned with
// an advisory, and its commit is then refused as incomplete.
func TestAtomicBatchTimeout(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem(), func(o *Options) { o.Batch.Timeout = 50 * time.Millisecond })
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowAtomicPublish: true})
	adv := make(chan batchAbandonedAdvisory, 1)
	unsub, _ := acc.SubscribeInternal("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.S", func(_, _, _, msg []byte) {
		var a batchAbandonedAdvisory
		_ = json.Unmarshal(msg, &a)
		adv <- a
	})
	defer unsub()
	batchReply(t, acc, "s.a", batchMsgHdr("t", 1, ""))
	select {
	case a := <-adv:
		if a.Batch != "t" || a.Reason != "timeout" || a.Type != "io.nats.jetstream.advisory.v1.stream_batch_abandoned" {
			t.Fatalf("advisory %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no abandoned advisory")
	}
	if openBatchesOf(e, "S") != 0 || e.batches.open.Load() != 0 || e.batches.staged.Load() != 0 {
		t.Fatal("an abandoned batch is still held")
	}
	if _, ack := batchReply(t, acc, "s.a", batchMsgHdr("t", 2, "1")); ack.Error == nil || ack.Error.ErrCode != api.CodeAtomicPublishIncompleteBatch {
		t.Fatalf("commit after timeout: %+v", ack)
	}
	if n := streamMsgs(t, acc, "S"); n != 0 {
		t.Fatalf("%d messages", n)
	}
}

// TestAtomicBatchLimitsInside: discard-old limits evict inside the batch
// as nats-server's do, and a rollup of the whole stream as first message
// replaces what was there.
func TestAtomicBatchLimitsInside(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowAtomicPublish: true, MaxMsgs: 2, AllowRollup: true})
	for i := 1; i <= 4; i++ {
		commit := ""
		if i == 4 {
			commit = "1"
		}
		batchReply(t, acc, "s.a", batchMsgHdr("b", i, commit))
	}
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.State.Msgs != 2 || info.State.FirstSeq != 3 || info.State.LastSeq != 4 {
		t.Fatalf("state %+v", info.State)
	}
	batchReply(t, acc, "s.a", batchMsgHdr("r", 1, "", api.HeaderRollup, "all"))
	if _, ack := batchReply(t, acc, "s.b", batchMsgHdr("r", 2, "1", api.HeaderRollup, "all")); ack.Error == nil {
		t.Fatalf("second rollup all in a batch accepted: %+v", ack)
	}
	batchReply(t, acc, "s.a", batchMsgHdr("r2", 1, "", api.HeaderRollup, "all"))
	if _, ack := batchReply(t, acc, "s.b", batchMsgHdr("r2", 2, "1")); ack.Error != nil || ack.Sequence != 6 {
		t.Fatalf("rollup batch: %+v", ack)
	}
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.State.Msgs != 2 || info.State.FirstSeq != 5 {
		t.Fatalf("after rollup %+v", info.State)
	}
}

// TestAtomicBatchCrash: crash images taken after every commit while
// batches are committed hold each batch whole or not at all, and every
// acknowledged batch whole.
func TestAtomicBatchCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	e, acc, _ := engineOn(t, st)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowAtomicPublish: true})
	type image struct {
		fs    *vfs.MemFS
		acked []string // batches acknowledged before the image
	}
	var mu sync.Mutex
	var acked []string
	var images []image
	e.file.onCommit = func() {
		if err := st.Sync(); err != nil {
			t.Errorf("sync: %v", err)
			return
		}
		mu.Lock()
		images = append(images, image{fs: fs.CrashClone(vfs.CrashCloneCfg{}), acked: append([]string(nil), acked...)})
		mu.Unlock()
	}
	const size = 5
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for n := range 6 {
				id := fmt.Sprintf("w%d-%d", w, n)
				for i := 1; i <= size; i++ {
					commit := ""
					if i == size {
						commit = "1"
					}
					acc.Publish(fmt.Sprintf("s.%d", w), "", batchMsgHdr(id, i, commit), []byte(id))
				}
				// A plain publish after the batch: its ack says the batch
				// before it was applied and committed.
				if ack := publish(t, acc, fmt.Sprintf("s.%d", w), nil, []byte("sync")); ack.Error != nil {
					t.Errorf("publish: %v", ack.Error)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	e.file.onCommit = nil
	if t.Failed() {
		return
	}
	for i, img := range images {
		_, acc2, closeAll := openEngine(t, img.fs)
		counts := map[string]int{}
		var info api.StreamInfoResponse
		acc2.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			var resp api.MsgGetResponse
			acc2.apiCall(t, "$JS.API.STREAM.MSG.GET.S", api.MsgGetRequest{Seq: seq}, &resp)
			if resp.Error == nil && string(resp.Message.Data) != "sync" {
				counts[string(resp.Message.Data)]++
			}
		}
		for id, n := range counts {
			if n != size {
				t.Fatalf("image %d: batch %s has %d of %d messages", i, id, n, size)
			}
		}
		for _, id := range img.acked {
			if counts[id] != size {
				t.Fatalf("image %d: acknowledged batch %s lost", i, id)
			}
		}
		closeAll()
	}
	t.Logf("%d crash images", len(images))
}

// TestClusterAtomicBatchOneEntry: on an in-process three-node cluster an
// atomic batch of an R3 stream is one raft entry, and every replica holds
// the same records after it.
func TestClusterAtomicBatchOneEntry(t *testing.T) {
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 2, acc)
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.B", api.StreamConfig{Name: "B", Subjects: []string{"b.>"}, Replicas: 3, AllowAtomicPublish: true}, &resp)
	if resp.Error != nil {
		t.Fatalf("create: %v", resp.Error)
	}
	asg := waitAssigned(t, nodes, "A", "B")
	g := asg.group()
	var lead *testNode
	waitForCond(t, "a partition leader", func() bool { lead = leaderOf(nodes, g); return lead != nil })
	// A plain publish first, so the leader's term is settled.
	if ack := publishOnce(t, acc, "b.x", "plain"); ack.Error != nil {
		t.Fatalf("publish: %v", ack.Error)
	}
	const n = 30
	for i := 1; i < n; i++ {
		acc.Publish("b.a", "", batchMsgHdr("big", i, ""), []byte(strconv.Itoa(i)))
	}
	before := lead.groups[g].LastIndex()
	_, ack := batchReply(t, acc, "b.a", batchMsgHdr("big", n, "1"))
	after := lead.groups[g].LastIndex()
	if ack.Error != nil || ack.Sequence != n+1 || ack.BatchSize != n {
		t.Fatalf("commit ack %+v", ack)
	}
	if after != before+1 {
		t.Fatalf("the batch took raft entries %d..%d, want one", before+1, after)
	}
	want := streamDigest(t, lead.st, asg.ID)
	for _, nd := range nodes {
		waitForCond(t, nd.name+" caught up", func() bool {
			d, ok := replicaDigest(nd.st, asg.ID)
			return ok && bytes.Equal(d, want)
		})
	}
}

// replicaDigest is streamDigest for a replica that may not hold the
// stream yet: ok is false until it does.
func replicaDigest(st *store.Store, id uint64) (d []byte, ok bool) {
	var buf bytes.Buffer
	err := st.ScanMsgs(id, 0, ^uint64(0), func(m *store.Message) error {
		fmt.Fprintf(&buf, "%d %s %d %x %x;", m.Seq, m.Subject, m.Time, m.Header, m.Data)
		return nil
	})
	if err != nil {
		return nil, false
	}
	info, err := st.LoadStream(id)
	if err != nil {
		return nil, false
	}
	fmt.Fprintf(&buf, "state %+v", info.State)
	return buf.Bytes(), true
}
