package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// clusterNode is one node of a cluster started by startCluster.
type clusterNode struct {
	*node
	ID          string // --node-id, the server name
	ClusterAddr string // --cluster-addr
	args        []string
	secret      string // the cluster secret it is started with
	timeline    *clusterTimeline
}

// clusterTimeline collects the processes a cluster test ran, so that a
// failed test prints, ahead of each process's output, one timeline of
// the cluster's leadership events: a CI log shows the beginning of a
// failure's output, and a cluster failure is most often explained by
// who led what when.
type clusterTimeline struct {
	mu    sync.Mutex
	procs []*proc
	once  sync.Once
}

// timelineLines is how many events a failed test's timeline prints.
const timelineLines = 60

// timelineMarks pick a node's log lines that tell who led what, and what
// failed: raft state changes, partitions taken and released, hand-overs,
// barriers, and errors.
var timelineMarks = []string{
	"entering leader state", "entering candidate state", "led here", "no longer led",
	"barrier failed", "hand-over", "transfer", "leadership move", "level=ERROR", "stepping down", "rejoining",
	"jetstream ready", "test sent",
}

// timelineNoise are raft's errors for a peer that is down, repeated at
// every retry: they would crowd out the events around them.
var timelineNoise = []string{"failed to heartbeat to", "failed to appendEntries to", "failed to make requestVote RPC"}

func (tl *clusterTimeline) add(p *proc) {
	tl.mu.Lock()
	tl.procs = append(tl.procs, p)
	tl.mu.Unlock()
}

// print logs the last timelineLines events of every process, in time
// order, each line prefixed with its node. Lines are slog's text form,
// which begin with the time, so they sort as strings.
func (tl *clusterTimeline) print(t testing.TB) {
	tl.mu.Lock()
	procs := slices.Clone(tl.procs)
	tl.mu.Unlock()
	var lines []string
	for _, p := range procs {
		for _, line := range strings.Split(p.out.String()+p.sent.String(), "\n") {
			if !strings.HasPrefix(line, "time=") || slices.ContainsFunc(timelineNoise, func(n string) bool { return strings.Contains(line, n) }) {
				continue
			}
			for _, m := range timelineMarks {
				if strings.Contains(line, m) {
					// Sort by time, print the node first.
					ts, rest, _ := strings.Cut(line, " ")
					lines = append(lines, ts+" "+p.name+" "+rest)
					break
				}
			}
		}
	}
	slices.Sort(lines)
	if len(lines) > timelineLines {
		lines = lines[len(lines)-timelineLines:]
	}
	t.Logf("cluster timeline (last %d leadership events):\n%s", timelineLines, strings.Join(lines, "\n"))
}

// clusterTestSecret is the cluster secret of the tests' clusters: every
// cluster test runs with the cluster port's handshake on.
const clusterTestSecret = "e2e-cluster-secret"

// clusterOpts tweaks startCluster.
type clusterOpts struct {
	// args returns extra flags for node i (0-based), e.g. operator mode's.
	args func(i int, dir string) []string
	// late leaves the last late nodes unstarted: the test starts them
	// (start) when it wants.
	late int
	// dialAddr, if set, is the address node from (0-based) names for
	// node to in its --peers, given to's real cluster address: a link
	// proxy's, so that each node dials its peers through the proxies
	// while listening on its own --cluster-addr. Nothing passes cluster
	// addresses between nodes, so each node's own list is what it dials.
	dialAddr func(from, to int, addr string) string
	// secret returns node i's cluster secret (default clusterTestSecret).
	secret func(i int) string
}

