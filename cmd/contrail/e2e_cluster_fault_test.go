package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contrail/contrail/dataplane/store"
)

// The fault scenarios run three real nodes on loopback and check the
// same safety rules after each (checkStream): no acknowledged write
// lost, no hole in the middle, nothing that was never published, no
// duplicate, every replica with the same digest, and a durable
// consumer's ack floor never moving backwards. They are fast by default;
// CONTRAIL_SOAK=1 repeats them more and longer.

// soak reports whether the long variants run.
func soak() bool { return os.Getenv("CONTRAIL_SOAK") == "1" }

// soakOr is fast by default, long under CONTRAIL_SOAK=1.
func soakOr[T any](fast, long T) T {
	if soak() {
		return long
	}
	return fast
}

// faultStream is the stream every scenario writes.
const (
	faultStream  = "FAULTS"
	faultSubject = "faults.w"
	faultAccount = "$G" // open mode's one account
)

// ackLog records, for every writer of a scenario, what was published and
// what the cluster acknowledged, and the violations seen on the way.
type ackLog struct {
	mu    sync.Mutex
	sent  map[string]bool   // every id ever published, acknowledged or not
	acked map[string]uint64 // id → the sequence its PubAck gave
	bySeq map[uint64]string // sequence → the id acknowledged there
	bad   []string
}

func newAckLog() *ackLog {
	return &ackLog{sent: map[string]bool{}, acked: map[string]uint64{}, bySeq: map[uint64]string{}}
}

func (l *ackLog) violation(format string, args ...any) {
	l.mu.Lock()
	l.bad = append(l.bad, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *ackLog) markSent(id string) {
	l.mu.Lock()
	l.sent[id] = true
	l.mu.Unlock()
}

// record notes a PubAck. An id acknowledged at two sequences is stored
// twice; a sequence acknowledged for two ids is a lie to one of them.
func (l *ackLog) record(id string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.acked[id]; ok && prev != seq {
		l.bad = append(l.bad, fmt.Sprintf("%s acknowledged at seq %d and at %d", id, prev, seq))
	}
	if other, ok := l.bySeq[seq]; ok && other != id {
		l.bad = append(l.bad, fmt.Sprintf("seq %d acknowledged for %s and for %s", seq, other, id))
	}
	l.acked[id], l.bySeq[seq] = seq, id
}

func (l *ackLog) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// writer publishes ids prefix-000000, prefix-000001, ... with
// Nats-Msg-Id, each until it is acknowledged (a publish whose ack was
// lost to a fault is sent again under the same id, which the stream's
// dedup window stores once), at most rate a second.
type writer struct {
	log  *ackLog
	stop chan struct{}
	done chan struct{}
	// last is when the latest ack arrived (unix nanos).
	last atomic.Int64
}

func startWriter(t testing.TB, l *ackLog, nc *nats.Conn, prefix string, rate int) *writer {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{log: l, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		pace := time.Second / time.Duration(rate)
		for i := 0; ; i++ {
			id := fmt.Sprintf("%s-%06d", prefix, i)
			l.markSent(id)
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				ack, err := js.Publish(ctx, faultSubject, []byte(id), jetstream.WithMsgID(id),
					jetstream.WithRetryAttempts(5), jetstream.WithRetryWait(50*time.Millisecond))
				cancel()
				if err == nil {
					if ack.Stream != faultStream {
						l.violation("%s acknowledged by stream %q", id, ack.Stream)
					}
					l.record(id, ack.Sequence)
					w.last.Store(time.Now().UnixNano())
					if d := pace - time.Since(start); d > 0 {
						time.Sleep(d) // load pacing, not synchronisation
					}
					break
				}
			}
		}
	}()
	return w
}

// halt stops the writer and waits for it.
func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// progress waits until the log holds n more acknowledged writes than now.
func (l *ackLog) progress(t testing.TB, n int, what string) {
	t.Helper()
	want := l.ackCount() + n
	waitFor(t, 60*time.Second, fmt.Sprintf("%d more acknowledged writes (%s)", n, what), func() bool {
		return l.ackCount() >= want
	})
}

