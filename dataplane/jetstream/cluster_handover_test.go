package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/hashicorp/raft"
)

// splitGroup disconnects every node from every other in group g only, so
// no node can lead g; the meta group and every other partition go on.
func splitGroup(nodes []*testNode, g uint16) {
	for _, nd := range nodes {
		nd.trans[g].DisconnectAll()
	}
}

// joinGroup connects a and b again in group g.
func joinGroup(a, b *testNode, g uint16) {
	a.trans[g].Connect(raft.ServerAddress(b.name), b.trans[g])
	b.trans[g].Connect(raft.ServerAddress(a.name), a.trans[g])
}

// answer is what one API request got within a client's patience.
type answer struct {
	body []byte
	ok   bool
}

// callAsync sends one API request (never again) and delivers its first
// answer within patience, or none, on the channel it returns.
func callAsync(acc *fakeAccount, subj string, body []byte, patience time.Duration) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		r, ok := callWithin(acc, subj, nil, body, patience)
		ch <- answer{r.body, ok}
	}()
	return ch
}

// inStore reports whether nd's store holds stream id in partition g.
func inStore(t *testing.T, nd *testNode, g uint16, id uint64) bool {
	t.Helper()
	found := false
	lo, hi := uint64(g)<<partitionShift, uint64(g+1)<<partitionShift
	if err := nd.st.StreamsIn(lo, hi, func(info store.StreamInfo) error {
		found = found || info.ID == id
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// handOver runs a cluster of three with one partition, stream OLD in it,
// and splits the partition's group: its leader, cut off, can no longer
// commit. Meanwhile the test issues its meta requests; their entries
// commit in the meta group and apply on every node. Then two nodes other
// than the old leader join again, elect one of them and it takes the
// partition. It returns the nodes, OLD's id, the old leader and the
// function that joins the two.
func handOver(t *testing.T, clk *walkClock) (nodes []*testNode, acc *fakeAccount, oldID uint64, old *testNode, join func() *testNode) {
	acc = newFakeAccount("A")
	var tweak func(*Options, *raft.Config)
	if clk != nil {
		tweak = func(o *Options, _ *raft.Config) {
			if o != nil {
				o.Now = clk.now
			}
		}
	}
	nodes = startTestClusterOn(t, []vfs.FS{vfs.NewMem(), vfs.NewMem(), vfs.NewMem()}, 1, acc, tweak)
	waitClusterReady(t, nodes)
	createClustered(t, acc, api.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}, Replicas: 3})
	oldID = waitAssigned(t, nodes, "A", "OLD").ID
	old = leaderOf(nodes, 1)
	splitGroup(nodes, 1)
	join = func() *testNode {
		others := without(nodes, old)
		joinGroup(others[0], others[1], 1)
		var next *testNode
		waitForCond(t, "partition 1 led by a node not cut off", func() bool {
			next = leaderOf(others, 1)
			return next != nil
		})
		return next
	}
	return nodes, acc, oldID, old, join
}

// TestClusterMetaAnsweredAcrossHandOver: a create and a delete whose meta
// entries commit while their partition's leader is cut off are run on
// that leader, whose partition write cannot commit, so it says nothing
// (a 10008 would tell the client they did not happen; they will). The
// partition's next leader kept the entries and answers them once it has
// taken the partition: the client hears that its create and its delete
// happened, as with nats-server's new stream leader.
func TestClusterMetaAnsweredAcrossHandOver(t *testing.T) {
	nodes, acc, oldID, old, join := handOver(t, nil)
	body, _ := json.Marshal(api.StreamConfig{Name: "NEW", Subjects: []string{"new.>"}, Replicas: 3})
	createCh := callAsync(acc, "$JS.API.STREAM.CREATE.NEW", body, 8*time.Second)
	deleteCh := callAsync(acc, "$JS.API.STREAM.DELETE.OLD", nil, 8*time.Second)
	waitForCond(t, "both entries applied on every node", func() bool {
		for _, nd := range nodes {
			if nd.e.cl.catalog.lookup("A", "NEW") == nil || nd.e.cl.catalog.lookup("A", "OLD") != nil {
				return false
			}
		}
		return true
	})
	next := join()

	var created api.StreamCreateResponse
	if a := <-createCh; !a.ok || json.Unmarshal(a.body, &created) != nil || created.Error != nil || created.StreamInfo == nil || created.Config.Name != "NEW" {
		t.Fatalf("create across the hand-over: answered %v: %s", a.ok, a.body)
	}
	var deleted api.SuccessResponse
	if a := <-deleteCh; !a.ok || json.Unmarshal(a.body, &deleted) != nil || deleted.Error != nil || !deleted.Success {
		t.Fatalf("delete across the hand-over: answered %v: %s", a.ok, a.body)
	}
	if a := next.e.account("A"); a.lookup("OLD") != nil || a.lookup("NEW") == nil {
		t.Fatalf("new leader holds OLD %v, NEW %v; want only NEW", a.lookup("OLD") != nil, a.lookup("NEW") != nil)
	}
	if ack := publishOnce(t, acc, "new.x", "n1"); ack.Error != nil || ack.Stream != "NEW" || ack.Sequence != 1 {
		t.Fatalf("publish to NEW: %+v", ack)
	}
	joinGroup(old, next, 1)
	waitForCond(t, "OLD removed from every copy", func() bool {
		for _, nd := range nodes {
			if inStore(t, nd, 1, oldID) {
				return false
			}
		}
		return true
	})
}

// TestClusterTakeDropsOrphans: a stream deleted in the catalog while no
// node could lead its partition, and whose delete entry is too old to be
// run again by the time a node takes the partition, is still in the
// partition's records. The new leader finds it absent from the catalog,
// below the highest id assigned there, and removes it through the log
// instead of loading it: left loaded, it would capture its subjects
// unseen by the catalog, and a later stream on them would share them.
func TestClusterTakeDropsOrphans(t *testing.T) {
	clk := &walkClock{}
	clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	nodes, acc, oldID, old, join := handOver(t, clk)
	deleteCh := callAsync(acc, "$JS.API.STREAM.DELETE.OLD", nil, time.Second)
	waitForCond(t, "the delete applied on every node", func() bool {
		for _, nd := range nodes {
			if nd.e.cl.catalog.lookup("A", "OLD") != nil {
				return false
			}
		}
		return true
	})
	// Past what a client waits: the kept entries expire.
	clk.ns.Add(int64(2 * keepAnswerFor))
	next := join()
	if a := next.e.account("A"); a.lookup("OLD") != nil {
		t.Fatal("the new leader loaded the deleted stream")
	}
	if !inStore(t, next, 1, oldID) {
		// Removed through the log: wait for the follower's copy too.
		waitForCond(t, "OLD removed from the joined copies", func() bool {
			for _, nd := range nodes {
				if nd != old && inStore(t, nd, 1, oldID) {
					return false
				}
			}
			return true
		})
	}
	createClustered(t, acc, api.StreamConfig{Name: "OTHER", Subjects: []string{"old.>"}, Replicas: 3})
	if ack := publishOnce(t, acc, "old.x", "o1"); ack.Error != nil || ack.Stream != "OTHER" || ack.Sequence != 1 {
		t.Fatalf("publish on the deleted stream's subjects: %+v", ack)
	}
	<-deleteCh // answered or not: its client gave up long ago
}

// TestClusterLostStreamNotDenied: a request admitted on the node leading
// a stream's partition, which then loses the partition before the
// handler runs, finds the stream gone. The catalog holds it, so that
// node must not say "not found" (10059); every other node dropped the
// request when it arrived, so it is sent again for the new leader, which
// answers. Run here on a node that does not hold the stream, as the old
// leader is once it has released the partition.
func TestClusterLostStreamNotDenied(t *testing.T) {
	acc, nodes, _, lead := streamSCluster(t)
	other := without(nodes, lead)[0]
	answers := inbox(t, acc, "_INBOX.lost")
	a := other.e.account("A")
	lost := map[string]string{"$JS.API.STREAM.INFO.S": "", "$JS.API.CONSUMER.INFO.S.C": "", "$JS.API.STREAM.MSG.GET.S": `{"seq":1}`}
	for subj, body := range lost {
		a.serve(apiRequest{a: a, subject: subj, reply: "_INBOX.lost", body: []byte(body)})
	}
	for range lost {
		var resp api.Response
		d := next(t, answers)
		if err := json.Unmarshal([]byte(d.data), &resp); err != nil || resp.Error != nil && resp.Error.ErrCode == api.CodeStreamNotFound {
			t.Fatalf("a request for a stream the catalog holds answered %s", d.data)
		}
	}
	// A stream the catalog does not hold is still "not found", from the
	// meta leader, which alone is admitted to say it (and proves its
	// leadership first).
	var ma *jsAccount
	for _, nd := range nodes {
		if nd.e.cl.metaLeader() {
			ma = nd.e.account("A")
		}
	}
	ma.serve(apiRequest{a: ma, subject: "$JS.API.STREAM.INFO.NONE", reply: "_INBOX.lost"})
	var resp api.Response
	if d := next(t, answers); json.Unmarshal([]byte(d.data), &resp) != nil || resp.Error == nil || resp.Error.ErrCode != api.CodeStreamNotFound {
		t.Fatalf(`stream info for a stream nobody has answered %s, want "not found"`, d.data)
	}
}

// TestClusterPublishAfterLeadershipMovedIsRetried: a publish captured by
// a stream whose node has just stopped leading its partition (the
// capture runs while the partition is being released) reaches a closed
// applier. It was never appended, so the publisher hears no responders,
// which stock clients retry against the new leader; it was told
// "JetStream not enabled" (10076), which they do not retry.
func TestClusterPublishAfterLeadershipMovedIsRetried(t *testing.T) {
	acc, nodes, asg, old := streamSCluster(t)
	a, capture := captureS(t, old)
	to := without(nodes, old)[0]
	if err := old.group(asg.group()).TransferLeadership(to.name); err != nil {
		t.Fatal(err)
	}
	waitForCond(t, "the old leader released S", func() bool { return a.lookup("S") == nil })

	got := make(chan []byte, 1)
	unsub, _ := acc.SubscribeInternal("_INBOX.moved", func(_, _, hdr, msg []byte) {
		got <- append(append([]byte(nil), hdr...), msg...)
	})
	defer unsub()
	capture([]byte("s.x"), []byte("_INBOX.moved"), nil, []byte("m"), false)
	select {
	case b := <-got:
		if string(b) != string(noResponders) {
			t.Fatalf("publish to the released stream answered %q, want no responders", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publish to the released stream not answered")
	}
}

// TestClusterTransferAnswersInFlight: a planned transfer of a partition's
// leadership (a stepdown, a balancing move, a shutdown) while publishes
// stream in leaves none of them unanswered: each gets its PubAck, or no
// responders (never stored; a stock client retries, reaching the new
// leader). Raft ends the old leader's term with its entries in flight,
// whose fate the old leader never learns; the hand-over lets them commit
// first. Every acknowledged message is in the new leader's stream, and
// nothing else is.
func TestClusterTransferAnswersInFlight(t *testing.T) {
	acc, nodes, asg, old := streamSCluster(t)
	a, capture := captureS(t, old)
	var mu sync.Mutex
	answers := map[string]string{} // reply subject: "ack" or "none"
	unsub, err := acc.SubscribeInternal("_INBOX.t.*", func(subject, _, hdr, _ []byte) {
		kind := "ack"
		if string(hdr) == string(noResponders) {
			kind = "none"
		}
		mu.Lock()
		answers[string(subject)] = kind
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	answered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(answers)
	}
	// Publish until the old leader has released S, the transfer under
	// way meanwhile; each publish waits its turn in the stream's flow
	// control as a client connection would.
	released := make(chan struct{})
	sent := 0
	go func() {
		waitForCond(t, "publishes acknowledged before the transfer", func() bool { return answered() >= 200 })
		if err := old.group(asg.group()).TransferLeadership(without(nodes, old)[0].name); err != nil {
			t.Errorf("transfer: %v", err)
		}
		waitForCond(t, "the old leader released S", func() bool { return a.lookup("S") == nil })
		close(released)
	}()
	for done := false; !done; {
		select {
		case <-released:
			done = true
		default:
		}
		if wait := capture([]byte("s.x"), []byte("_INBOX.t."+strconv.Itoa(sent)), nil, []byte("m"), false); wait != nil {
			<-wait
		}
		sent++
	}
	waitForCond(t, "every publish answered", func() bool { return answered() == sent })
	acks := 0
	for _, kind := range answers {
		if kind == "ack" {
			acks++
		}
	}
	lead := leaderOf(nodes, asg.group())
	var stored uint64
	waitForCond(t, "a new leader serving S", func() bool {
		lead = leaderOf(nodes, asg.group())
		if lead == nil || lead == old || lead.e.account("A") == nil || lead.e.account("A").lookup("S") == nil {
			return false
		}
		info, aerr := lead.e.account("A").lookup("S").info(&api.StreamInfoRequest{})
		if aerr != nil {
			t.Fatal(aerr)
		}
		stored = info.State.Msgs
		return true
	})
	if stored != uint64(acks) {
		t.Fatalf("the new leader's S holds %d messages; %d of %d publishes were acknowledged", stored, acks, sent)
	}
	t.Logf("%d publishes: %d acknowledged, %d answered no responders", sent, acks, sent-acks)
}

// TestClusterNewLeaderHoldsRequests: a request for a stream reaches every
// node; one that arrives while the partition's new leader is still
// loading it (raft says it leads, take has not finished) is held there
// and answered once the partition is served, not dropped: the old leader
// has let go of it by then, so nobody else answers. One not served in
// time is told 10008.
func TestClusterNewLeaderHoldsRequests(t *testing.T) {
	acc, _, asg, lead := streamSCluster(t)
	c, g := lead.e.cl, asg.group()
	heldNow := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		if q := c.mu.held[g]; q != nil {
			return len(q.reqs)
		}
		return 0
	}
	c.release(g) // raft still has lead leading g: as between election and take
	got := callAsync(acc, "$JS.API.STREAM.INFO.S", nil, 10*time.Second)
	waitForCond(t, "the request held", func() bool { return heldNow() == 1 })
	if !c.take(g) {
		t.Fatal("take failed")
	}
	wantInfoOf(t, <-got, "S")

	c.release(g)
	got = callAsync(acc, "$JS.API.STREAM.INFO.S", nil, 10*time.Second)
	ans := <-got
	var info api.StreamInfoResponse
	if !ans.ok || json.Unmarshal(ans.body, &info) != nil || info.Error == nil || info.Error.ErrCode != api.CodeClusterNotAvailable {
		t.Fatalf("request held past holdTimeout answered %q (answered: %v), want 10008", ans.body, ans.ok)
	}
	if n := heldNow(); n != 0 {
		t.Fatalf("%d requests still held after their timeout", n)
	}
	checkHeldCounted(t, c, 0)
	if !c.take(g) {
		t.Fatal("take failed")
	}
}

// deferDurables starts a planned hand-over of S's partition on old and
// sends n durable consumer creates for S meanwhile, which old refuses as
// never appended and keeps; it returns their answers and the hand-over's
// after.
func deferDurables(t *testing.T, acc *fakeAccount, old *testNode, g uint16, n int) ([]<-chan answer, func(error)) {
	t.Helper()
	c := old.e.cl
	after := old.e.HandOver(g, time.Second)
	var got []<-chan answer
	for i := range n {
		body, _ := json.Marshal(api.ConsumerCreateRequest{Stream: "S",
			Config: api.ConsumerConfig{Durable: fmt.Sprintf("D%d", i), AckPolicy: api.AckExplicit}})
		got = append(got, callAsync(acc, fmt.Sprintf("$JS.API.CONSUMER.CREATE.S.D%d", i), body, 10*time.Second))
	}
	waitForCond(t, "the creates kept for after the hand-over", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.mu.handing[g]) == n
	})
	return got, after
}

// checkCreated checks that each create was answered with its consumer.
func checkCreated(t *testing.T, got []<-chan answer) {
	t.Helper()
	for i, ch := range got {
		ans := <-ch
		var info api.ConsumerInfoResponse
		if !ans.ok || json.Unmarshal(ans.body, &info) != nil || info.Error != nil || info.Name != fmt.Sprintf("D%d", i) {
			t.Errorf("create D%d answered %q (answered: %v), want its consumer", i, ans.body, ans.ok)
		}
	}
}

// TestClusterHandOverDefersRequests: an API request that reaches the
// partition's leader while it hands leadership over (a balancing move, a
// stepdown) is refused there as never appended; it is not told 10008
// but sent again once the successor leads, which answers it.
func TestClusterHandOverDefersRequests(t *testing.T) {
	acc, nodes, asg, old := streamSCluster(t)
	g := asg.group()
	got, after := deferDurables(t, acc, old, g, 5)
	to := without(nodes, old)[0]
	if err := old.groups[g].LeadershipTransferToServer(raft.ServerID(to.name), raft.ServerAddress(to.name)).Error(); err != nil {
		t.Fatal(err)
	}
	old.group(g).AwaitOtherLeader(time.Second)
	after(nil)
	checkCreated(t, got)
	s := to.e.account("A").lookup("S")
	s.mu.Lock()
	n := len(s.mu.cons)
	s.mu.Unlock()
	if n != 5 {
		t.Errorf("the new leader's S has %d consumers, want the 5 created", n)
	}
	checkHeldCounted(t, old.e.cl, 0)
}

// TestClusterFailedHandOverAnswersDeferred: when the transfer fails, the
// requests kept meanwhile are run by this node's fresh term.
func TestClusterFailedHandOverAnswersDeferred(t *testing.T) {
	acc, _, asg, old := streamSCluster(t)
	got, after := deferDurables(t, acc, old, asg.group(), 3)
	after(errors.New("transfer failed"))
	checkCreated(t, got)
	checkHeldCounted(t, old.e.cl, 0)
}

// wantInfoOf checks that a held stream info request was answered with
// stream's info.
func wantInfoOf(t *testing.T, ans answer, stream string) {
	t.Helper()
	var info api.StreamInfoResponse
	if !ans.ok || json.Unmarshal(ans.body, &info) != nil || info.Error != nil || info.Config.Name != stream {
		t.Fatalf("held stream info answered %q (answered: %v), want %s's info", ans.body, ans.ok, stream)
	}
}

// checkHeldCounted checks the held requests' counts against what is held
// (the invariant on clusterState.mu.held), and that they are want bytes.
func checkHeldCounted(t *testing.T, c *clusterState, want int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[*jsAccount]int{}
	sum := 0
	for _, q := range c.mu.held {
		for _, h := range q.reqs {
			by[h.a] += h.size
			sum += h.size
		}
	}
	for _, hs := range c.mu.handing {
		for _, h := range hs {
			by[h.a] += h.size
			sum += h.size
		}
	}
	if sum != want || c.mu.heldBytes != sum || !maps.Equal(by, c.mu.heldBy) {
		t.Fatalf("held: %d bytes counted, %d held by the queues, want %d; counted by account %v, held %v",
			c.mu.heldBytes, sum, want, c.mu.heldBy, by)
	}
}

// TestClusterHeldRequestsBounded: a tenant flooding a new leader with
// large requests while it loads the partition holds at most its bound
// of them, and another tenant's request is still held and answered once
// the partition is served.
func TestClusterHeldRequestsBounded(t *testing.T) {
	_, nodes, asg, lead := streamSCluster(t)
	accB := newFakeAccount("B")
	for _, nd := range nodes {
		if err := nd.e.EnableAccount(accB); err != nil {
			t.Fatal(err)
		}
	}
	createClustered(t, accB, api.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
	if g := waitAssigned(t, nodes, "B", "T").group(); g != asg.group() {
		t.Fatalf("T in partition %d, S in %d: the test needs one partition", g, asg.group())
	}
	c, g := lead.e.cl, asg.group()
	c.release(g)

	a := lead.e.account("A")
	big := make([]byte, 1<<20)
	admitted := 0
	for i := range 16 {
		if answer, _ := a.clusterAdmit([]byte("$JS.API.STREAM.INFO.S"), fmt.Appendf(nil, "_INBOX.flood.%d", i), nil, big); answer {
			t.Fatalf("flood request %d answered before the partition is served", i)
		}
	}
	c.mu.Lock()
	held := c.mu.heldBy[a]
	if q := c.mu.held[g]; q != nil {
		admitted = len(q.reqs)
	}
	c.mu.Unlock()
	if held > maxHeldAccountBytes || admitted != maxHeldAccountBytes/len(big)-1 {
		t.Fatalf("the flooding account holds %d requests, %d bytes; want %d requests within %d bytes",
			admitted, held, maxHeldAccountBytes/len(big)-1, maxHeldAccountBytes)
	}
	checkHeldCounted(t, c, held)

	got := callAsync(accB, "$JS.API.STREAM.INFO.T", nil, 10*time.Second)
	waitForCond(t, "B's request held", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.mu.heldBy[lead.e.account("B")] > 0
	})
	if !c.take(g) {
		t.Fatal("take failed")
	}
	wantInfoOf(t, <-got, "T")
	checkHeldCounted(t, c, 0)
}

// deposedHoldingS starts streamSCluster and moves S's partition from its
// leader, old, to another node, to, while old's leadership notifications
// are held back (until the test ends): raft no longer has old lead, and
// old still holds S, as between a deposition and its release.
func deposedHoldingS(t *testing.T) (acc *fakeAccount, old, to *testNode) {
	t.Helper()
	acc, nodes, asg, old := streamSCluster(t)
	g := asg.group()
	gate := make(chan struct{})
	old.gate.Store(&gate)
	t.Cleanup(func() {
		old.gate.Store(nil)
		close(gate)
	})
	to = without(nodes, old)[0]
	if err := old.group(g).TransferLeadership(to.name); err != nil {
		t.Fatal(err)
	}
	waitForCond(t, "the old leader knowing its successor", func() bool { return old.group(g).Leader() == to.name })
	if old.e.account("A").lookup("S") == nil {
		t.Fatal("the old leader released S before hearing of the change")
	}
	return acc, old, to
}

// TestClusterDeposedLeaderSilent: a node raft no longer has lead a
// partition holds its streams until the engine hears of the change and
// releases them; what it would answer meanwhile could contradict the new
// leader (a stepdown told "not the leader" while the new leader moves
// it, a 10008 for a request the new leader runs). It answers nothing:
// the new leader does.
func TestClusterDeposedLeaderSilent(t *testing.T) {
	acc, old, to := deposedHoldingS(t)
	a := old.e.account("A")
	for _, subj := range []string{"$JS.API.STREAM.INFO.S", "$JS.API.STREAM.LEADER.STEPDOWN.S", "$JS.API.CONSUMER.CREATE.S"} {
		if answer, _ := a.clusterAdmit([]byte(subj), []byte("_INBOX.deposed"), nil, nil); answer {
			t.Fatalf("the deposed leader admits %s", subj)
		}
	}
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.Error != nil || info.Cluster == nil || info.Cluster.Leader != to.name {
		t.Fatalf("stream info while the old leader is deposed: %+v, want the new leader's (%s) answer", info, to.name)
	}
}

// TestClusterFailedFenceResends: a read admitted by a leader that is
// deposed before its fence holds is not answered there (its state may be
// stale) and not lost either: every other node dropped it on arrival, so
// it is sent again for the new leader, which answers.
func TestClusterFailedFenceResends(t *testing.T) {
	acc, old, to := deposedHoldingS(t)
	got := inbox(t, acc, "_INBOX.fence")
	a := old.e.account("A")
	// As if admitted just before the transfer: served from the old
	// leader's memory, its fence now fails.
	a.serve(apiRequest{a: a, subject: "$JS.API.STREAM.INFO.S", reply: "_INBOX.fence"})
	d := next(t, got)
	var info api.StreamInfoResponse
	if err := json.Unmarshal([]byte(d.data), &info); err != nil || info.Error != nil || info.Cluster == nil || info.Cluster.Leader != to.name {
		t.Fatalf("read whose fence failed answered %s, want the new leader's (%s) answer", d.data, to.name)
	}
}

// TestClusterFencedRepliesBounded: a read's reply waits for its fence off
// the API worker, up to maxFencingReplies per account; past that the
// worker waits, so the reply is sent by the time serve returns.
func TestClusterFencedRepliesBounded(t *testing.T) {
	acc, _, _, lead := streamSCluster(t)
	a := lead.e.account("A")
	var answers atomic.Int64
	unsub, _ := acc.SubscribeInternal("_INBOX.fenced", func(_, _, _, _ []byte) { answers.Add(1) })
	defer unsub()
	a.fencing.Store(maxFencingReplies)
	a.serve(apiRequest{a: a, subject: "$JS.API.STREAM.INFO.S", reply: "_INBOX.fenced"})
	if n := answers.Load(); n != 1 {
		t.Fatalf("with %d replies fencing, a read was answered %d times when serve returned, want 1 (fenced on the worker)", maxFencingReplies, n)
	}
	a.fencing.Store(0)
	a.serve(apiRequest{a: a, subject: "$JS.API.STREAM.INFO.S", reply: "_INBOX.fenced"})
	waitForCond(t, "the read fenced off the worker answered", func() bool { return answers.Load() == 2 })
	waitForCond(t, "no reply left fencing", func() bool { return a.fencing.Load() == 0 })
}

// captureS is stream S's publish path on nd, the partition's leader, with
// nd's account A.
func captureS(t *testing.T, nd *testNode) (*jsAccount, func(subject, reply, hdr, msg []byte, routed bool) <-chan struct{}) {
	t.Helper()
	a := nd.e.account("A")
	s := a.lookup("S")
	if s == nil {
		t.Fatal("the partition's leader does not hold S")
	}
	return a, s.capture(a)
}

// streamSCluster starts three nodes of one partition for account A and
// creates its R3 stream S (subjects s.>); it returns A, the nodes, S's
// assignment and the node leading S's partition.
func streamSCluster(t *testing.T) (*fakeAccount, []*testNode, *assignment, *testNode) {
	t.Helper()
	acc := newFakeAccount("A")
	nodes := startTestCluster(t, 3, 1, acc)
	waitClusterReady(t, nodes)
	createClustered(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3})
	asg := waitAssigned(t, nodes, "A", "S")
	var lead *testNode
	waitForCond(t, "a leader for the partition", func() bool { lead = leaderOf(nodes, asg.group()); return lead != nil })
	return acc, nodes, asg, lead
}

