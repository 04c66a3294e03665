package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// More fault scenarios (TestClusterFaults runs them): kills at each step
// of a wiped node's rejoin and repair.

// The log lines the rejoin and repair steps are known by
// (dataplane/cluster start.go and group.go).
const (
	logRejoin   = `msg="no state for the group but the cluster exists: rejoining as a new incarnation, in repair"`
	logInRepair = `msg="repair: raft started in repair, not voting; asking the leader to admit this incarnation"`
	logAdded    = `msg="rejoining incarnation added as nonvoter"`
	logCatching = `msg="repair: added as nonvoter, catching up"`
	logPromoted = `msg="rejoining incarnation caught up: promoted to voter"`
	logRepaired = `msg="repair done: this node is a voter again"`
	logLeading  = `msg="entering leader state"`
	// A balancing move the partition's leader refused (cluster.ErrNotCurrent).
	logMoveRefused = "transfer target is not a current voter of the group"
)

// attr is the text a slog text line carries for key=value.
func attr(key string, value any) string { return fmt.Sprintf(" %s=%v ", key, value) }

var idAttr = regexp.MustCompile(` id=(\S+)`)

// lineID is the id attribute of a log line.
func lineID(line string) string {
	if m := idAttr.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// logMark is how much each process had logged at a moment: what a node
// logs from then on is read past its mark (a restarted node has a new
// process, read from its start).
type logMark map[*proc]int

func (fc *faultCluster) mark() logMark {
	m := logMark{}
	for _, cn := range fc.nodes {
		m[cn.proc] = cn.proc.out.len()
	}
	return m
}

func (b *syncBuffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// from is what the buffer holds past off.
func (b *syncBuffer) from(off int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off >= b.buf.Len() {
		return ""
	}
	return string(b.buf.Bytes()[off:])
}

// linesSince is every whole line cn logged past m with all of parts.
func linesSince(m logMark, cn *clusterNode, parts ...string) []string {
	var out []string
	for _, line := range strings.Split(cn.proc.out.from(m[cn.proc]), "\n") {
		if hasAll(line+" ", parts) {
			out = append(out, line)
		}
	}
	return out
}

func hasAll(line string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(line, p) {
			return false
		}
	}
	return true
}

// awaitLog waits until one of nodes logs, past m, a line with all of
// parts, and returns the node and the line. It polls every 2 ms, so that
// a kill on the line lands close behind the step it names.
func awaitLog(t testing.TB, m logMark, within time.Duration, what string, nodes []*clusterNode, parts ...string) (*clusterNode, string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, cn := range nodes {
			if lines := linesSince(m, cn, parts...); len(lines) > 0 {
				return cn, lines[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// without is nodes less skip.
func without(nodes []*clusterNode, skip ...*clusterNode) []*clusterNode {
	var out []*clusterNode
	for _, cn := range nodes {
		keep := true
		for _, s := range skip {
			keep = keep && cn != s
		}
		if keep {
			out = append(out, cn)
		}
	}
	return out
}

// streamGroup is the raft group (partition) that carries the fault
// stream: a stream's id names its partition (id >> 48).
func (fc *faultCluster) streamGroup(cn *clusterNode) uint64 {
	d, err := cn.digest()
	if err != nil {
		fc.t.Fatalf("%s digest: %v", cn.ID, err)
	}
	return d.ID >> 48
}

// maxAcked is the highest sequence acknowledged so far.
func (l *ackLog) maxAcked() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m uint64
	for seq := range l.bySeq {
		m = max(m, seq)
	}
	return m
}

// slowNode delays every link to and from node i (0 heals the delay, and
// lifts any cut on them).
func (m *linkMesh) slowNode(i int, d, jitter time.Duration) {
	m.each([]int{i}, m.others(i), func(p *linkProxy) {
		if d == 0 {
			p.heal()
			return
		}
		p.slow(d, jitter)
	})
}

// RepairKills: a follower is wiped after many writes and rejoins as a new
// incarnation in repair (architecture.md, "Rejoin and repair"); it is
// killed with SIGKILL at each step of the procedure, each kill triggered
// by the line the step logs, and restarted:
//
//	(a) its new incarnation and repair marker are stored, before the
//	    leader admits it (its links slowed, so the join cannot have
//	    arrived yet);
//	(b) the leader added it as a nonvoter and it is catching up (its
//	    links slowed, so that takes a while);
//	(c) the leader has just promoted it to voter.
//
// Between (a) and (b), with the victim in repair and cut off from the
// stream's leader (so that it stays unadmitted), the leader is killed:
// the one healthy node left must not be elected for the stream's group
// (the victim does not vote), and once the leader is back the new leader
// is one of the two healthy nodes and holds every acknowledged write.
// In the end the victim is a voter again and fc.finish holds.
func testRepairKills(t *testing.T) {
	begin := time.Now()
	fc := startFaultCluster(t, true)
	l := fc.leader()
	v := fc.follower(l)
	vi := fc.index(v)
	grp := fc.streamGroup(l)
	inGroup := attr("group", grp)
	t.Logf("stream group %d led by %s; victim %s", grp, l.ID, v.ID)
	// The writer, the watcher and the scenario's own requests stay off
	// the victim, which is cut off from the leader for a while.
	fc.use(fc.connectTo(without(fc.nodes, v)...))
	w := startWriter(t, fc.log, fc.nc, "r", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, soakOr(2000, 6000), "before the wipe")
	t.Logf("[%v] %d acknowledged; wiping %s", time.Since(begin).Round(time.Millisecond), fc.log.ackCount(), v.ID)

	// (a) Wiped and restarted, its links slowed so that its join request
	// takes at least 400 ms: killed on its own line for the stream's
	// group, which it logs once the incarnation and marker are stored.
	v.kill(t)
	if err := os.RemoveAll(v.DataDir); err != nil {
		t.Fatal(err)
	}
	fc.mesh.slowNode(vi, 200*time.Millisecond, 0)
	m := fc.mark()
	v.launch(t)
	_, line := awaitLog(t, m, clusterTimeout(), v.ID+" storing a new incarnation", []*clusterNode{v}, logRejoin, inGroup)
	v.kill(t)
	vid := lineID(line)
	admitted := false
	for _, cn := range without(fc.nodes, v) {
		admitted = admitted || len(linesSince(m, cn, logAdded, attr("id", vid))) > 0
	}
	t.Logf("[%v] (a) %s killed with incarnation %s stored; admitted first: %v", time.Since(begin).Round(time.Millisecond), v.ID, vid, admitted)
	if admitted {
		t.Errorf("(a) the kill came after the leader admitted %s: step (a) not exercised", vid)
	}

	// The victim restarts in repair under its stored incarnation, cut
	// off from the stream's leader, which alone can admit it there.
	fc.mesh.slowNode(vi, 0, 0)
	l = fc.leader()
	h := without(fc.nodes, l, v)[0]
	fc.mesh.split([]int{vi}, []int{fc.index(l)})
	m = fc.mark()
	v.launch(t)
	_, line = awaitLog(t, m, clusterTimeout(), v.ID+" back in repair", []*clusterNode{v}, logInRepair, inGroup)
	if got := lineID(line); got != vid {
		t.Errorf("(a) %s restarted as %s, not under its stored incarnation %s", v.ID, got, vid)
	}
	if nl := fc.leader(); nl != l {
		t.Logf("stream leadership moved to %s meanwhile", nl.ID)
		l, h = nl, without(fc.nodes, nl, v)[0]
		fc.mesh.healAll()
		fc.mesh.split([]int{vi}, []int{fc.index(l)})
	}
	acked := fc.log.maxAcked()
	m = fc.mark()
	l.kill(t)
	t.Logf("[%v] leader %s killed with %s in repair (a), %d acknowledged up to seq %d", time.Since(begin).Round(time.Millisecond), l.ID, v.ID, fc.log.ackCount(), acked)
	time.Sleep(soakOr(3*time.Second, 8*time.Second)) // on purpose: the window in which a wrong election would happen
	for _, cn := range []*clusterNode{h, v} {
		if won := linesSince(m, cn, logLeading, inGroup); len(won) > 0 {
			t.Errorf("%s was elected for group %d with %s dead and %s in repair: %q", cn.ID, grp, l.ID, v.ID, won)
		}
	}
	if len(linesSince(m, v, logRepaired, inGroup)) > 0 {
		t.Errorf("%s left repair while cut off from the leader", v.ID)
	}

	// (b) Once the leader is back the victim is admitted as a nonvoter
	// and catches up through slow links: killed at a random moment
	// after the leader's line.
	fc.mesh.healAll()
	fc.mesh.slowNode(vi, 300*time.Millisecond, 50*time.Millisecond)
	m = fc.mark()
	l.restart(t)
	nl, info := streamLeader(t, fc.js, fc.nodes, faultStream)
	if nl == v {
		t.Errorf("%s leads the stream right after its repair began", v.ID)
	}
	if info.State.LastSeq < acked {
		t.Errorf("new leader %s holds up to seq %d, but %d was acknowledged", nl.ID, info.State.LastSeq, acked)
	}
	t.Logf("[%v] %s back; stream led by %s at seq %d", time.Since(begin).Round(time.Millisecond), l.ID, nl.ID, info.State.LastSeq)
	_, line = awaitLog(t, m, clusterTimeout(), vid+" added as nonvoter", without(fc.nodes, v), logAdded, inGroup, attr("id", vid))
	time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond) // a random moment of the catch-up, on purpose
	promoted := false
	for _, cn := range without(fc.nodes, v) {
		promoted = promoted || len(linesSince(m, cn, logPromoted, attr("id", vid))) > 0
	}
	caught := len(linesSince(m, v, logCatching, inGroup)) > 0
	v.kill(t)
	t.Logf("[%v] (b) %s killed catching up (its log reached its admission: %v; promoted first: %v)", time.Since(begin).Round(time.Millisecond), v.ID, caught, promoted)
	if promoted {
		t.Errorf("(b) the kill came after %s was promoted: step (b) not exercised", vid)
	}
	m = fc.mark()
	v.launch(t)
	awaitLog(t, m, clusterTimeout(), v.ID+" back in repair", []*clusterNode{v}, logInRepair, inGroup, attr("id", vid))

	// (c) Links healed, it catches up and is promoted: killed on the
	// leader's line, before it can have cleared its own marker.
	fc.mesh.slowNode(vi, 0, 0)
	_, line = awaitLog(t, m, clusterTimeout(), vid+" promoted", without(fc.nodes, v), logPromoted, inGroup, attr("id", vid))
	repaired := len(linesSince(m, v, logRepaired, inGroup)) > 0
	v.kill(t)
	t.Logf("[%v] (c) %s killed on its promotion (it had left repair: %v)", time.Since(begin).Round(time.Millisecond), v.ID, repaired)
	m = fc.mark()
	v.restart(t)
	awaitLog(t, m, clusterTimeout(), v.ID+" out of repair", []*clusterNode{v}, logRepaired, inGroup)
	fc.log.progress(t, 100, v.ID+" repaired")
	t.Logf("[%v] %s repaired, writes go on", time.Since(begin).Round(time.Millisecond), v.ID)
	refusedMoves := 0
	for _, cn := range fc.nodes {
		refusedMoves += len(linesSince(logMark{}, cn, logMoveRefused))
	}
	t.Logf("balancing moves refused for a target not current in its group (the nodes' latest runs): %d", refusedMoves)
	fc.finish([]*writer{w}, aw)
}
