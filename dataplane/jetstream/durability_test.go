package jetstream

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// TestCrashKeepsAckedPublishes publishes from several goroutines through
// the whole apply path on a crash-simulating FS, crashes (keeping only
// synced data), reopens, and finds every acknowledged message intact.
func TestCrashKeepsAckedPublishes(t *testing.T) {
	fs := vfs.NewCrashableMem()
	_, acc, _ := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})

	var mu sync.Mutex
	acked := map[uint64]string{}
	var wg sync.WaitGroup
	var stop atomic.Bool
	enough := make(chan struct{})
	var once sync.Once
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				data := fmt.Sprintf("w%d-%d", w, i)
				ack := publish(t, acc, fmt.Sprintf("s.%d", w), nil, []byte(data))
				if ack.Error != nil {
					return
				}
				mu.Lock()
				acked[ack.Sequence] = data
				if len(acked) >= 400 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	<-enough
	mu.Lock()
	want := make(map[uint64]string, len(acked))
	for k, v := range acked {
		want[k] = v
	}
	mu.Unlock()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	stop.Store(true)
	wg.Wait()

	_, acc2, _ := openEngine(t, crashed)
	for seq, data := range want {
		var resp api.MsgGetResponse
		acc2.apiCall(t, "$JS.API.STREAM.MSG.GET.S", api.MsgGetRequest{Seq: seq}, &resp)
		if resp.Error != nil || string(resp.Message.Data) != data {
			t.Fatalf("acked seq %d lost or changed after crash: %+v", seq, resp)
		}
	}
	var info api.StreamInfoResponse
	acc2.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.Error != nil || info.State.Msgs < uint64(len(want)) {
		t.Fatalf("state after crash: %+v (acked %d)", info.State, len(want))
	}
}

// TestFailedSyncFailsPublish: when fsync fails the publisher gets an
// error, never a PubAck, and later publishes fail too instead of being
// acknowledged on a store that lost writes.
func TestFailedSyncFailsPublish(t *testing.T) {
	var failing atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), failSyncs(&failing))
	_, acc, _ := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	if ack := publish(t, acc, "s", nil, []byte("ok")); ack.Error != nil || ack.Sequence != 1 {
		t.Fatalf("healthy publish: %+v", ack)
	}
	failing.Store(true)
	for i := range 3 {
		ack := publish(t, acc, "s", nil, []byte("lost"))
		// A refusal names the stream with seq 0, as nats-server's does.
		if ack.Error == nil || ack.PubAck == nil || ack.Sequence != 0 {
			t.Fatalf("publish %d acknowledged despite failed sync: %+v", i, ack)
		}
	}
}

