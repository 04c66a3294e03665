package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// steadyRaft gives the groups the production timing (250 ms heartbeat
// and election timeouts, 150 ms lease) instead of the test cluster's
// faster one, so that a loaded machine does not move leaderships under
// a test that wants every request answered.
func steadyRaft(c *raft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 250*time.Millisecond, 250*time.Millisecond, 150*time.Millisecond
}

func steadyTweak(_ *Options, c *raft.Config) {
	if c != nil {
		steadyRaft(c)
	}
}

// soak reports whether the long variants run (CONTRAIL_SOAK=1).
func soak() bool { return os.Getenv("CONTRAIL_SOAK") == "1" }

// reply is one message answering a request: its headers, the subject it
// asks answers on (a delivery's ack subject), and its body.
type reply struct {
	hdr, reply, body []byte
}

var inboxes atomic.Uint64

// callWithin sends a request through acc and waits up to timeout for the
// first answer; ok is false if none came (a leaderless cluster is silent).
func callWithin(acc *fakeAccount, subj string, hdr, body []byte, timeout time.Duration) (reply, bool) {
	ch := make(chan reply, 1)
	inbox := fmt.Sprintf("_INBOX.fault.%d", inboxes.Add(1))
	unsub, _ := acc.SubscribeInternal(inbox, func(_, rsubj, h, msg []byte) {
		select {
		case ch <- reply{bytes.Clone(h), bytes.Clone(rsubj), bytes.Clone(msg)}:
		default:
		}
	})
	defer unsub()
	acc.Publish(subj, inbox, hdr, body)
	select {
	case r := <-ch:
		return r, true
	case <-time.After(timeout):
		return reply{}, false
	}
}

