package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/tier"
	"github.com/contrail/contrail/dataplane/tier/tiertest"
)

// faultStore wraps a real object store: down makes every call fail,
// hang makes calls wait for their context, truncate cuts reads short,
// before runs before each put (an upload in flight), and after runs
// after each successful put and delete (a crash point).
type faultStore struct {
	tier.ObjectStore
	down, hang, truncate atomic.Bool
	before               func(key string)
	after                func(op, key string)
}

var errDown = errors.New("object store down")

func (f *faultStore) fault(ctx context.Context) error {
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *faultStore) Put(ctx context.Context, key string, data []byte) error {
	if f.before != nil {
		f.before(key)
	}
	if err := f.fault(ctx); err != nil {
		return err
	}
	if err := f.ObjectStore.Put(ctx, key, data); err != nil {
		return err
	}
	if f.after != nil {
		f.after("put", key)
	}
	return nil
}

func (f *faultStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := f.fault(ctx); err != nil {
		return nil, err
	}
	b, err := f.ObjectStore.GetRange(ctx, key, off, n)
	if err == nil && f.truncate.Load() && len(b) > 1 {
		// A body cut short that the transport did not notice: the
		// checksums must.
		b = append(b[:len(b)/2:len(b)/2], make([]byte, len(b)-len(b)/2)...)
	}
	return b, err
}

func (f *faultStore) Delete(ctx context.Context, key string) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	if err := f.ObjectStore.Delete(ctx, key); err != nil {
		return err
	}
	if f.after != nil {
		f.after("delete", key)
	}
	return nil
}

// TestColdTierStoreDown: with the object store down publishes go on,
// tiering backs off and reports the budget exceeded, cold reads fail
// within their bound (and never return wrong bytes when bodies come back
// truncated); once the store is back tiering catches up.
func TestColdTierStoreDown(t *testing.T) {
	dir, err := tier.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fst := &faultStore{ObjectStore: dir}
	const size, segment, budget = 1000, 16 << 10, 48 << 10
	e, acc, _ := openEngine(t, vfs.NewMem(), withTier(fst, segment, budget), func(o *Options) {
		o.Tier.ReadTimeout = 300 * time.Millisecond
	})
	createStream(t, acc, api.StreamConfig{Name: "D", Subjects: []string{"d"}, Storage: api.FileStorage})
	for i := 1; i <= 100; i++ {
		publish(t, acc, "d", nil, coldPayload(i, size))
	}
	waitForCond(t, "some segments", func() bool { return e.TierStatus().Segments > 0 && e.TierStatus().LocalBytes <= budget })
	fst.down.Store(true)
	for i := 101; i <= 300; i++ {
		if ack := publish(t, acc, "d", nil, coldPayload(i, size)); ack.Error != nil {
			t.Fatalf("publish with the store down: %v", ack.Error)
		}
	}
	waitForCond(t, "over budget reported", func() bool {
		ts := e.TierStatus()
		return ts.OverBudget && ts.UploadErrors > 0 && ts.LastError != ""
	})
	// A cold message the cache does not hold fails after the bound.
	for _, k := range listObjects(t, dir) {
		e.tiering.cache.Forget(k)
	}
	began := time.Now()
	if r := getMsg(t, acc, "D", 1); r.Error == nil {
		t.Fatal("cold read succeeded with the store down")
	}
	if el := time.Since(began); el > 3*time.Second {
		t.Fatalf("cold read took %v with a 300ms bound", el)
	}
	fst.down.Store(false)
	fst.truncate.Store(true)
	if r := getMsg(t, acc, "D", 1); r.Error == nil {
		t.Fatal("cold read of a truncated block succeeded")
	}
	fst.truncate.Store(false)
	waitForCond(t, "tiering to catch up", func() bool {
		ts := e.TierStatus()
		return !ts.OverBudget && ts.LocalBytes <= budget
	})
	for i := 1; i <= 300; i++ {
		r := getMsg(t, acc, "D", uint64(i))
		if r.Error != nil || !bytes.Equal(r.Message.Data, coldPayload(i, size)) {
			t.Fatalf("seq %d after recovery: %v", i, r.Error)
		}
	}
}