// TestClusterEphemeralConsumerOutlivesMove: an ephemeral consumer of a
// replicated stream goes on serving from where it was after its
// partition's leadership moves (a stock client keeps pulling from the
// same consumer, and would wait on one nobody serves), and its deletion
// removes it from the new leader too.
func TestClusterEphemeralConsumerOutlivesMove(t *testing.T) {
	acc, nodes, asg, old := streamSCluster(t)
	for i := 1; i <= 20; i++ {
		if ack := publishOnce(t, acc, "s.x", fmt.Sprint(i)); ack.Error != nil {
			t.Fatalf("publish %d: %v", i, ack.Error)
		}
	}
	var created api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S.E", api.ConsumerCreateRequest{Stream: "S",
		Config: api.ConsumerConfig{Name: "E", AckPolicy: api.AckExplicit, AckWait: time.Minute, InactiveThreshold: time.Minute}}, &created)
	if created.Error != nil || created.Config.Durable != "" {
		t.Fatalf("ephemeral create: %+v", created)
	}
	got := inbox(t, acc, "_INBOX.pull")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.E", "_INBOX.pull", nil, []byte(`{"batch":10}`))
	for i := 1; i <= 10; i++ {
		d := next(t, got)
		if d.data != fmt.Sprint(i) {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		acc.request(t, d.reply, nil, []byte("+ACK")) // answered once the ack is stored
	}

	to := without(nodes, old)[0]
	if err := old.group(asg.group()).TransferLeadership(to.name); err != nil {
		t.Fatal(err)
	}
	waitForCond(t, "the new leader serves S", func() bool {
		return leaderOf(nodes, asg.group()) == to && to.e.account("A").lookup("S") != nil
	})
	var info api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.E", nil, &info)
	if info.Error != nil {
		t.Fatalf("ephemeral consumer on the new leader: %v", info.Error)
	}
	if info.AckFloor.Stream != 10 {
		t.Fatalf("ephemeral consumer on the new leader: ack floor %+v, want stream seq 10", info.AckFloor)
	}
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.E", "_INBOX.pull", nil, []byte(`{"batch":10}`))
	for i := 11; i <= 20; i++ {
		if d := next(t, got); d.data != fmt.Sprint(i) {
			t.Fatalf("after the move, delivery %d: %+v", i, d)
		}
	}

	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.CONSUMER.DELETE.S.E", nil, &del)
	if del.Error != nil || !del.Success {
		t.Fatalf("delete: %+v", del)
	}
	if err := to.group(asg.group()).TransferLeadership(old.name); err != nil {
		t.Fatal(err)
	}
	waitForCond(t, "the first leader serves S again", func() bool {
		return leaderOf(nodes, asg.group()) == old && old.e.account("A").lookup("S") != nil
	})
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.E", nil, &info)
	if info.Error == nil {
		t.Fatalf("deleted ephemeral consumer back after a move: %+v", info.ConsumerInfo)
	}
}