// startCluster starts n `contrail dataplane` nodes n1..nN on loopback,
// each with --peers naming all of them, and waits until each is healthy
// (not until the routes are up: see waitMesh). All are started before
// any is waited for: a clustered node is healthy only once its raft
// groups have leaders. The nodes stop when the test ends.
func startCluster(t testing.TB, n int, o clusterOpts) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, n)
	tl := &clusterTimeline{}
	for i := range nodes {
		dir := t.TempDir()
		cn := &clusterNode{ID: fmt.Sprintf("n%d", i+1), ClusterAddr: freeAddr(t), secret: clusterTestSecret, timeline: tl}
		if o.secret != nil {
			cn.secret = o.secret(i)
		}
		cn.node = &node{NatsAddr: freeAddr(t), MonAddr: freeAddr(t), DataDir: filepath.Join(dir, "data"), Dir: dir}
		cn.URL, cn.MonURL = "nats://"+cn.NatsAddr, "http://"+cn.MonAddr
		nodes[i] = cn
	}
	for i, cn := range nodes {
		var peers []string
		for j, peer := range nodes {
			addr := peer.ClusterAddr
			if o.dialAddr != nil && j != i {
				addr = o.dialAddr(i, j, addr)
			}
			peers = append(peers, peer.ID+"="+addr)
		}
		cn.args = []string{"dataplane",
			"--nats-addr", cn.NatsAddr, "--monitor-addr", cn.MonAddr, "--data-dir", cn.DataDir,
			"--node-id", cn.ID, "--cluster-addr", cn.ClusterAddr, "--peers", strings.Join(peers, ","),
		}
		if raceEnabled() {
			// Race-built nodes on two shared cores miss 250 ms
			// heartbeats; the tests check behaviour, not timing.
			cn.args = append(cn.args, "--raft-multiplier", "3")
		}
		if o.args != nil {
			cn.args = append(cn.args, o.args(i, cn.Dir)...)
		}
	}
	up := nodes[:n-o.late]
	for _, cn := range up {
		cn.launch(t)
	}
	for _, cn := range up {
		cn.waitHealthy(t)
	}
	return nodes
}

// start runs the node's process with its fixed addresses and waits
// until it is healthy.
func (cn *clusterNode) start(t testing.TB) {
	t.Helper()
	cn.launch(t)
	cn.waitHealthy(t)
}

// launch runs the node's process; it stops when the test ends.
func (cn *clusterNode) launch(t testing.TB) {
	t.Helper()
	p, err := startProcEnv(t, cn.ID, contrailBin, []string{clusterSecretEnv + "=" + cn.secret}, cn.args...)
	if err != nil {
		t.Fatal(err)
	}
	p.cleanExit = true
	cn.proc = p
	t.Cleanup(p.stop)
	if tl := cn.timeline; tl != nil {
		tl.add(p)
		// Runs before the stops registered earlier: the newest launch's
		// prints, once, ahead of every process's output.
		t.Cleanup(func() {
			if t.Failed() {
				tl.once.Do(func() { tl.print(t) })
			}
		})
	}
}

// waitHealthy waits until the node's /healthz answers 200.
func (cn *clusterNode) waitHealthy(t testing.TB) {
	t.Helper()
	// A clustered node is healthy once caught up, which takes a race-
	// built node on loaded cores longer.
	if err := waitHealthyWithin(cn.proc, cn.MonURL, clusterTimeout()); err != nil {
		cn.proc.stop()
		t.Fatal(err)
	}
}

// kill ends the node with SIGKILL (no graceful shutdown).
func (cn *clusterNode) kill(t testing.TB) {
	t.Helper()
	cn.signal(syscall.SIGKILL)
	if _, ok := cn.wait(stopTimeout); !ok {
		t.Fatalf("%s did not die", cn.ID)
	}
}

// terminate stops the node with SIGTERM, as an operator does, and waits.
func (cn *clusterNode) terminate(t testing.TB) {
	t.Helper()
	cn.signal(syscall.SIGTERM)
	if _, ok := cn.wait(stopTimeout); !ok {
		t.Fatalf("%s did not stop", cn.ID)
	}
}

// restart starts a killed or stopped node again with the same id,
// addresses and data directory.
func (cn *clusterNode) restart(t testing.TB) {
	t.Helper()
	cn.start(t)
}

// restartAll starts stopped nodes again together: a node is healthy only
// once its groups have leaders, which takes a majority of them running.
func restartAll(t testing.TB, nodes []*clusterNode) {
	t.Helper()
	for _, cn := range nodes {
		cn.launch(t)
	}
	for _, cn := range nodes {
		cn.waitHealthy(t)
	}
}

// routez is a node's /routez.
func (cn *clusterNode) routez(t testing.TB) map[string]any {
	var m map[string]any
	getJSON(t, cn.MonURL+"/routez", &m)
	return m
}

// waitMesh waits until every node has a route to every other.
func waitMesh(t testing.TB, nodes []*clusterNode) {
	t.Helper()
	waitFor(t, startTimeout, "full mesh", func() bool {
		for _, cn := range nodes {
			var m map[string]any
			if err := fetchJSON(cn.MonURL+"/routez", &m); err != nil {
				return false
			}
			if n, _ := m["num_routes"].(float64); int(n) != len(nodes)-1 {
				return false
			}
		}
		return true
	})
}