// TestPebbleAndMemoryAgree runs one seeded random walk of publishes,
// deletes, purges and limit changes against a Pebble-backed and a
// memory-backed engine and requires identical streams afterwards.
func TestPebbleAndMemoryAgree(t *testing.T) {
	pst, err := store.Open(store.Options{Dir: "js", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	_, pacc, _ := engineOn(t, pst)
	_, macc, _ := engineOn(t, store.NewMem())
	accs := []*fakeAccount{pacc, macc}
	cfg := api.StreamConfig{Name: "W", Subjects: []string{"w.*"}, MaxMsgsPer: -1, MaxMsgs: -1, MaxBytes: -1}
	for _, a := range accs {
		createStream(t, a, cfg)
	}
	rng := newRand(42)
	for step := range 1500 {
		subj := fmt.Sprintf("w.%d", rng.IntN(12))
		switch op := rng.IntN(100); {
		case op < 70:
			data := []byte(fmt.Sprintf("m%d", step))
			for _, a := range accs {
				publish(t, a, subj, nil, data)
			}
		case op < 80:
			seq := uint64(rng.IntN(step + 1))
			for _, a := range accs {
				var r api.SuccessResponse
				a.apiCall(t, "$JS.API.STREAM.MSG.DELETE.W", api.MsgDeleteRequest{Seq: seq}, &r)
			}
		case op < 85:
			req := api.StreamPurgeRequest{Subject: subj, Keep: uint64(rng.IntN(3))}
			for _, a := range accs {
				var r api.StreamPurgeResponse
				a.apiCall(t, "$JS.API.STREAM.PURGE.W", req, &r)
			}
		default:
			next := cfg
			next.MaxMsgsPer = int64(rng.IntN(5)) - 1
			next.MaxMsgs = int64(rng.IntN(200)) - 1
			if next.MaxMsgsPer == 0 {
				next.MaxMsgsPer = -1
			}
			if next.MaxMsgs == 0 {
				next.MaxMsgs = -1
			}
			for _, a := range accs {
				var r api.StreamUpdateResponse
				a.apiCall(t, "$JS.API.STREAM.UPDATE.W", next, &r)
				if r.Error != nil {
					t.Fatalf("update: %v", r.Error)
				}
			}
		}
	}
	a, b := dump(t, pacc), dump(t, macc)
	if a != b {
		t.Fatalf("pebble and memory disagree:\npebble: %s\nmemory: %s", a, b)
	}
}

// dump renders a stream's state and every message.
func dump(t *testing.T, acc *fakeAccount) string {
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.W", nil, &info)
	st := info.State
	out := fmt.Sprintf("msgs=%d bytes=%d first=%d last=%d deleted=%d;", st.Msgs, st.Bytes, st.FirstSeq, st.LastSeq, st.NumDeleted)
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		var r api.MsgGetResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.GET.W", api.MsgGetRequest{Seq: seq}, &r)
		if r.Error == nil {
			b, _ := json.Marshal([]any{r.Message.Sequence, r.Message.Subject, string(r.Message.Data)})
			out += string(b)
		}
	}
	return out
}

// kvWant is what a key of a crash-test stream holds: no message, or the
// message with data (at seq, once acknowledged). at and expires are the
// message's time and Nats-TTL expiry (0: none) on the test's clock.
type kvWant struct {
	present     bool
	seq         uint64
	data        string
	at, expires int64
}

// kvClient is one sequential client of one stream in the crash tests, with
// its model: what every key holds after the acknowledged operations, and
// what the operation in flight (at most one: the client waits for every
// reply) changes. After a crash each key must hold one of the two, since
// the operation in flight may or may not have reached the store.
type kvClient struct {
	stream string
	prefix string // subjects are prefix + key
	cfg    api.StreamConfig
	keys   []string
	// perKey: the model knows each key's message; false for a stream
	// whose limits drop keys' messages behind the client's back.
	perKey bool

	mu       sync.Mutex
	acked    map[string]kvWant
	inflight map[string]kvWant // nil when nothing is in flight
	last     kvWant            // the newest acknowledged message
	lastKey  string
}

// kvSnap is a kvClient's model at one instant.
type kvSnap struct {
	acked, inflight map[string]kvWant
	last            kvWant
	lastKey         string
}

func (c *kvClient) snap() kvSnap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return kvSnap{acked: maps.Clone(c.acked), inflight: maps.Clone(c.inflight), last: c.last, lastKey: c.lastKey}
}

// begin records the operation about to be sent; done, that it was
// acknowledged (seq for a put).
func (c *kvClient) begin(change map[string]kvWant) {
	c.mu.Lock()
	c.inflight = change
	c.mu.Unlock()
}

func (c *kvClient) done(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, w := range c.inflight {
		if w.present {
			w.seq = seq
			c.last, c.lastKey = w, k
		}
		c.acked[k] = w
	}
	c.inflight = nil
}

// crashClock is the engine clock of the crash tests, moved only by them.
type crashClock struct{ ns atomic.Int64 }