// TestColdTierRemovedWhileUploading: messages deleted while the segment
// holding them uploads are not live in it once it commits. They stay
// deleted, the rest read back, and the counts agree: the commit's
// shortcut (nothing removed since the seal's view) must not apply. The
// one deleted with erase is in the uploaded object: the segment is
// rewritten without it.
func TestColdTierRemovedWhileUploading(t *testing.T) {
	dir, err := tier.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fst := &faultStore{ObjectStore: dir}
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fst.before = func(string) {
		once.Do(func() { close(reached); <-release })
	}
	const n, size, segment, budget = 200, 1000, 16 << 10, 48 << 10
	e, acc, _ := openEngine(t, vfs.NewMem(), withTier(fst, segment, budget))
	createStream(t, acc, api.StreamConfig{Name: "U", Subjects: []string{"u"}, Storage: api.FileStorage})
	for i := 1; i <= n; i++ {
		if ack := publish(t, acc, "u", nil, coldPayload(i, size)); ack.Error != nil {
			t.Fatal(ack.Error)
		}
	}
	<-reached // the first segment, from seq 1, is being uploaded
	gone := []uint64{2, 5}
	for _, seq := range gone {
		var del api.SuccessResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.U", api.MsgDeleteRequest{Seq: seq, NoErase: seq == 2}, &del)
		if del.Error != nil {
			t.Fatal(del.Error)
		}
	}
	close(release)
	waitForCond(t, "local bytes within budget", func() bool {
		ts := e.TierStatus()
		return ts.LocalBytes <= budget && ts.Segments > 0
	})
	s := e.account("A").lookup("U")
	firstSeg := func() (store.Segment, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, cs := s.segmentLocked(1)
		if cs == nil {
			return store.Segment{}, false
		}
		return cs.seg, true
	}
	// The erased message's segment is rewritten (the first commit marked
	// it), and no object holds the erased body any more.
	erased := coldPayload(5, size)
	waitForCond(t, "the erased message's segment rewritten", func() bool {
		seg, ok := firstSeg()
		if !ok || seg.Erased || e.TierStatus().Rewrites == 0 {
			return false
		}
		for _, k := range listObjects(t, dir) {
			if b, err := dir.GetRange(context.Background(), k, 0, -1); err != nil || bytes.Contains(b, erased) {
				return false
			}
		}
		return true
	})
	seg, _ := firstSeg()
	if seg.First != 1 || seg.Last < 5 || seg.Live != seg.Last-seg.First-1 {
		t.Fatalf("first segment %+v: want seqs 2 and 5 in its range and not live", seg)
	}
	s.mu.Lock()
	coldMsgs := s.mu.cold.msgs
	s.mu.Unlock()
	if si := streamInfo(t, acc, "U"); si.State.Msgs != n-2 || si.State.NumDeleted != 2 {
		t.Fatalf("state %+v", si.State)
	}
	var live uint64
	for i := 1; i <= n; i++ {
		r := getMsg(t, acc, "U", uint64(i))
		if slices.Contains(gone, uint64(i)) {
			if r.Error == nil || r.Error.ErrCode != 10037 {
				t.Fatalf("deleted seq %d reads back: %+v", i, r)
			}
			continue
		}
		if r.Error != nil || !bytes.Equal(r.Message.Data, coldPayload(i, size)) {
			t.Fatalf("seq %d: %+v", i, r.Error)
		}
		live++
	}
	if coldMsgs > live {
		t.Fatalf("%d cold messages counted, %d held", coldMsgs, live)
	}
}

// coldImage is a power cut: the node's file system as synced, the
// bucket as it was, and how many publishes were acknowledged then.
type coldImage struct {
	what   string
	fs     *vfs.MemFS
	bucket string
	acked  int
	purged bool
}