// digestsOf waits until every node's digest of account's stream name is
// the same and returns it.
func digestsOf(t *testing.T, nodes []*testNode, account, name string) StreamDigest {
	t.Helper()
	var ds []StreamDigest
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds = ds[:0]
		var errs []string
		for _, nd := range nodes {
			d, err := nd.e.StreamDigest(account, name)
			if err != nil {
				errs = append(errs, err.Error())
			}
			ds = append(ds, d)
		}
		same := len(errs) == 0
		for _, d := range ds {
			same = same && d.Hash == ds[0].Hash && d.ConfigHash == ds[0].ConfigHash
		}
		if same {
			return ds[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas differ: %+v %v", ds, errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitMetaLeader waits until some node may decide meta operations, and
// returns it.
func waitMetaLeader(t *testing.T, nodes []*testNode) (ml *testNode) {
	t.Helper()
	waitForCond(t, "meta leader", func() bool {
		for _, nd := range nodes {
			if nd.e.cl.metaLeader() {
				ml = nd
				return true
			}
		}
		return false
	})
	return ml
}

// createClustered creates cfg on a cluster, asking again while the meta
// group is settling (an unanswered create has an unknown fate; creating
// the same configuration again is not an error).
func createClustered(t *testing.T, acc *fakeAccount, cfg api.StreamConfig) {
	t.Helper()
	body, _ := json.Marshal(cfg)
	waitForCond(t, "stream "+cfg.Name+" created", func() bool {
		r, ok := callWithin(acc, "$JS.API.STREAM.CREATE."+cfg.Name, nil, body, 2*time.Second)
		if !ok {
			return false
		}
		var resp api.StreamCreateResponse
		if err := json.Unmarshal(r.body, &resp); err != nil || resp.Error != nil {
			t.Fatalf("create %s: %s", cfg.Name, r.body)
		}
		return true
	})
}

// TestClusterPowerLossAll loses power on every node of an in-process
// cluster at once, while writing: each node's Pebble store is on a
// crashable memory FS, and the crash image keeps only what was synced
// (plus a random part of what was not, as a real disk may). The cluster
// restarts on the images; every write acknowledged before the crash must
// be there, once, and the replicas must agree. Repeated (more under
// CONTRAIL_SOAK=1).
func TestClusterPowerLossAll(t *testing.T) {
	rounds := 3
	if soak() {
		rounds = 20
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	fss := []*vfs.MemFS{vfs.NewCrashableMem(), vfs.NewCrashableMem(), vfs.NewCrashableMem()}
	acked := map[string]uint64{} // msg id → seq, over every round
	sent := map[string]bool{}
	var stop func()
	next := 0
	for round := range rounds {
		acc := newFakeAccount("A")
		nodes := startTestClusterOn(t, []vfs.FS{fss[0], fss[1], fss[2]}, 2, acc, steadyTweak)
		stop = func() {
			for _, nd := range nodes {
				nd.stop()
			}
		}
		waitMetaLeader(t, nodes)
		if round == 0 {
			createClustered(t, acc, api.StreamConfig{Name: "P", Subjects: []string{"p.>"}, Replicas: 3, Duplicates: time.Hour})
		}
		// Everything acknowledged so far is there, once, in order.
		checkPowerLoss(t, nodes, acc, acked, sent)
		// Write for a random while, then crash every node at once.
		var mu sync.Mutex
		roundAcked := map[string]uint64{}
		quit := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-quit:
					return
				default:
				}
				id := fmt.Sprintf("m%06d", next)
				next++
				mu.Lock()
				sent[id] = true
				mu.Unlock()
				r, ok := callWithin(acc, "p.x", []byte("NATS/1.0\r\nNats-Msg-Id: "+id+"\r\n\r\n"), []byte(id), 2*time.Second)
				if !ok {
					continue
				}
				var ack api.PubAckResponse
				if json.Unmarshal(r.body, &ack) == nil && ack.Error == nil && ack.PubAck != nil {
					mu.Lock()
					roundAcked[id] = ack.Sequence
					mu.Unlock()
				}
			}
		}()
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond) // a random moment, on purpose
		// The power fails: what was acknowledged by now must survive.
		mu.Lock()
		for id, seq := range roundAcked {
			acked[id] = seq
		}
		images := make([]*vfs.MemFS, len(fss))
		for i, fs := range fss {
			images[i] = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
		}
		mu.Unlock()
		close(quit)
		stop()
		wg.Wait()
		fss = images
		t.Logf("round %d: %d acknowledged in all, crash images taken", round, len(acked))
	}
	acc := newFakeAccount("A")
	nodes := startTestClusterOn(t, []vfs.FS{fss[0], fss[1], fss[2]}, 2, acc, steadyTweak)
	waitMetaLeader(t, nodes)
	checkPowerLoss(t, nodes, acc, acked, sent)
}

// checkPowerLoss reads stream P back through the API on the restarted
// cluster and checks it against what was acknowledged: every acked id at
// its sequence, no id twice, nothing unpublished, no hole; then the
// replicas' digests.
func checkPowerLoss(t *testing.T, nodes []*testNode, acc *fakeAccount, acked map[string]uint64, sent map[string]bool) {
	t.Helper()
	var info api.StreamInfoResponse
	waitForCond(t, "stream info", func() bool {
		r, ok := callWithin(acc, "$JS.API.STREAM.INFO.P", nil, nil, time.Second)
		// A fresh value each time: Unmarshal leaves fields the JSON
		// lacks alone, and an earlier 10008 would stick.
		info = api.StreamInfoResponse{}
		return ok && json.Unmarshal(r.body, &info) == nil && info.Error == nil && info.StreamInfo != nil
	})
	st := info.State
	if st.Msgs != st.LastSeq || (st.Msgs > 0 && st.FirstSeq != 1) {
		t.Fatalf("state %+v: a hole", st)
	}
	seen := map[string]uint64{}
	for seq := uint64(1); seq <= st.LastSeq; seq++ {
		var m api.MsgGetResponse
		waitForCond(t, fmt.Sprintf("message %d", seq), func() bool {
			r, ok := callWithin(acc, "$JS.API.STREAM.MSG.GET.P", nil, fmt.Appendf(nil, `{"seq":%d}`, seq), time.Second)
			m = api.MsgGetResponse{}
			return ok && json.Unmarshal(r.body, &m) == nil && !isLeaderless(m.Error)
		})
		if m.Error != nil || m.Message == nil {
			t.Fatalf("seq %d: %v (a hole in the middle)", seq, m.Error)
		}
		id := string(m.Message.Data)
		if prev, dup := seen[id]; dup {
			t.Fatalf("%s stored twice (seq %d and %d)", id, prev, seq)
		}
		if !sent[id] {
			t.Fatalf("seq %d holds %q, never published", seq, id)
		}
		seen[id] = seq
	}
	for id, seq := range acked {
		got, ok := seen[id]
		if !ok {
			t.Fatalf("%s acknowledged at seq %d, lost to the power failure (stream %+v)", id, seq, st)
		}
		if got != seq {
			t.Fatalf("%s acknowledged at seq %d, stored at %d", id, seq, got)
		}
	}
	d := digestsOf(t, nodes, "A", "P")
	if d.LastSeq < st.LastSeq {
		t.Fatalf("digest %+v behind the stream's last seq %d", d, st.LastSeq)
	}
}