func (c *crashClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

// crashImage is the store as a crash right after one commit would leave
// it, with the clients' models at that moment.
type crashImage struct {
	fs    *vfs.MemFS
	now   int64
	snaps []kvSnap
}

// TestCrashAtEveryCommitPoint runs KV-style workloads (max_msgs_per_subject
// 1 over several keys with puts, rollups, purges and deletes by key;
// Nats-TTL and max_age expiry; a max_msgs stream) from concurrent clients
// and takes a crash image after every commit the apply path makes (one
// per group; groups that read their own writes mid-way are among them).
// Each image is everything committed up to that point (the WAL replays a
// prefix of the commits, so every crash leaves one of these). Reopened,
// each must have:
// state summaries equal to what a scan of the messages computes; no
// sequence reused (the next publish gets a fresh one, above every
// acknowledged one); every key's acknowledged value (or the value of the
// operation in flight) as its last-by-subject message, on the right
// subject, and readable by sequence.
func TestCrashAtEveryCommitPoint(t *testing.T) {
	ops := 30
	if os.Getenv("CONTRAIL_SOAK") != "" {
		ops = 300
	}
	keys := []string{"k0", "k1", "k2", "k3", "k4"}
	clients := []*kvClient{
		{stream: "KV1", prefix: "kv1.", keys: keys, perKey: true,
			cfg: api.StreamConfig{Name: "KV1", Subjects: []string{"kv1.>"}, MaxMsgsPer: 1}},
		{stream: "KV2", prefix: "kv2.", keys: keys, perKey: true,
			cfg: api.StreamConfig{Name: "KV2", Subjects: []string{"kv2.>"}, MaxMsgsPer: 1, AllowRollup: true}},
		{stream: "TTL", prefix: "ttl.", keys: keys, perKey: true,
			cfg: api.StreamConfig{Name: "TTL", Subjects: []string{"ttl.>"}, MaxMsgsPer: 1, AllowMsgTTL: true, MaxAge: time.Hour}},
		{stream: "LIM", prefix: "lim.", keys: keys[:3],
			cfg: api.StreamConfig{Name: "LIM", Subjects: []string{"lim.>"}, MaxMsgs: 4}},
	}
	clock := &crashClock{}
	clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	fs := vfs.NewCrashableMem()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	e, acc, _ := engineOn(t, st, func(o *Options) { o.Now = clock.now })
	for _, c := range clients {
		c.acked = map[string]kvWant{}
		createStream(t, acc, c.cfg)
	}
	var mu sync.Mutex
	var images []crashImage
	e.file.onCommit = func() {
		if err := st.Sync(); err != nil {
			t.Errorf("sync for a crash image: %v", err)
			return
		}
		img := crashImage{fs: fs.CrashClone(vfs.CrashCloneCfg{}), now: clock.ns.Load()}
		for _, c := range clients {
			img.snaps = append(img.snaps, c.snap())
		}
		mu.Lock()
		images = append(images, img)
		mu.Unlock()
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { runKVClient(t, e, acc, c, clock, newRand(uint64(i+1)), ops) })
	}
	wg.Wait()
	e.file.onCommit = nil
	if t.Failed() {
		return
	}
	t.Logf("%d crash images in %v", len(images), time.Since(t0))
	for i, img := range images {
		checkCrashImage(t, fmt.Sprintf("image %d", i), img, clients)
		if t.Failed() {
			return
		}
	}
}

// runKVClient runs one client's random operations, each acknowledged
// before the next.
func runKVClient(t *testing.T, e *Engine, acc *fakeAccount, c *kvClient, clock *crashClock, rng *rand.Rand, ops int) {
	for i := range ops {
		key := c.keys[rng.IntN(len(c.keys))]
		subj := c.prefix + key
		data := fmt.Sprintf("%s-%d", subj, i)
		now := clock.ns.Load()
		put := kvWant{present: true, data: data, at: now}
		cur := c.snap().acked[key]
		switch op := rng.IntN(100); {
		case c.stream == "KV2" && op < 20: // rollup of the subject
			c.begin(map[string]kvWant{key: put})
			hdr := appendHeaderBlock(nil, "", api.HeaderRollup, "sub")
			c.done(mustAck(t, publish(t, acc, subj, hdr, []byte(data))))
		case c.stream == "KV2" && op < 35: // purge the key
			c.begin(map[string]kvWant{key: {}})
			var r api.StreamPurgeResponse
			acc.apiCall(t, "$JS.API.STREAM.PURGE."+c.stream, api.StreamPurgeRequest{Subject: subj}, &r)
			if r.Error != nil {
				t.Errorf("purge %s: %v", subj, r.Error)
				return
			}
			c.done(0)
		case c.stream == "KV2" && op < 50 && cur.present: // delete its message
			c.begin(map[string]kvWant{key: {}})
			var r api.SuccessResponse
			acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE."+c.stream, api.MsgDeleteRequest{Seq: cur.seq}, &r)
			if r.Error != nil {
				t.Errorf("delete %s seq %d: %v", subj, cur.seq, r.Error)
				return
			}
			c.done(0)
		case c.stream == "TTL" && op < 30: // time passes; what is due expires
			step := int64(61 * time.Second)
			if op < 8 {
				step = int64(time.Hour)
			}
			now += step
			change := map[string]kvWant{}
			for k, w := range c.snap().acked {
				if w.present && (w.expires != 0 && w.expires <= now || w.at <= now-int64(c.cfg.MaxAge)) {
					change[k] = kvWant{}
				}
			}
			c.begin(change)
			clock.ns.Store(now)
			s := attachedStream(e, acc.Name(), c.stream)
			if r := s.ap.apply(&proposal{s: s, kind: propExpire}); r.err != nil {
				t.Errorf("expire: %v", r.err)
				return
			}
			c.done(0)
		case c.stream == "TTL" && op < 60: // a put with a Nats-TTL
			put.expires = now + int64(time.Minute)
			c.begin(map[string]kvWant{key: put})
			hdr := appendHeaderBlock(nil, "", api.HeaderTTL, "60s")
			c.done(mustAck(t, publish(t, acc, subj, hdr, []byte(data))))
		default:
			c.begin(map[string]kvWant{key: put})
			c.done(mustAck(t, publish(t, acc, subj, nil, []byte(data))))
		}
	}
}