// copyDir copies the bucket as it is: files may come and go meanwhile
// (uploads and deletes of the running node), and one that went is not
// copied. It runs in the engine's hooks, so it reports with t.Error.
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		src, err := os.Open(p)
		if err != nil {
			return nil // deleted meanwhile
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, src)
		return errors.Join(err, out.Close())
	})
	if err != nil {
		t.Error(err)
	}
}

// TestColdTierCrashPoints cuts power at every step of tiering: after
// every commit of the apply path (the intent, the manifest with the
// stubs, a segment dropped, a pending record forgotten), after every
// upload and after every object delete. Each image, reopened with the
// bucket as it was, must hold every acknowledged message byte for byte,
// and once its deleter has run, no object the manifest does not name.
func TestColdTierCrashPoints(t *testing.T) {
	bucket := t.TempDir()
	dir, err := tier.OpenDir(bucket)
	if err != nil {
		t.Fatal(err)
	}
	fst := &faultStore{ObjectStore: dir}
	fs := vfs.NewCrashableMem()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	const size, segment, budget = 1000, 8 << 10, 24 << 10
	e, acc, closeAll := engineOn(t, st, withTier(fst, segment, budget))
	createStream(t, acc, api.StreamConfig{Name: "K", Subjects: []string{"k.*"}, Storage: api.FileStorage})
	var mu sync.Mutex
	var images []coldImage
	var acked atomic.Int64
	var purged atomic.Bool
	snap := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		img := coldImage{what: fmt.Sprintf("%s #%d", what, len(images)), fs: fs.CrashClone(vfs.CrashCloneCfg{}),
			bucket: t.TempDir(), acked: int(acked.Load()), purged: purged.Load()}
		copyDir(t, bucket, img.bucket)
		images = append(images, img)
	}
	fst.after = func(op, _ string) { snap("after " + op) }
	e.file.onCommit = func() {
		if e.tiering != nil {
			snap("after commit")
		}
	}
	const n = 120
	for i := 1; i <= n; i++ {
		if ack := publish(t, acc, fmt.Sprintf("k.%d", i%3), nil, coldPayload(i, size)); ack.Error != nil {
			t.Fatal(ack.Error)
		}
		acked.Store(int64(i))
	}
	waitForCond(t, "tiering within budget", func() bool { return e.TierStatus().LocalBytes <= budget })
	var pr api.StreamPurgeResponse
	purged.Store(true)
	acc.apiCall(t, "$JS.API.STREAM.PURGE.K", api.StreamPurgeRequest{Sequence: 60}, &pr)
	if pr.Error != nil {
		t.Fatal(pr.Error)
	}
	waitForCond(t, "objects of purged segments deleted", func() bool {
		n := 0
		_ = st.PendingObjects(0, 1<<partitionShift, func(store.PendingObject) error { n++; return nil })
		return n == 0
	})
	closeAll()
	t.Logf("%d crash images", len(images))
	for _, img := range images {
		checkColdImage(t, img, size)
		if t.Failed() {
			t.Fatalf("at %s", img.what)
		}
	}
}

