package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Two more fault scenarios (TestClusterFaults runs them): kills at each
// step of a wiped node's rejoin and repair, and elections while the
// nodes are starved of CPU, under a stepdown storm.

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
	// What raft logs when starvation, not a stepdown, ends a term.
	logTimedOut = `msg="heartbeat timeout reached, starting election"`
	logLostLead = `msg="failed to contact quorum of nodes, stepping down"`
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
	awaitLog(t, m, clusterTimeout(), vid+" added as nonvoter", without(fc.nodes, v), logAdded, inGroup, attr("id", vid))
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
	awaitLog(t, m, clusterTimeout(), vid+" promoted", without(fc.nodes, v), logPromoted, inGroup, attr("id", vid))
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

// starver stops and continues the nodes' processes (SIGSTOP/SIGCONT) at
// random, a node at a time or two at once: what a node starved of CPU
// looks like to its peers. Pauses of tens of milliseconds alone do not
// starve a node enough for its peers to notice (a follower's patience is
// 250 ms times the timing multiplier), so one pause in three reaches past
// the leader's lease and the followers' election timeout. (Signals, not
// busy-loop burners: they starve the nodes without taking the machine's
// cores from anything else running on it.)
type starver struct {
	stop   chan struct{}
	done   chan struct{}
	pauses atomic.Int64
}

func startStarver(t testing.TB, nodes []*clusterNode, rng *rand.Rand, electionTimeout time.Duration) *starver {
	s := &starver{stop: make(chan struct{}), done: make(chan struct{})}
	procs := make([]*proc, len(nodes))
	for i, cn := range nodes {
		procs[i] = cn.proc
	}
	resumeAll := func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resumeAll)
	go func() {
		defer close(s.done)
		defer resumeAll()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			victims := []*proc{procs[rng.IntN(len(procs))]}
			if rng.IntN(4) == 0 {
				victims = append(victims, procs[rng.IntN(len(procs))])
			}
			for _, p := range victims {
				_ = p.cmd.Process.Signal(syscall.SIGSTOP)
			}
			s.pauses.Add(1)
			// Mostly tens of ms (a node that gets the CPU now and
			// then), one in three up to 1.5 election timeouts (one
			// that gets none for a while), on purpose.
			span := 10*time.Millisecond + time.Duration(rng.IntN(80))*time.Millisecond
			if rng.IntN(3) == 0 {
				span = 20*time.Millisecond + time.Duration(rng.Int64N(int64(electionTimeout*3/2)))
			}
			time.Sleep(span)
			for _, p := range victims {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
			}
			time.Sleep(time.Duration(10+rng.IntN(60)) * time.Millisecond) // a run between pauses, on purpose
		}
	}()
	return s
}

func (s *starver) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// faultSysConf gives the fault cluster a system account (for
// META.LEADER.STEPDOWN) while clients without credentials stay in $G.
const faultSysConf = `jetstream: enabled
accounts { SYS: { users: [ { user: sys, password: sys } ] } }
system_account: SYS
authorization { users: [ { user: app, password: app } ] }
no_auth_user: app
`

// ElectionStormStarved: the three nodes are starved (random SIGSTOP and
// SIGCONT spans) while a writer writes and stream and meta stepdowns are
// requested in a loop; the leader changes are counted from the nodes'
// logs and there must have been elections. Then the starving stops,
// writes go on, and fc.finish holds.
func testElectionStormStarved(t *testing.T) {
	conf := writeFile(t, t.TempDir(), "faults-sys.conf", faultSysConf)
	fc := startFaultCluster(t, false, "--config", conf)
	sys := connect(t, clusterURLs(fc.nodes), reconnecting(), nats.UserInfo("sys", "sys"))
	t.Cleanup(sys.Close)
	w := startWriter(t, fc.log, fc.nc, "x", 300)
	aw := startAckWatch(t, fc.log, fc.nc)
	fc.log.progress(t, 100, "before the starvation")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	mult := time.Duration(1)
	if raceEnabled() {
		mult = 3 // startCluster's --raft-multiplier
	}
	m := fc.mark()
	acks := fc.log.ackCount()
	start := time.Now()
	st := startStarver(t, fc.nodes, rng, followerElectionTimeout*mult)

	// Stream and meta stepdowns, each in a loop of its own.
	var mu sync.Mutex
	var wg sync.WaitGroup
	answered, refused := map[string]int{}, map[string]int{}
	storm := soakOr(10*time.Second, 40*time.Second)
	for subj, nc := range map[string]*nats.Conn{"$JS.API.STREAM.LEADER.STEPDOWN." + faultStream: fc.nc, "$JS.API.META.LEADER.STEPDOWN": sys} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < storm {
				msg, err := nc.Request(subj, nil, 2*time.Second)
				mu.Lock()
				if err != nil || strings.Contains(string(msg.Data), `"error"`) {
					refused[subj]++
				} else {
					answered[subj]++
				}
				mu.Unlock()
				time.Sleep(150 * time.Millisecond) // a storm, not a flood
			}
		}()
	}
	wg.Wait()
	st.halt()
	during := fc.log.ackCount() - acks
	t.Logf("starved %v: %d pauses, %d writes acknowledged; stepdowns answered %v, unanswered or refused %v",
		time.Since(start).Round(time.Millisecond), st.pauses.Load(), during, answered, refused)

	fc.log.progress(t, 200, "after the starvation")
	// Leader changes: every time a node took a group's leadership.
	perGroup := map[string]int{}
	total := 0
	for _, cn := range fc.nodes {
		for _, line := range linesSince(m, cn, logLeading) {
			g := "?"
			if i := strings.Index(line, " group="); i >= 0 {
				g, _, _ = strings.Cut(line[i+len(" group="):], " ")
			}
			perGroup[g]++
			total++
		}
	}
	groups := make([]string, 0, len(perGroup))
	for g := range perGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var parts []string
	for _, g := range groups {
		parts = append(parts, "group "+g+": "+strconv.Itoa(perGroup[g]))
	}
	timeouts, lost := 0, 0
	for _, cn := range fc.nodes {
		timeouts += len(linesSince(m, cn, logTimedOut))
		lost += len(linesSince(m, cn, logLostLead))
	}
	t.Logf("%d leader changes during and after the starvation (%s); %d elections started on a heartbeat timeout, %d leaders stepped down on a lost quorum",
		total, strings.Join(parts, ", "), timeouts, lost)
	if total == 0 || timeouts+lost == 0 {
		t.Errorf("the starvation caused no election (leader changes %d, timeouts %d, lost leases %d): the scenario tested nothing",
			total, timeouts, lost)
	}
	if answered["$JS.API.META.LEADER.STEPDOWN"] == 0 {
		t.Errorf("no META.LEADER.STEPDOWN was answered in the system account")
	}
	fc.finish([]*writer{w}, aw)
}

// followerElectionTimeout is a follower's patience at timing multiplier 1
// (dataplane/cluster, followerHeartbeatTimeout).
const followerElectionTimeout = 250 * time.Millisecond