func mustAck(t *testing.T, ack api.PubAckResponse) uint64 {
	if ack.Error != nil {
		t.Errorf("publish: %v", ack.Error)
		return 0
	}
	return ack.Sequence
}

// attachedStream finds an attached stream by account and name.
func attachedStream(e *Engine, account, name string) *stream {
	e.mu.Lock()
	a := e.mu.accounts[account]
	e.mu.Unlock()
	return a.lookup(name)
}

// checkCrashImage reopens one crash image and checks it against the
// clients' models (see TestCrashAtEveryCommitPoint).
func checkCrashImage(t *testing.T, what string, img crashImage, clients []*kvClient) {
	st, err := store.Open(store.Options{Dir: "js", FS: img.fs})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	e, acc, closeAll := engineOn(t, st, func(o *Options) { o.Now = func() time.Time { return time.Unix(0, img.now) } })
	defer closeAll()
	for i, c := range clients {
		snap := img.snaps[i]
		s := attachedStream(e, acc.Name(), c.stream)
		if s == nil {
			t.Fatalf("%s: stream %s lost", what, c.stream)
		}
		// The summary is what the messages say.
		sum := s.snapshotState()
		var scan store.StreamState
		var newest uint64
		err := st.ScanMsgs(s.id, 0, math.MaxUint64, func(m *store.Message) error {
			if scan.Msgs == 0 {
				scan.FirstSeq, scan.FirstTime = m.Seq, m.Time
			}
			scan.Msgs++
			scan.Bytes += msgSize(m.Subject, m.Header, m.Data)
			newest = m.Seq
			return nil
		})
		if err != nil {
			t.Fatalf("%s: scan %s: %v", what, c.stream, err)
		}
		if sum.Msgs != scan.Msgs || sum.Bytes != scan.Bytes || sum.LastSeq < newest ||
			scan.Msgs > 0 && (sum.FirstSeq != scan.FirstSeq || sum.FirstTime != scan.FirstTime) ||
			scan.Msgs == 0 && sum.FirstSeq != sum.LastSeq+1 && sum != (store.StreamState{}) {
			t.Errorf("%s: %s summary %+v, its messages say %+v (newest %d)", what, c.stream, sum, scan, newest)
		}
		if snap.last.present && sum.LastSeq < snap.last.seq {
			t.Errorf("%s: %s last seq %d is behind acknowledged seq %d", what, c.stream, sum.LastSeq, snap.last.seq)
		}
		// The newest acknowledged message is there by sequence unless the
		// operation in flight changes its key (in a KV stream, a put
		// replaces it), as a newer one cannot push it out of max_msgs.
		if w := snap.last; w.present && snap.acked[snap.lastKey].seq == w.seq {
			if _, touched := snap.inflight[snap.lastKey]; !touched || !c.perKey {
				if m, ok := apiMsgGet(t, acc, c.stream, api.MsgGetRequest{Seq: w.seq}); !ok || m.Subject != c.prefix+snap.lastKey || string(m.Data) != w.data {
					t.Errorf("%s: %s acknowledged seq %d (%s %q) reads as %+v", what, c.stream, w.seq, snap.lastKey, w.data, m)
				}
			}
		}
		if c.perKey {
			for _, k := range c.keys {
				checkKey(t, what, acc, c, k, snap)
			}
		}
		// The next publish takes a fresh sequence and reads back as its
		// subject's last message.
		subj := c.prefix + c.keys[0]
		ack := publish(t, acc, subj, nil, []byte("fresh"))
		if ack.Error != nil || ack.Sequence != sum.LastSeq+1 {
			t.Errorf("%s: %s publish after the crash: %+v, want seq %d", what, c.stream, ack, sum.LastSeq+1)
		}
		if m, ok := apiMsgGet(t, acc, c.stream, api.MsgGetRequest{LastFor: subj}); !ok || m.Sequence != ack.Sequence || string(m.Data) != "fresh" || m.Subject != subj {
			t.Errorf("%s: %s last for %s after a fresh publish: %+v", what, c.stream, subj, m)
		}
	}
}