func checkColdImage(t *testing.T, img coldImage, size int) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: "js", FS: img.fs})
	if err != nil {
		t.Fatalf("%s: reopen: %v", img.what, err)
	}
	dir, err := tier.OpenDir(img.bucket)
	if err != nil {
		t.Fatal(err)
	}
	// A budget no stream reaches: the image is checked as it is, and the
	// deleter cleans up what it left.
	e, acc, closeAll := engineOn(t, st, withTier(dir, 8<<10, 1<<30))
	defer closeAll()
	waitForCond(t, img.what+": pending objects deleted", func() bool {
		n := 0
		_ = st.PendingObjects(0, 1<<partitionShift, func(store.PendingObject) error { n++; return nil })
		return n == 0
	})
	si := streamInfo(t, acc, "K")
	if si.State.LastSeq < uint64(img.acked) {
		t.Errorf("%s: last seq %d, %d were acknowledged", img.what, si.State.LastSeq, img.acked)
	}
	first := uint64(1)
	if img.purged {
		first = max(si.State.FirstSeq, 1)
	} else if si.State.FirstSeq != 1 || si.State.Msgs != si.State.LastSeq {
		t.Errorf("%s: state %+v, want every message from 1", img.what, si.State)
	}
	for seq := first; seq <= si.State.LastSeq; seq++ {
		r := getMsg(t, acc, "K", seq)
		if r.Error != nil || !bytes.Equal(r.Message.Data, coldPayload(int(seq), size)) {
			t.Errorf("%s: seq %d: %v", img.what, seq, r.Error)
			return
		}
	}
	// Every object left is one the manifest names.
	named := map[string]bool{}
	s := e.account("A").lookup("K")
	s.mu.Lock()
	for _, cs := range s.mu.cold.segs {
		named[cs.seg.Key] = true
	}
	s.mu.Unlock()
	for _, k := range listObjects(t, dir) {
		if !named[k] {
			t.Errorf("%s: object %s left behind", img.what, k)
		}
	}
	if len(named) != len(listObjects(t, dir)) {
		t.Errorf("%s: manifest names %d objects, the bucket holds %d", img.what, len(named), len(listObjects(t, dir)))
	}
}

// tieredR3 starts a three-node test cluster tiering to one directory
// and creates the R3 file stream name on subject subj.
func tieredR3(t *testing.T, segment, budget int64, name, subj string) (*tier.Dir, *fakeAccount, []*testNode, *assignment) {
	t.Helper()
	dir, err := tier.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	acc := newFakeAccount("A")
	fss := []vfs.FS{vfs.NewMem(), vfs.NewMem(), vfs.NewMem()}
	nodes := startTestClusterOn(t, fss, 2, acc, func(o *Options, _ *raft.Config) {
		if o != nil {
			withTier(dir, segment, budget)(o)
		}
	})
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE."+name, api.StreamConfig{Name: name, Subjects: []string{subj}, Replicas: 3, Storage: api.FileStorage}, &resp)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	return dir, acc, nodes, waitAssigned(t, nodes, "A", name)
}

// publishR3 publishes messages 1..n of coldPayload to subj, each sent
// again under its message id until acknowledged (a publish may fall into
// a leadership move).
func publishR3(t *testing.T, acc *fakeAccount, subj string, n, size int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		hdr := []byte(fmt.Sprintf("NATS/1.0\r\nNats-Msg-Id: id-%d\r\n\r\n", i))
		for try := 0; ; try++ {
			b, ok := acc.tryRequest(subj, hdr, coldPayload(i, size), 2*time.Second)
			var ack api.PubAckResponse
			if ok && len(b) > 0 && json.Unmarshal(b, &ack) == nil && ack.Error == nil {
				break
			}
			if try == 10 {
				t.Fatalf("publish %d never acknowledged", i)
			}
		}
	}
}

// TestColdTierReplicated: in a three-node cluster the partition leader
// tiers an R3 stream through the partition's apply path, so every
// replica holds the same manifest and stubs; after the leader stops, the
// new one reads cold messages from the same objects, and its deleter
// empties the bucket after a purge.
func TestColdTierReplicated(t *testing.T) {
	const size, segment, budget = 1000, 16 << 10, 48 << 10
	dir, acc, nodes, asg := tieredR3(t, segment, budget, "R", "r")
	const n = 200
	publishR3(t, acc, "r", n, size)
	lead := leaderOf(nodes, asg.group())
	waitForCond(t, "the leader to tier", func() bool {
		ts := lead.e.TierStatus()
		return ts.Segments > 2 && ts.LocalBytes <= budget
	})
	id := lead.e.account("A").lookup("R").id
	waitForCond(t, "replicas identical", func() bool {
		d := streamDigest(t, nodes[0].st, id)
		return bytes.Equal(d, streamDigest(t, nodes[1].st, id)) && bytes.Equal(d, streamDigest(t, nodes[2].st, id))
	})
	lead.stop()
	var next *testNode
	waitForCond(t, "a new leader", func() bool {
		next = leaderOf(nodes, asg.group())
		return next != nil && next != lead
	})
	for seq := uint64(1); seq <= n; seq++ {
		var r api.MsgGetResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.GET.R", api.MsgGetRequest{Seq: seq}, &r)
		if r.Error != nil || r.Message == nil || !bytes.Equal(r.Message.Data, coldPayload(int(seq), size)) {
			t.Fatalf("seq %d on the new leader: %+v", seq, r.Error)
		}
	}
	var pr api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.R", api.StreamPurgeRequest{}, &pr)
	if pr.Error != nil {
		t.Fatal(pr.Error)
	}
	waitForCond(t, "the bucket to empty", func() bool { return len(listObjects(t, dir)) == 0 })
}