// walkClock is the injected clock of the random walk: it moves only when
// the walk says so, identically for every engine.
type walkClock struct{ ns atomic.Int64 }

func (c *walkClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

// walkTarget is one side of the random walk: an R1 engine or a cluster,
// reached through its account.
type walkTarget struct {
	name string
	acc  *fakeAccount
	// leaderStream finds the stream's live copy (for expiry), which on a
	// cluster is on its partition's leader.
	leaderStream func() *stream
}

// call sends one walk request and waits for its answer. It is not
// retried: a request whose answer was lost may have been applied, and
// the walk's two sides must see the same operations.
func (w *walkTarget) call(t *testing.T, subj string, hdr, body []byte) reply {
	t.Helper()
	r, ok := callWithin(w.acc, subj, hdr, body, 10*time.Second)
	if !ok {
		t.Fatalf("%s: no answer to %s %s", w.name, subj, body)
	}
	return r
}

// TestClusterRandomWalkMatchesR1 applies one seeded sequence of
// operations (publishes with headers and message ids, deletes, purges,
// consumer creates, fetches and acks, clock jumps with the expiries they
// cause) to an R1 stream on a single engine and to an R3 stream on a
// three-node cluster: every answer must match, and at the end the R1
// store's digest must equal every replica's.
func TestClusterRandomWalkMatchesR1(t *testing.T) {
	seeds := []uint64{1, 2}
	steps := 300
	if soak() {
		seeds, steps = []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 2000
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomWalk(t, seed, steps) })
	}
}