// checkKey checks one key of a reopened crash image: its last-by-subject
// message is the acknowledged one or the one in flight, on its subject,
// and the acknowledged one reads the same by sequence.
func checkKey(t *testing.T, what string, acc *fakeAccount, c *kvClient, key string, snap kvSnap) {
	subj := c.prefix + key
	m, found := apiMsgGet(t, acc, c.stream, api.MsgGetRequest{LastFor: subj})
	if found && m.Subject != subj {
		t.Errorf("%s: last for %s is a message on %s: %+v", what, subj, m.Subject, m)
		return
	}
	acked := snap.acked[key]
	isAcked := found == acked.present && (!found || m.Sequence == acked.seq && string(m.Data) == acked.data)
	fly, inFlight := snap.inflight[key]
	isFlight := inFlight && found == fly.present && (!found || string(m.Data) == fly.data && m.Sequence > acked.seq)
	if !isAcked && !isFlight {
		t.Errorf("%s: last for %s is %+v (found %v); acknowledged %+v, in flight %+v", what, subj, m, found, acked, fly)
		return
	}
	if isAcked && found {
		if b, ok := apiMsgGet(t, acc, c.stream, api.MsgGetRequest{Seq: acked.seq}); !ok || b.Subject != subj || string(b.Data) != acked.data {
			t.Errorf("%s: %s seq %d reads as %+v", what, subj, acked.seq, b)
		}
	}
}

// apiMsgGet is MSG.GET; found is false for "no message found".
func apiMsgGet(t *testing.T, acc *fakeAccount, stream string, req api.MsgGetRequest) (api.StoredMsg, bool) {
	var r api.MsgGetResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET."+stream, req, &r)
	switch {
	case r.Error != nil && r.Error.ErrCode == api.CodeNoMessageFound:
		return api.StoredMsg{}, false
	case r.Error != nil:
		t.Errorf("get %s %+v: %v", stream, req, r.Error)
		return api.StoredMsg{}, false
	}
	return *r.Message, true
}

// failSyncs fails every sync of any file while failing is set.
func failSyncs(failing *atomic.Bool) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if failing.Load() {
				return errorfs.ErrInjected
			}
		}
		return nil
	})
}

// walSyncs reports every sync of a WAL file on synced (without blocking),
// and fails it while failing is set.
func walSyncs(synced chan<- struct{}, failing *atomic.Bool) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			select {
			case synced <- struct{}{}:
			default:
			}
			if failing.Load() {
				return errorfs.ErrInjected
			}
		}
		return nil
	})
}

// lazyClock is an injected clock for lazy sync: its timers fire when the
// test says so.
type lazyClock struct {
	ns    atomic.Int64
	armed chan time.Duration // each timer's duration, as it is armed
	fire  chan time.Time     // what every armed timer waits on
}

func newLazyClock(ap *applier) *lazyClock {
	c := &lazyClock{armed: make(chan time.Duration, 16), fire: make(chan time.Time)}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	ap.now = func() time.Time { return time.Unix(0, c.ns.Load()) }
	ap.after = func(d time.Duration) <-chan time.Time {
		c.armed <- d
		return c.fire
	}
	return c
}