// TestColdTierErasedRestart: a cold message deleted with erase while the
// object store is down marks its segment in the manifest, in the
// delete's batch; after a restart with the store back, the segment is
// rewritten without the message's body and the old object deleted.
func TestColdTierErasedRestart(t *testing.T) {
	dir, err := tier.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fault := &faultStore{ObjectStore: dir}
	fs := vfs.NewMem()
	const n, size = 300, 1000
	const segment, budget = 32 << 10, 64 << 10
	opts := func(o *Options) {
		withTier(fault, segment, budget)(o)
		o.Tier.ReadTimeout = 200 * time.Millisecond
	}
	e, acc, closeAll := openEngine(t, fs, opts)
	createStream(t, acc, api.StreamConfig{Name: "E", Subjects: []string{"e"}, Storage: api.FileStorage})
	for i := 1; i <= n; i++ {
		if ack := publish(t, acc, "e", nil, coldPayload(i, size)); ack.Error != nil {
			t.Fatal(ack.Error)
		}
	}
	waitForCond(t, "local bytes within budget", func() bool {
		ts := e.TierStatus()
		return ts.LocalBytes <= budget && ts.Segments > 1
	})
	segOf := func(e *Engine, seq uint64) store.Segment {
		s := e.account("A").lookup("E")
		s.mu.Lock()
		defer s.mu.Unlock()
		_, cs := s.segmentLocked(seq)
		if cs == nil {
			t.Fatalf("seq %d is not cold", seq)
		}
		return cs.seg
	}
	before := segOf(e, 2)
	if before.Erased {
		t.Fatal("segment marked erased before any delete")
	}

	fault.down.Store(true)
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.E", api.MsgDeleteRequest{Seq: 2}, &del)
	if del.Error != nil {
		t.Fatal(del.Error)
	}
	if !segOf(e, 1).Erased || e.TierStatus().Rewrites != 0 {
		t.Fatalf("after the erase with the store down: segment %+v, %d rewrites", segOf(e, 1), e.TierStatus().Rewrites)
	}
	closeAll()

	fault.down.Store(false)
	e, acc, closeAll = openEngine(t, fs, opts)
	defer closeAll()
	waitForCond(t, "the erased message's segment rewritten after the restart", func() bool {
		ts := e.TierStatus()
		return ts.Rewrites >= 1 && !segOf(e, 1).Erased && len(listObjects(t, dir)) == ts.Segments
	})
	after := segOf(e, 1)
	if after.Erased || after.Key == before.Key || after.Live != before.Live-1 {
		t.Fatalf("rewritten segment %+v, was %+v", after, before)
	}
	for _, k := range listObjects(t, dir) {
		if k == before.Key {
			t.Fatalf("the object holding the erased body (%s) is still there", k)
		}
	}
	c := tier.NewCache(dir, tier.CacheOptions{})
	ref := tier.Ref{Key: after.Key, Size: after.Size, IndexOff: after.IndexOff}
	if _, err := c.Read(context.Background(), ref, 2); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("seq 2 in the rewritten object: %v", err)
	}
	for _, seq := range []uint64{1, 3} {
		if r := getMsg(t, acc, "E", seq); r.Error != nil || !bytes.Equal(r.Message.Data, coldPayload(int(seq), size)) {
			t.Fatalf("seq %d after the rewrite: %+v", seq, r.Error)
		}
	}
	if r := getMsg(t, acc, "E", 2); r.Error == nil {
		t.Fatal("erased message still readable")
	}
}