// ackWatch runs a durable pull consumer that fetches and acknowledges the
// stream's messages, each ack waited for (a double ack), and polls its
// info across whatever the scenario does to the nodes. The rule: an ack
// the cluster confirmed is never lost, so no info may show an ack floor
// below the floor the confirmed acks make (every sequence up to it
// confirmed), and the floor reported never moves back below it.
// Redelivery is allowed. An info floor that drops back while staying at
// or above the confirmed floor is only counted: acks a leader applied in
// memory but never confirmed may die with its leadership.
type ackWatch struct {
	log *ackLog
	mu  sync.Mutex
	// confirmed holds the sequences whose ack was confirmed; floor is the
	// highest sequence with every one up to it confirmed.
	confirmed map[uint64]bool
	floor     uint64
	// seen is the highest ack floor an info showed; backs counts infos
	// that showed less (above floor).
	seen  uint64
	backs int
	acks  int
	stop  chan struct{}
	done  chan struct{}
}

const faultConsumer = "WATCH"

func startAckWatch(t testing.TB, l *ackLog, nc *nats.Conn) *ackWatch {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var cons jetstream.Consumer
	waitFor(t, startTimeout, "durable consumer created", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err = js.CreateOrUpdateConsumer(ctx, faultStream, jetstream.ConsumerConfig{
			Durable: faultConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second,
		})
		return err == nil
	})
	a := &ackWatch{log: l, confirmed: map[uint64]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			default:
			}
			batch, err := cons.Fetch(20, jetstream.FetchMaxWait(500*time.Millisecond))
			if err == nil {
				for msg := range batch.Messages() {
					md, err := msg.Metadata()
					if err != nil {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					if msg.DoubleAck(ctx) == nil {
						a.confirm(md.Sequence.Stream)
					}
					cancel()
				}
			}
			a.check(cons)
		}
	}()
	return a
}

func (a *ackWatch) confirm(seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acks++
	a.confirmed[seq] = true
	for a.confirmed[a.floor+1] {
		delete(a.confirmed, a.floor+1)
		a.floor++
	}
}

// check reads the consumer's ack floor and holds it against the floor the
// confirmed acks made before the request was sent.
func (a *ackWatch) check(cons jetstream.Consumer) {
	a.mu.Lock()
	want := a.floor
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		return
	}
	a.observe(info, want)
}

func (a *ackWatch) observe(info *jetstream.ConsumerInfo, want uint64) {
	got := info.AckFloor.Stream
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case got < want:
		leader := ""
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		a.log.violation("consumer %s: ack floor %d, but every ack up to %d was confirmed (info from leader %q: delivered %d, %d ack pending, %d redelivered)",
			faultConsumer, got, want, leader, info.Delivered.Stream, info.NumAckPending, info.NumRedelivered)
	case got < a.seen:
		a.backs++
	}
	a.seen = max(a.seen, got)
}

func (a *ackWatch) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// faultCluster is a scenario's cluster: three nodes, optionally behind
// link proxies, an R3 stream, and a connection a writer uses.
type faultCluster struct {
	t     *testing.T
	nodes []*clusterNode
	mesh  *linkMesh // nil without proxies
	log   *ackLog
	nc    *nats.Conn
	js    jetstream.JetStream
	// broken holds nodes whose store the scenario corrupted and which are
	// not repaired: their digest must be refused as corrupt, never given.
	broken map[*clusterNode]bool
}

// startFaultCluster starts three nodes (behind proxies if proxied) and
// creates the R3 stream.
func startFaultCluster(t *testing.T, proxied bool, args ...string) *faultCluster {
	t.Helper()
	fc := &faultCluster{t: t, log: newAckLog()}
	var o clusterOpts
	if len(args) > 0 {
		o.args = func(int, string) []string { return args }
	}
	if proxied {
		fc.mesh, o.dialAddr = newLinkMesh(t, 3)
	}
	fc.nodes = startCluster(t, 3, o)
	waitMesh(t, fc.nodes)
	fc.nc, fc.js = clusterJS(t, clusterURLs(fc.nodes))
	createR3(t, fc.js, jetstream.StreamConfig{Name: faultStream, Subjects: []string{"faults.>"}, Replicas: 3,
		Duplicates: 10 * time.Minute})
	streamLeader(t, fc.js, fc.nodes, faultStream)
	return fc
}