// TestClusterStreamNamedWithItsConsumers: a partition's new leader names
// a stream in its account (where the API finds it) only once every
// consumer of the stream runs. It once named the stream first, and for
// the half second 10,000 consumers took to start, its infos counted part
// of them and the rest were "not found" to their clients.
func TestClusterStreamNamedWithItsConsumers(t *testing.T) {
	acc, nodes, asg, old := streamSCluster(t)
	const consumers = 50
	for i := range consumers {
		createConsumer(t, acc, "S", api.ConsumerConfig{Durable: fmt.Sprintf("D%02d", i), AckPolicy: api.AckExplicit})
	}
	to := without(nodes, old)[0]
	var started, early atomic.Int32
	hook := func(filter string) {
		if !strings.HasPrefix(filter, "$JS.ACK.S.") {
			return
		}
		started.Add(1)
		if a := to.e.account("A"); a != nil && a.lookup("S") != nil {
			early.Add(1)
		}
	}
	acc.onSubscribe.Store(&hook)
	defer acc.onSubscribe.Store(nil)
	if err := old.group(asg.group()).TransferLeadership(to.name); err != nil {
		t.Fatal(err)
	}
	waitForCond(t, "the new leader serves S", func() bool {
		return leaderOf(nodes, asg.group()) == to && to.e.account("A").lookup("S") != nil
	})
	if started.Load() != consumers {
		t.Fatalf("the new leader started %d consumers, want %d", started.Load(), consumers)
	}
	if n := early.Load(); n != 0 {
		t.Fatalf("%d of %d consumers started after their stream was named on the new leader", n, consumers)
	}
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.Error != nil || info.State.Consumers != consumers {
		t.Fatalf("stream info on the new leader: %d consumers, %v", info.State.Consumers, info.Error)
	}
}