// within fails the test unless ch delivers before a generous deadline (a
// guard against a hang, not a wait for time to pass).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// TestLazySyncTimerSyncsIdleStream: with sync_interval, a publish followed
// by nothing at all is fsynced when the interval ends (a timer), and so
// survives a crash that keeps only synced data.
func TestLazySyncTimerSyncsIdleStream(t *testing.T) {
	mem := vfs.NewCrashableMem()
	synced := make(chan struct{}, 1)
	var failing atomic.Bool
	st, err := store.Open(store.Options{Dir: "js", FS: errorfs.Wrap(mem, walSyncs(synced, &failing))})
	if err != nil {
		t.Fatal(err)
	}
	const interval = time.Minute
	e, acc, _ := engineOn(t, st, func(o *Options) { o.SyncInterval = interval })
	clock := newLazyClock(e.file)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	// The create was the first commit: synced at once, nothing armed.
	select {
	case <-synced:
	default:
	}
	if ack := publish(t, acc, "s", nil, []byte("idle")); ack.Error != nil {
		t.Fatal(ack.Error)
	}
	if d := within(t, clock.armed, "sync timer armed by an unsynced commit"); d != interval {
		t.Fatalf("sync timer armed for %v, want %v", d, interval)
	}
	select {
	case <-synced:
		t.Fatal("the publish was synced before the interval ended")
	default:
	}
	if _, ok := getStoredMsg(t, mem.CrashClone(vfs.CrashCloneCfg{}), 1); ok {
		t.Fatal("an unsynced publish survived a crash keeping only synced data")
	}
	clock.ns.Add(int64(interval))
	clock.fire <- time.Unix(0, clock.ns.Load())
	within(t, synced, "fsync when the interval ended")
	// The sync is done once the applier is ready for the next timer or
	// job; a publish waits for it.
	if ack := publish(t, acc, "s", nil, []byte("next")); ack.Error != nil || ack.Sequence != 2 {
		t.Fatalf("publish after the timed sync: %+v", ack)
	}
	if m, ok := getStoredMsg(t, mem.CrashClone(vfs.CrashCloneCfg{}), 1); !ok || string(m.Data) != "idle" {
		t.Fatalf("after the timed sync and a crash: %+v, %v", m, ok)
	}
}

// TestLazySyncTimerFailureRefusesWrites: a failed timed fsync stops the
// applier like a failed commit: later publishes get an error, never an
// acknowledgement.
func TestLazySyncTimerFailureRefusesWrites(t *testing.T) {
	synced := make(chan struct{}, 1)
	var failing atomic.Bool
	st, err := store.Open(store.Options{Dir: "js", FS: errorfs.Wrap(vfs.NewMem(), walSyncs(synced, &failing))})
	if err != nil {
		t.Fatal(err)
	}
	e, acc, _ := engineOn(t, st, func(o *Options) { o.SyncInterval = time.Minute })
	clock := newLazyClock(e.file)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	if ack := publish(t, acc, "s", nil, []byte("a")); ack.Error != nil {
		t.Fatal(ack.Error)
	}
	within(t, clock.armed, "sync timer")
	failing.Store(true)
	clock.fire <- time.Now()
	for deadline := time.Now().Add(10 * time.Second); e.file.failed() == nil; {
		if time.Now().After(deadline) {
			t.Fatal("a failed timed sync did not stop the applier")
		}
		time.Sleep(time.Millisecond)
	}
	if ack := publish(t, acc, "s", nil, []byte("b")); ack.Error == nil {
		t.Fatalf("publish acknowledged after a failed sync: %+v", ack)
	}
}