// index is the position of cn among the nodes.
func (fc *faultCluster) index(cn *clusterNode) int {
	for i, n := range fc.nodes {
		if n == cn {
			return i
		}
	}
	fc.t.Fatalf("%s is not a node of the cluster", cn.ID)
	return -1
}

// connectTo is a connection to the listed nodes only, reconnecting among
// them (connect_urls may teach it the others).
func (fc *faultCluster) connectTo(nodes ...*clusterNode) *nats.Conn {
	nc := connect(fc.t, clusterURLs(nodes), reconnecting())
	fc.t.Cleanup(nc.Close)
	return nc
}

// use makes nc the connection the scenario's own requests go through.
func (fc *faultCluster) use(nc *nats.Conn) {
	js, err := jetstream.New(nc)
	if err != nil {
		fc.t.Fatal(err)
	}
	fc.nc, fc.js = nc, js
}

// follower is the first node that is not l.
func (fc *faultCluster) follower(l *clusterNode) *clusterNode {
	for _, cn := range fc.nodes {
		if cn != l {
			return cn
		}
	}
	fc.t.Fatal("no node but the leader")
	return nil
}

// leader is the stream's leader now.
func (fc *faultCluster) leader() *clusterNode {
	l, _ := streamLeader(fc.t, fc.js, fc.nodes, faultStream)
	return l
}

// pause and resume stop and continue a node's process (SIGSTOP/SIGCONT).
// A paused node is resumed when the test ends, so that it can stop.
func pause(t testing.TB, cn *clusterNode) {
	t.Helper()
	cn.signal(syscall.SIGSTOP)
	p := cn.proc
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
}
func resume(t testing.TB, cn *clusterNode) { t.Helper(); cn.signal(syscall.SIGCONT) }

// streamDigest is one node's /digestz for the fault stream.
type streamDigest struct {
	ID       uint64 `json:"id"`
	Msgs     uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Records  int    `json:"records"`
	Hash     string `json:"hash"`
	Config   string `json:"config_hash"`
	Applied  uint64 `json:"applied"`
}

func (cn *clusterNode) digest() (streamDigest, error) {
	var d streamDigest
	err := fetchJSON(cn.MonURL+"/digestz?acc="+url.QueryEscape(faultAccount)+"&stream="+faultStream, &d)
	return d, err
}

// checkStream stops nothing: the scenario has stopped its writers and
// brought every node back. It reads the whole stream with an ordered
// consumer and checks the rules against the log, then waits until every
// node's digest of the stream is the same.
func (fc *faultCluster) checkStream() {
	t := fc.t
	t.Helper()
	l := fc.log
	l.mu.Lock()
	bad := append([]string(nil), l.bad...)
	l.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("violations while writing:\n%s", strings.Join(bad, "\n"))
	}
	// The last sequence: once every node is back, entries whose fate was
	// unknown have committed or never will; read until it stops moving.
	var info *jetstream.StreamInfo
	readTo := uint64(0)
	seen := map[string]uint64{}
	bySeq := map[uint64]string{}
	for {
		_, info = streamLeader(t, fc.js, fc.nodes, faultStream)
		if info.State.LastSeq <= readTo {
			break
		}
		fc.readRange(readTo+1, info.State.LastSeq, seen, bySeq)
		readTo = info.State.LastSeq
	}
	st := info.State
	// No holes: nothing in these scenarios deletes, so the stream holds
	// every sequence from 1 to its last.
	if st.FirstSeq != 1 || st.Msgs != st.LastSeq {
		t.Errorf("stream state first %d last %d msgs %d: a hole", st.FirstSeq, st.LastSeq, st.Msgs)
	}
	for seq := uint64(1); seq <= st.LastSeq; seq++ {
		if _, ok := bySeq[seq]; !ok {
			t.Errorf("seq %d missing from the read-back (a hole in the middle)", seq)
			break
		}
	}
	l.mu.Lock()
	var lost []string
	for id, seq := range l.acked {
		got, ok := seen[id]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s (acked at %d)", id, seq))
		case got != seq:
			t.Errorf("%s acknowledged at seq %d, stored at %d", id, seq, got)
		}
	}
	for id := range seen {
		if !l.sent[id] {
			t.Errorf("%s was never published but is stored", id)
		}
	}
	acked, sent := len(l.acked), len(l.sent)
	l.mu.Unlock()
	if len(lost) > 0 {
		sort.Strings(lost)
		t.Errorf("%d acknowledged writes lost: %s", len(lost), strings.Join(lost[:min(len(lost), 10)], ", "))
	}
	t.Logf("%d published, %d acknowledged, %d stored", sent, acked, len(seen))
	fc.checkDigests(st.LastSeq)
}