// TestColdTierOrphanScan runs the orphan scan against versitygw: an
// object of this node that no record names is removed once old enough;
// an upload in flight (put, not committed yet), another node's object,
// a key of another shape and every committed segment stay.
func TestColdTierOrphanScan(t *testing.T) {
	srv := tiertest.StartT(t, "bkt")
	s3, err := tier.OpenS3(context.Background(), tier.S3Options{Bucket: "bkt", Prefix: "nodes", Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	// The first upload is held once its object is in the store.
	held, release := make(chan string, 1), make(chan struct{})
	var once sync.Once
	fault := &faultStore{ObjectStore: s3, after: func(op, key string) {
		if op != "put" || !strings.HasSuffix(key, ".seg") {
			return
		}
		once.Do(func() {
			held <- key
			<-release
		})
	}}
	const age = time.Second
	e, acc, closeAll := openEngine(t, vfs.NewMem(), func(o *Options) {
		withTier(fault, 32<<10, 64<<10)(o)
		o.Tier.Node = "n1"
		o.Tier.OrphanInterval, o.Tier.OrphanAge, o.Tier.OrphanPage = 20*time.Millisecond, age, 2
	})
	defer closeAll()
	releaseHeld := sync.OnceFunc(func() { close(release) })
	defer releaseHeld() // before closeAll: a failing test must not leave the mover held
	ctx := context.Background()
	put := func(key string) {
		t.Helper()
		if err := s3.Put(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	orphan := tier.SegmentKey("n1", 77, 1, 1, 10, "0123456789abcdef")
	foreign := tier.SegmentKey("n2", 77, 1, 1, 10, "0123456789abcdef")
	odd := "n1/notes.txt"
	put(orphan)
	put(foreign)
	put(odd)

	createStream(t, acc, api.StreamConfig{Name: "O", Subjects: []string{"o"}, Storage: api.FileStorage})
	// Publishes go on while the upload is held (it holds the mover, not
	// the apply path).
	for i := 1; i <= 200; i++ {
		if ack := publish(t, acc, "o", nil, coldPayload(i, 1000)); ack.Error != nil {
			t.Fatal(ack.Error)
		}
	}
	var inflight string
	select {
	case inflight = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no upload started")
	}
	waitForCond(t, "the orphan removed", func() bool {
		keys := listObjects(t, s3)
		return !slices.Contains(keys, orphan)
	})
	keys := listObjects(t, s3)
	for _, k := range []string{inflight, foreign, odd} {
		if !slices.Contains(keys, k) {
			t.Fatalf("%s removed by the orphan scan; left %v", k, keys)
		}
	}
	if n := e.TierStatus().Orphans; n != 1 {
		t.Fatalf("%d orphans deleted, want 1", n)
	}
	releaseHeld()
	waitForCond(t, "the held upload committed", func() bool {
		s := e.account("A").lookup("O")
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, cs := range s.mu.cold.segs {
			if cs.seg.Key == inflight {
				return true
			}
		}
		return false
	})
	// Once every object is past the safety age, full passes of the scan
	// still leave every committed segment.
	committed := time.Now()
	passes := e.tiering.orphanPasses.Load()
	waitForCond(t, "two full scans with every object past the safety age", func() bool {
		if time.Since(committed) < age {
			passes = e.tiering.orphanPasses.Load()
			return false
		}
		return e.tiering.orphanPasses.Load() >= passes+2
	})
	if n := e.TierStatus().Orphans; n != 1 || !slices.Contains(listObjects(t, s3), inflight) {
		t.Fatalf("after more scans: %d orphans deleted, the committed segment there: %v", n, slices.Contains(listObjects(t, s3), inflight))
	}
}

// TestColdTierFollowersShrink: every replica of an R3 stream compacts
// the ranges a segment commit replaced by stubs, as the leader does, so
// a follower's store shrinks with the leader's instead of keeping the
// old bodies until Pebble happens to compact them.
func TestColdTierFollowersShrink(t *testing.T) {
	const size, segment, budget = 4000, 64 << 10, 256 << 10
	_, acc, nodes, asg := tieredR3(t, segment, budget, "F", "f")
	publishR3(t, acc, "f", 1000, size) // 4 MB: 16 budgets
	lead := leaderOf(nodes, asg.group())
	waitForCond(t, "the leader to tier", func() bool {
		ts := lead.e.TierStatus()
		return ts.LocalBytes <= budget && ts.UploadBacklog == 0
	})
	s := lead.e.account("A").lookup("F")
	s.mu.Lock()
	floor := s.coldFloorLocked()
	s.mu.Unlock()
	// Each store holds the raft log and memtables besides the messages,
	// so it is well over three budgets and every node forces compactions
	// of what it tiered, up to the last committed segment.
	for _, nd := range nodes {
		waitForCond(t, nd.name+" to compact the tiered ranges", func() bool {
			return nd.e.tiering.compactedTo.Load() == floor-1
		})
		t.Logf("%s (leader %v): %d compactions, store %d bytes", nd.name, nd == lead, nd.e.tiering.compactions.Load(), nd.st.DiskUsage())
	}
}

// TestColdTierOrphansOfAnotherMember: the leader of a partition removes
// orphaned objects of its replicated streams whichever member made them
// (a former leader that may never come back), and leaves a non-member's
// alone. (Another member's objects of R1 streams are that member's to
// judge: TestColdTierOrphanScan.)
func TestColdTierOrphansOfAnotherMember(t *testing.T) {
	dir, err := tier.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	acc := newFakeAccount("A")
	next := 0
	nodes := startTestClusterOn(t, []vfs.FS{vfs.NewMem(), vfs.NewMem(), vfs.NewMem()}, 2, acc, func(o *Options, _ *raft.Config) {
		if o == nil {
			return
		}
		next++
		withTier(dir, 64<<10, 1<<30)(o)
		o.Tier.Node = fmt.Sprintf("n%d", next) // as the server name names a real node's
		o.Tier.OrphanInterval, o.Tier.OrphanAge, o.Tier.OrphanPage = 20*time.Millisecond, 300*time.Millisecond, 10
	})
	waitClusterReady(t, nodes)
	var resp api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.CREATE.R", api.StreamConfig{Name: "R", Subjects: []string{"r"}, Replicas: 3, Storage: api.FileStorage}, &resp)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	asg := waitAssigned(t, nodes, "A", "R")
	lead := leaderOf(nodes, asg.group())
	if lead == nil {
		t.Fatal("no partition leader")
	}
	other := "n1"
	if lead.name == other {
		other = "n2"
	}
	ctx := context.Background()
	put := func(key string) string {
		t.Helper()
		if err := dir.Put(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
		return key
	}
	formerLeaders := put(tier.SegmentKey(other, asg.ID, 1, 1, 10, "0123456789abcdef"))
	outsiders := put(tier.SegmentKey("zz", asg.ID, 1, 1, 10, "0123456789abcdef"))
	waitForCond(t, "the former leader's orphan removed", func() bool {
		return !slices.Contains(listObjects(t, dir), formerLeaders)
	})
	passes := lead.e.tiering.orphanPasses.Load()
	waitForCond(t, "two more full scans", func() bool { return lead.e.tiering.orphanPasses.Load() >= passes+2 })
	if keys := listObjects(t, dir); !slices.Contains(keys, outsiders) {
		t.Fatalf("a non-member's object removed; left %v", keys)
	}
}