// getStoredMsg opens a copy of a crashed store and reads stream 1's
// message seq.
func getStoredMsg(t *testing.T, fs vfs.FS, seq uint64) (store.Message, bool) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var id uint64
	if err := st.Streams(func(info store.StreamInfo) error { id = info.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	m, err := st.LoadMsg(id, seq)
	return m, err == nil
}

// TestRecoveryRepairsStaleSummary: a store whose state summary is behind
// its messages (as a build that committed part of a group without it could
// leave after a crash) is repaired at start-up from the messages, so the
// next publish takes a fresh sequence instead of overwriting another key.
func TestRecoveryRepairsStaleSummary(t *testing.T) {
	fs := vfs.NewMem()
	_, acc, closeAll := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "KV", Subjects: []string{"kv.>"}, MaxMsgsPer: 1})
	for _, k := range []string{"a", "b", "c"} {
		mustAck(t, publish(t, acc, "kv."+k, nil, []byte(k)))
	}
	closeAll()
	st, err := store.Open(store.Options{Dir: "js", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	var info store.StreamInfo
	noErr(t, st.Streams(func(i store.StreamInfo) error { info = i; return nil }))
	stale := info.State
	stale.LastSeq, stale.Msgs, stale.Bytes = 1, 1, stale.Bytes/3
	b := st.NewBatch()
	b.PutStreamState(info.ID, stale)
	noErr(t, b.Commit(true))
	b.Close()

	_, acc2, _ := engineOn(t, st)
	var si api.StreamInfoResponse
	acc2.apiCall(t, "$JS.API.STREAM.INFO.KV", nil, &si)
	if si.Error != nil || si.State.Msgs != 3 || si.State.LastSeq != 3 || si.State.Bytes != info.State.Bytes {
		t.Fatalf("after start-up: %+v, want %+v", si.State, info.State)
	}
	if ack := publish(t, acc2, "kv.d", nil, []byte("d")); ack.Sequence != 4 {
		t.Fatalf("next publish: %+v, want seq 4", ack)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		if m, ok := apiMsgGet(t, acc2, "KV", api.MsgGetRequest{LastFor: "kv." + k}); !ok || string(m.Data) != k {
			t.Errorf("last for kv.%s: %+v", k, m)
		}
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestApplierCompletesInOrder: publishes submitted by several goroutines
// at once, each to its own stream, are grouped (fewer fsyncs than
// publishes) and each goroutine's complete in submission order with
// consecutive sequences, the last one stored.
func TestApplierCompletesInOrder(t *testing.T) {
	synced := make(chan struct{}, 1<<14)
	var failing atomic.Bool
	st, err := store.Open(store.Options{Dir: "js", FS: errorfs.Wrap(vfs.NewMem(), walSyncs(synced, &failing))})
	if err != nil {
		t.Fatal(err)
	}
	e, acc, _ := engineOn(t, st)
	const workers, each = 8, 200
	streams := make([]*stream, workers)
	for w := range workers {
		name := fmt.Sprintf("S%d", w)
		createStream(t, acc, api.StreamConfig{Name: name, Subjects: []string{fmt.Sprintf("s%d", w)}})
		streams[w] = attachedStream(e, acc.Name(), name)
	}
	e.mu.Lock()
	a := e.mu.accounts[acc.Name()]
	e.mu.Unlock()
	for len(synced) > 0 {
		<-synced
	}
	var wg sync.WaitGroup
	for w, s := range streams {
		wg.Go(func() {
			var mu sync.Mutex
			var got []uint64
			var pending sync.WaitGroup
			for range each {
				pending.Add(1)
				s.ap.submit(&proposal{s: s, acct: a, kind: propMsg, subject: fmt.Sprintf("s%d", w), data: []byte("x"),
					done: func(_ *proposal, r result) {
						defer pending.Done()
						if r.err != nil {
							t.Errorf("stream %d: %v", w, r.err)
							return
						}
						mu.Lock()
						got = append(got, r.seq)
						mu.Unlock()
					}})
			}
			pending.Wait()
			for i, seq := range got {
				if seq != uint64(i+1) {
					t.Errorf("stream %d: completion %d was seq %d", w, i, seq)
					return
				}
			}
			if m, ok := apiMsgGet(t, acc, s.name(), api.MsgGetRequest{Seq: each}); !ok || m.Sequence != each {
				t.Errorf("stream %d: last publish not stored: %+v", w, m)
			}
		})
	}
	wg.Wait()
	if n := len(synced); n == 0 || n >= workers*each {
		t.Errorf("%d publishes took %d WAL fsyncs", workers*each, n)
	}
	t.Logf("%d publishes in %d fsyncs", workers*each, len(synced))
}