// TestLeaderlessRepliesBounded: a request with no leader to answer it
// gets 10008 after errRespDelay, up to maxLeaderlessReplies of an
// account's waiting at once; past that at once, so a flood during an
// election holds a bounded number of timers.
func TestLeaderlessRepliesBounded(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	a := e.account("A")
	var answers atomic.Int64
	var bad atomic.Value
	unsub, _ := acc.SubscribeInternal("_INBOX.leaderless", func(_, _, _, msg []byte) {
		var resp api.StreamInfoResponse
		if err := json.Unmarshal(msg, &resp); err != nil || resp.Error == nil || resp.Error.ErrCode != api.CodeClusterNotAvailable {
			bad.Store(string(msg))
		}
		answers.Add(1)
	})
	defer unsub()
	const extra = 5
	for range maxLeaderlessReplies + extra {
		a.replyLeaderless("_INBOX.leaderless", apiRoutes["STREAM.INFO"])
	}
	// Those past the bound were answered before replyLeaderless returned
	// (the fake account delivers in Publish); the others wait 500 ms.
	if n := answers.Load(); n != extra {
		t.Fatalf("%d answered at once, want the %d past the bound", n, extra)
	}
	waitForCond(t, "every request answered", func() bool { return answers.Load() == maxLeaderlessReplies+extra })
	waitForCond(t, "no answer left waiting", func() bool { return a.leaderless.Load() == 0 })
	if m := bad.Load(); m != nil {
		t.Fatalf("answer %s, want 10008", m)
	}
}