func randomWalk(t *testing.T, seed uint64, steps int) {
	clk := &walkClock{}
	clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	withClock := func(o *Options) { o.Now = clk.now }

	e1, acc1, _ := openEngine(t, vfs.NewMem(), withClock)
	single := &walkTarget{name: "R1", acc: acc1, leaderStream: func() *stream { return attachedStream(e1, "A", "W") }}

	acc3 := newFakeAccount("A")
	nodes := startTestClusterOn(t, []vfs.FS{vfs.NewMem(), vfs.NewMem(), vfs.NewMem()}, 2, acc3,
		func(o *Options, c *raft.Config) {
			if o != nil {
				withClock(o)
			}
			if c != nil {
				steadyRaft(c)
			}
		})
	waitMetaLeader(t, nodes)
	clustered := &walkTarget{name: "R3", acc: acc3, leaderStream: func() *stream {
		for _, nd := range nodes {
			if s := attachedStream(nd.e, "A", "W"); s != nil {
				return s
			}
		}
		return nil
	}}

	cfg := api.StreamConfig{Name: "W", Subjects: []string{"w.>"}, MaxMsgsPer: 8, MaxAge: 30 * time.Minute,
		AllowMsgTTL: true, Duplicates: 5 * time.Minute}
	cfg1, cfg3 := cfg, cfg
	cfg1.Replicas, cfg3.Replicas = 1, 3
	createStream(t, acc1, cfg1)
	createClustered(t, acc3, cfg3)

	rng := newRand(seed)
	subjects := []string{"w.a", "w.b", "w.c", "w.d.e"}
	var consumers []string
	var log []string
	for step := range steps {
		var subj string
		var hdr, body []byte
		op := rng.IntN(100)
		switch {
		case op < 55: // publish
			subj = subjects[rng.IntN(len(subjects))]
			var h strings.Builder
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&h, "Nats-Msg-Id: id%d\r\n", rng.IntN(40))
			}
			if rng.IntN(4) == 0 {
				fmt.Fprintf(&h, "Nats-TTL: %ds\r\n", 60+rng.IntN(600))
			}
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&h, "X-Walk: %d\r\n", rng.Uint64())
			}
			if h.Len() > 0 {
				hdr = []byte("NATS/1.0\r\n" + h.String() + "\r\n")
			}
			body = fmt.Appendf(nil, "%d:%x", step, rng.Uint64())
		case op < 63: // delete a message
			subj = "$JS.API.STREAM.MSG.DELETE.W"
			body = fmt.Appendf(nil, `{"seq":%d,"no_erase":%v}`, 1+rng.IntN(step+1), rng.IntN(2) == 0)
		case op < 66: // purge
			subj = "$JS.API.STREAM.PURGE.W"
			switch rng.IntN(3) {
			case 0:
				body = fmt.Appendf(nil, `{"filter":%q}`, subjects[rng.IntN(len(subjects))])
			case 1:
				body = fmt.Appendf(nil, `{"keep":%d}`, rng.IntN(10))
			default:
				body = fmt.Appendf(nil, `{"filter":%q,"keep":%d}`, subjects[rng.IntN(len(subjects))], rng.IntN(3))
			}
		case op < 70 && len(consumers) < 4: // create a durable consumer
			name := fmt.Sprintf("C%d", len(consumers))
			consumers = append(consumers, name)
			subj = "$JS.API.CONSUMER.CREATE.W." + name
			cc := api.ConsumerConfig{Durable: name, AckPolicy: api.AckExplicit, AckWait: time.Hour}
			if rng.IntN(2) == 0 {
				cc.FilterSubject = subjects[rng.IntN(len(subjects))]
			}
			body, _ = json.Marshal(api.ConsumerCreateRequest{Stream: "W", Config: cc})
		case op < 88 && len(consumers) > 0: // fetch one and ack it
			name := consumers[rng.IntN(len(consumers))]
			a := walkFetchAck(t, single, name)
			b := walkFetchAck(t, clustered, name)
			if a != b {
				t.Fatalf("seed %d step %d: fetch+ack on %s: R1 %q, R3 %q\n%s", seed, step, name, a, b, strings.Join(log, "\n"))
			}
			log = append(log, fmt.Sprintf("%d fetch %s: %s", step, name, a))
			continue
		default: // move the clock; what expired goes
			clk.ns.Add(int64(time.Duration(30+rng.IntN(300)) * time.Second))
			walkExpire(t, single)
			walkExpire(t, clustered)
			log = append(log, fmt.Sprintf("%d clock %v", step, clk.now().UTC()))
			continue
		}
		a := walkAnswer(single.call(t, subj, hdr, body))
		b := walkAnswer(clustered.call(t, subj, hdr, body))
		if a != b {
			t.Fatalf("seed %d step %d: %s %s %s: R1 answered %s, R3 %s\n%s", seed, step, subj, hdr, body, a, b, strings.Join(log, "\n"))
		}
		log = append(log, fmt.Sprintf("%d %s %q %s -> %s", step, subj, hdr, body, a))
	}
	// Consumers write their state through the apply path after a
	// delivery as well as on the ack, so the last writes may still be on
	// their way on either side: wait for the two to settle on one state.
	var d1, d3 StreamDigest
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if d1, err = e1.StreamDigest("A", "W"); err != nil {
			t.Fatal(err)
		}
		d3 = digestsOf(t, nodes, "A", "W")
		if d1.Hash == d3.Hash {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: R1 digest %+v, replicas %+v\nfirst difference: %s", seed, d1, d3,
				firstDifference(t, e1, nodes[0].e, d1.ID, d3.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("seed %d: %d steps, %d messages, %d records, digest %.12s on R1 and every replica", seed, steps, d1.Msgs, d1.Records, d1.Hash)
}

// walkAnswer is an API answer without what differs by design between a
// single node and a cluster: the reply's wall-clock time and the cluster
// block.
func walkAnswer(r reply) string {
	body := r.body
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return fmt.Sprintf("%q %q", r.hdr, body) // a status, or not JSON
	}
	delete(m, "ts")
	delete(m, "cluster")
	b, _ := json.Marshal(m)
	return string(b)
}