// readRange reads [from, to] with an ordered consumer into seen (id →
// seq) and bySeq, failing on a duplicate.
func (fc *faultCluster) readRange(from, to uint64, seen map[string]uint64, bySeq map[uint64]string) {
	t := fc.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := fc.js.OrderedConsumer(ctx, faultStream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		t.Fatalf("ordered consumer from %d: %v", from, err)
	}
	// One iterator for the whole range: an ordered consumer's Next is a
	// Fetch of one, and each Fetch resets it onto a new consumer (a
	// create and a round trip per message, minutes for a few thousand).
	it, err := cons.Messages()
	if err != nil {
		t.Fatalf("ordered consumer from %d: %v", from, err)
	}
	defer it.Stop()
	for seq := from; seq <= to; {
		msg, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				fc.logReplicas()
				t.Fatalf("reading back at seq %d of %d: %v", seq, to, err)
			}
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		s := md.Sequence.Stream
		if s < seq {
			continue // a restarted ordered consumer may repeat; it is the same record
		}
		id := string(msg.Data())
		if msg.Headers().Get(jetstream.MsgIDHeader) != id {
			t.Errorf("seq %d: payload %q under msg id %q", s, id, msg.Headers().Get(jetstream.MsgIDHeader))
		}
		if prev, dup := seen[id]; dup {
			t.Fatalf("%s stored twice (seq %d and %d)", id, prev, s)
		}
		seen[id], bySeq[s] = s, id
		seq = s + 1
	}
}

// logReplicas logs what each node holds of the stream and what the
// leader says of it, for a read-back that stalls: whether a replica's
// records or the stream's consumers explain the silence.
func (fc *faultCluster) logReplicas() {
	t := fc.t
	for _, cn := range fc.nodes {
		d, err := cn.digest()
		t.Logf("%s (running %v): digest %+v, err %v", cn.ID, cn.running(), d, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := fc.js.Stream(ctx, faultStream)
	if err != nil {
		t.Logf("stream info: %v", err)
		return
	}
	info := s.CachedInfo()
	t.Logf("stream info: leader %+v, state %+v", info.Cluster, info.State)
}

// checkDigests waits until every node has applied the stream up to last
// and all hold the same records.
func (fc *faultCluster) checkDigests(last uint64) {
	t := fc.t
	t.Helper()
	var ds []streamDigest
	var errs []error
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, errs = ds[:0], errs[:0]
		for _, cn := range fc.nodes {
			d, err := cn.digest()
			if fc.broken[cn] {
				if !cn.running() {
					continue // stopped itself on the corruption
				}
				if err == nil || !strings.Contains(err.Error(), "corrupt") {
					t.Fatalf("%s: corrupt store, yet its digest answer is %+v, %v", cn.ID, d, err)
				}
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", cn.ID, err))
			}
			ds = append(ds, d)
		}
		same := len(errs) == 0
		for _, d := range ds {
			same = same && d.Hash == ds[0].Hash && d.Config == ds[0].Config && d.LastSeq == last
		}
		if same {
			t.Logf("digests equal on every node with a sound store (%d of %d): last seq %d, %d records, hash %.12s",
				len(ds), len(fc.nodes), last, ds[0].Records, ds[0].Hash)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas differ after 30s (want last seq %d): %+v %v", last, ds, errors.Join(errs...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finish stops the writers and the ack watcher, checks the rules, and
// checks the watcher's floor once more from the settled cluster.
func (fc *faultCluster) finish(ws []*writer, aw *ackWatch) {
	for _, w := range ws {
		w.halt()
	}
	if aw != nil {
		aw.halt()
	}
	fc.checkStream()
	if aw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var floor uint64
		waitFor(fc.t, startTimeout, "consumer info", func() bool {
			c, err := fc.js.Consumer(ctx, faultStream, faultConsumer)
			if err != nil {
				return false
			}
			floor = c.CachedInfo().AckFloor.Stream
			return true
		})
		aw.mu.Lock()
		want, acks, backs := aw.floor, aw.acks, aw.backs
		aw.mu.Unlock()
		if floor < want {
			fc.t.Errorf("consumer ack floor %d after the faults, every ack up to %d was confirmed", floor, want)
		}
		fc.t.Logf("consumer: %d acks confirmed, confirmed floor %d, ack floor %d; %d infos showed an unconfirmed floor drop back",
			acks, want, floor, backs)
	}
}

// TestClusterFaults runs the fault scenarios.
func TestClusterFaults(t *testing.T) {
	t.Run("LeaderKills", testLeaderKills)
	t.Run("PowerLossAll", testPowerLossAll)
	t.Run("PauseTwoKillOne", testPauseTwoKillOne)
	t.Run("PartitionMinority", testPartitionMinority)
	t.Run("PartitionNoMajority", testPartitionNoMajority)
	t.Run("StepdownStormPartition", testStepdownStorm)
	t.Run("SlowLinks", testSlowLinks)
	t.Run("WipeThenKillLeader", testWipeThenKillLeader)
	t.Run("CorruptFollower", testCorruptFollower)
	t.Run("TruncateFollowerWAL", testTruncateFollowerWAL)
	t.Run("DivergentFollower", testDivergentFollower)
	t.Run("RepairKills", testRepairKills)
	t.Run("ElectionStormStarved", testElectionStormStarved)
}

// (k) a follower's copy of the stream diverges behind raft's back (a
// message rewritten in its store while it was down, as a bug or a bad
// disk would): the digest check finds it, and the node replaces its copy
// of the partition from the others while writes go on (handing the
// leadership over first if it leads the partition again by then).
func testDivergentFollower(t *testing.T) {
	fc := startFaultCluster(t, false, "--digest-interval", "1s")
	w := startWriter(t, fc.log, fc.nc, "k", 300)
	fc.log.progress(t, 100, "before the divergence")
	l := fc.leader()
	victim := fc.follower(l)
	d, err := l.digest()
	if err != nil {
		t.Fatal(err)
	}
	victim.terminate(t)
	st, err := store.Open(store.Options{Dir: filepath.Join(victim.DataDir, "jetstream")})
	if err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	// Message 5 rewritten: the state summary still agrees, so whether
	// the victim is a follower or leads again when the check runs, only
	// the digest tells its copy from the others.
	b.PutMsg(d.ID, &store.Message{Seq: 5, Subject: "faults.stray", Data: []byte("never published"), Time: 1})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	victim.restart(t)
	back := time.Now()
	waitFor(t, clusterTimeout(), victim.ID+" repaired", func() bool {
		return strings.Contains(victim.proc.out.String(), "repair done")
	})
	t.Logf("%s repaired %v after its restart", victim.ID, time.Since(back).Round(time.Millisecond))
	logged := false
	for _, cn := range fc.nodes {
		logged = logged || strings.Contains(cn.proc.out.String(), "diverges from the majority")
	}
	if !logged {
		t.Errorf("no node logged the divergence")
	}
	fc.log.progress(t, 50, victim.ID+" repaired")
	t.Logf("writes went on %v after the restart", time.Since(back).Round(time.Millisecond))
	fc.finish([]*writer{w}, nil)
}

// (a) kill -9 the stream's leader repeatedly while writing.
func testLeaderKills(t *testing.T) {
	fc := startFaultCluster(t, false)
	w := startWriter(t, fc.log, fc.nc, "a", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, 100, "before the first kill")
	for i := range soakOr(2, 6) {
		l := fc.leader()
		t.Logf("round %d: killing leader %s", i, l.ID)
		l.kill(t)
		fc.log.progress(t, 100, "after killing "+l.ID)
		l.restart(t)
		fc.log.progress(t, 50, l.ID+" back")
	}
	fc.finish([]*writer{w}, aw)
}

// (b) every node is killed at a random moment while writing, then all
// restart; repeated. kill -9 keeps the OS page cache, so this checks the
// process crash only; the in-process crashable-FS test covers power loss.
func testPowerLossAll(t *testing.T) {
	fc := startFaultCluster(t, false)
	w := startWriter(t, fc.log, fc.nc, "b", 300)
	fc.log.progress(t, 50, "before the first crash")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range soakOr(3, 10) {
		order := rng.Perm(3)
		for _, j := range order {
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond) // a random moment, on purpose
			fc.nodes[j].kill(t)
		}
		t.Logf("round %d: all killed (order %v), %d acknowledged so far", i, order, fc.log.ackCount())
		again := make([]*clusterNode, 0, 3)
		for _, j := range rng.Perm(3) {
			again = append(again, fc.nodes[j])
		}
		restartAll(t, again) // a node alone is not healthy: start them together
		fc.log.progress(t, 50, fmt.Sprintf("after restart %d", i))
	}
	fc.finish([]*writer{w}, nil)
}

// (c) the #7567 sequence: pause two nodes, kill -9 the third (the
// leader), resume the two, bring the third back.
func testPauseTwoKillOne(t *testing.T) {
	fc := startFaultCluster(t, false)
	w := startWriter(t, fc.log, fc.nc, "c", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	for i := range soakOr(1, 5) {
		fc.log.progress(t, 100, "before the pause")
		l := fc.leader()
		var paused []*clusterNode
		for _, cn := range fc.nodes {
			if cn != l {
				pause(t, cn)
				paused = append(paused, cn)
			}
		}
		time.Sleep(300 * time.Millisecond) // the leader keeps taking writes it cannot commit
		l.kill(t)
		for _, cn := range paused {
			resume(t, cn)
		}
		fc.log.progress(t, 100, fmt.Sprintf("round %d: after resuming, %s dead", i, l.ID))
		l.restart(t)
		fc.log.progress(t, 50, l.ID+" back")
	}
	fc.finish([]*writer{w}, aw)
}

// (d) partition the leader, a minority, from the others while writing:
// writes go on in the majority; the minority says nothing definite (any
// ack it gives must be a committed write, which the read-back checks);
// after the heal it catches up.
func testPartitionMinority(t *testing.T) {
	fc := startFaultCluster(t, true)
	l := fc.leader()
	var majority []*clusterNode
	for _, cn := range fc.nodes {
		if cn != l {
			majority = append(majority, cn)
		}
	}
	// The test's own requests go to the majority side too.
	fc.use(fc.connectTo(majority...))
	w := startWriter(t, fc.log, fc.nc, "d", 300)
	// A writer on the minority node only: its acks are checked like any.
	minNC := connect(t, l.URL)
	t.Cleanup(minNC.Close)
	wm := startWriter(t, fc.log, minNC, "dm", 50)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, 100, "before the partition")
	fc.mesh.isolate(fc.index(l))
	cut := time.Now()
	fc.log.progress(t, 200, "majority side, "+l.ID+" cut off")
	// The isolated node must stop leading: its last ack is from before
	// it could have noticed (lease 150 ms, plus an in-flight round).
	if last := time.Unix(0, wm.last.Load()); last.After(cut.Add(2 * time.Second)) {
		t.Errorf("%s acknowledged a write %v after being cut off", l.ID, last.Sub(cut))
	}
	if nl := fc.leader(); nl == l {
		t.Errorf("%s still reported as leader by the majority", l.ID)
	}
	fc.mesh.healAll()
	fc.log.progress(t, 100, "after the heal")
	fc.finish([]*writer{w, wm}, aw)
}

// (e) partition every node from every other: no majority, so no write
// may be acknowledged after the cut (beyond those already in flight);
// after the heal writes resume.
func testPartitionNoMajority(t *testing.T) {
	fc := startFaultCluster(t, true)
	w := startWriter(t, fc.log, fc.nc, "e", 300)
	fc.log.progress(t, 100, "before the partition")
	for i := range fc.nodes {
		fc.mesh.isolate(i)
	}
	time.Sleep(time.Second) // let writes committed before the cut be answered
	before := fc.log.ackCount()
	time.Sleep(soakOr(2*time.Second, 10*time.Second)) // a window in which nothing may commit
	if after := fc.log.ackCount(); after != before {
		t.Errorf("%d writes acknowledged with no majority", after-before)
	}
	fc.mesh.healAll()
	fc.log.progress(t, 100, "after the heal")
	fc.finish([]*writer{w}, nil)
}

// (h) a stepdown storm while a minority is partitioned away:
// STREAM.LEADER.STEPDOWN in a loop.
func testStepdownStorm(t *testing.T) {
	fc := startFaultCluster(t, true)
	victim := fc.nodes[rand.IntN(3)]
	var rest []*clusterNode
	for _, cn := range fc.nodes {
		if cn != victim {
			rest = append(rest, cn)
		}
	}
	fc.use(fc.connectTo(rest...))
	w := startWriter(t, fc.log, fc.nc, "h", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, 100, "before the storm")
	fc.mesh.isolate(fc.index(victim))
	stepdowns, answered := soakOr(10, 40), 0
	acks := fc.log.ackCount()
	var refusals []string
	for range stepdowns {
		msg, err := fc.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+faultStream, nil, 2*time.Second)
		switch {
		case err != nil:
			refusals = append(refusals, err.Error())
		case strings.Contains(string(msg.Data), `"error"`):
			refusals = append(refusals, string(msg.Data))
		default:
			answered++
		}
		time.Sleep(100 * time.Millisecond) // a storm, not a flood
	}
	t.Logf("%d of %d stepdowns succeeded with %s cut off, %d writes acknowledged meanwhile; refusals: %q",
		answered, stepdowns, victim.ID, fc.log.ackCount()-acks, refusals)
	fc.mesh.healAll()
	fc.log.progress(t, 100, "after the storm and heal")
	fc.finish([]*writer{w}, aw)
}

// Every link slowed to 100±50 ms each way while writing: safety must
// hold whatever the delay does to leadership (the raft timing is tuned
// for a LAN: a 150 ms lease against round trips of 100-300 ms).
func testSlowLinks(t *testing.T) {
	fc := startFaultCluster(t, true)
	w := startWriter(t, fc.log, fc.nc, "s", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, 100, "before the delay")
	fc.mesh.slowAll(100*time.Millisecond, 50*time.Millisecond)
	acks := fc.log.ackCount()
	time.Sleep(soakOr(3*time.Second, 20*time.Second)) // a window of slow links
	t.Logf("%d writes acknowledged in the slow window", fc.log.ackCount()-acks)
	fc.mesh.healAll()
	fc.log.progress(t, 100, "after the heal")
	fc.finish([]*writer{w}, aw)
}

// (g) wipe one node's data directory and restart it under the same id,
// then kill the leader at once: the wiped node rejoins as a new
// incarnation in repair and must not vote, so it cannot help elect a
// leader that lacks acknowledged writes; nothing is lost once the leader
// is back.
func testWipeThenKillLeader(t *testing.T) {
	fc := startFaultCluster(t, false)
	w := startWriter(t, fc.log, fc.nc, "g", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, 150, "before the wipe")
	l := fc.leader()
	wiped := fc.follower(l)
	wiped.kill(t)
	if err := os.RemoveAll(wiped.DataDir); err != nil {
		t.Fatal(err)
	}
	wiped.restart(t)
	l.kill(t)
	t.Logf("%s wiped and restarted, leader %s killed, %d acknowledged", wiped.ID, l.ID, fc.log.ackCount())
	time.Sleep(time.Second) // the window in which a wrong election would happen
	l.restart(t)
	fc.log.progress(t, 100, l.ID+" back")
	fc.finish([]*writer{w}, aw)
}

// (f) corrupt one follower's store while it is stopped (bytes flipped in
// its Pebble tables), restart it: it must notice (a checksum fails: the
// store refuses every read from then on) and must not serve bad data;
// the others go on, agree, and nothing is lost. The node is not repaired
// automatically yet (it stays out until an operator wipes its store,
// which the wipe scenario covers).
func testCorruptFollower(t *testing.T) {
	fc := startFaultCluster(t, false)
	w := startWriter(t, fc.log, fc.nc, "f", 300)
	fc.log.progress(t, 300, "before the corruption")
	l := fc.leader()
	victim := fc.follower(l)
	victim.terminate(t)
	flipped := corruptTables(t, filepath.Join(victim.DataDir, "jetstream"))
	t.Logf("%s stopped; flipped bytes in %v", victim.ID, flipped)
	p, err := startProc(t, victim.ID, contrailBin, victim.args...)
	if err != nil {
		t.Fatal(err)
	}
	victim.proc = p
	// A node that meets corruption may stop itself (raft cannot persist
	// its term on a poisoned store and panics): fail-stop is allowed,
	// serving bad data is not.
	p.signaled.Store(true)
	t.Cleanup(p.stop)
	fc.log.progress(t, 100, victim.ID+" restarted on a corrupt store")
	fc.broken = map[*clusterNode]bool{victim: true}
	fc.finish([]*writer{w}, nil)
	if !strings.Contains(p.out.String(), "corruption") {
		t.Errorf("%s logged nothing about the corruption", victim.ID)
	}
	t.Logf("%s after the check: running %v", victim.ID, p.running())
}

// corruptTables flips a few bytes in the middle of every Pebble table
// under dir and returns their names.
func corruptTables(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 256 {
			continue
		}
		for i := len(b) / 4; i < len(b)/4+8; i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.Base(name))
	}
	return out
}

// (f) the WAL variant: kill -9 a follower, cut the tail off its newest
// Pebble WAL, restart it. The records cut were synced (they back raft
// appends this node acknowledged), but a cut at a record boundary looks
// like a torn write to Pebble, which replays to the last whole record.
// With one node hit nothing may be lost and the node must catch up.
func testTruncateFollowerWAL(t *testing.T) {
	fc := startFaultCluster(t, false)
	w := startWriter(t, fc.log, fc.nc, "t", 300)
	fc.log.progress(t, 200, "before the truncation")
	l := fc.leader()
	victim := fc.follower(l)
	victim.kill(t)
	logs, err := filepath.Glob(filepath.Join(victim.DataDir, "jetstream", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL in %s: %v", victim.DataDir, err)
	}
	sort.Strings(logs)
	newest := logs[len(logs)-1]
	fi, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	cut := min(fi.Size()/3, 64<<10)
	if err := os.Truncate(newest, fi.Size()-cut); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed; cut %d of %d bytes off %s", victim.ID, cut, fi.Size(), filepath.Base(newest))
	victim.restart(t)
	fc.log.progress(t, 100, victim.ID+" back on a truncated WAL")
	fc.finish([]*writer{w}, nil)
}