// walkFetchAck pulls one message from consumer name (no wait) and, if
// one came, acks it and waits for the ack's confirmation. It returns the
// delivery as text (subject-free: the stream sequence and data), or the
// status that came instead.
func walkFetchAck(t *testing.T, w *walkTarget, name string) string {
	t.Helper()
	r := w.call(t, "$JS.API.CONSUMER.MSG.NEXT.W."+name, nil, []byte(`{"batch":1,"no_wait":true}`))
	if len(r.reply) == 0 {
		status, _, _ := bytes.Cut(bytes.TrimPrefix(r.hdr, []byte("NATS/1.0")), []byte("\r\n"))
		return "status" + string(status)
	}
	meta := strings.Split(string(r.reply), ".")
	// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
	seq := ""
	if len(meta) >= 9 {
		seq = meta[5] + "/" + meta[6] + "/" + meta[4]
	}
	ack := w.call(t, string(r.reply), nil, []byte("+ACK"))
	_ = ack
	return fmt.Sprintf("seq %s data %s", seq, r.body)
}

// walkExpire runs the stream's expiry work at the current walk clock and
// waits until it is applied (on a cluster, replicated).
func walkExpire(t *testing.T, w *walkTarget) {
	t.Helper()
	// Expiry is idempotent at one clock reading, so an attempt whose
	// fate is unknown (the partition's leadership moved) is repeated on
	// the stream's next leader.
	waitForCond(t, w.name+" expiry applied", func() bool {
		s := w.leaderStream()
		if s == nil {
			return false
		}
		r := s.ap.apply(&proposal{s: s, kind: propExpire})
		if r.err != nil && !isFateUnknown(r.err) {
			t.Fatalf("%s expire: %v", w.name, r.err)
		}
		return r.err == nil
	})
}

// firstDifference names the first record where two stores' copies of a
// stream differ, for a failure message.
func firstDifference(t *testing.T, a, b *Engine, ida, idb uint64) string {
	t.Helper()
	list := func(e *Engine, id uint64) []string {
		var out []string
		err := e.opts.Store.StreamRecords(id, func(k, p []byte, meta bool) error {
			if !meta {
				out = append(out, fmt.Sprintf("key %x = %x (%q)", k, p, p))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ra, rb := list(a, ida), list(b, idb)
	for i := range max(len(ra), len(rb)) {
		var x, y string
		if i < len(ra) {
			x = ra[i]
		}
		if i < len(rb) {
			y = rb[i]
		}
		if x != y {
			return fmt.Sprintf("record %d:\n  R1: %s\n  R3: %s", i, x, y)
		}
	}
	return "none"
}

// isLeaderless reports whether err is the 10008 a node sends when a
// group has no leader: a moment of the failover, to be asked again.
func isLeaderless(err *api.Error) bool {
	return err != nil && err.ErrCode == api.CodeClusterNotAvailable
}
