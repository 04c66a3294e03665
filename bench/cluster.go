package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster scenario (-cluster): three Contrail nodes against a three-node
// nats-server cluster, twice: with nats-server's default fsync (its R3
// streams acknowledge before the bytes are on disk: sync_interval 2m)
// and with `sync_interval: always`, the durability Contrail gives (an
// ack after a quorum has fsynced). All clusters run on loopback at once;
// the throughput workloads alternate between them round by round.
const (
	clusterNodes      = 3
	clusterStreams16  = 16 // streams (and clients) of the multi-stream workload
	clusterReadyWait  = 60 * time.Second
	clusterOpTimeout  = 30 * time.Second
	failoverAttempt   = 500 * time.Millisecond // one publish attempt across the failover
	infoRequests      = 1000                   // consumer infos per round
	infoWarmup        = 50                     // consumer infos before a round's are timed
	failoverGiveUp    = 30 * time.Second
	idleWorkers       = 16
	idleSettle        = 10 * time.Second // after creating, before measuring
	idleWindow        = 10 * time.Second // CPU is averaged over this
	clusterSettle     = 10 * time.Second // after start, before the first workload
	clockTicksPerSec  = 100              // USER_HZ of /proc/<pid>/stat on Linux
	sideNatsServerFsy = "nats-server-sync"
)

// Contrail's targets from the clustering issue.
const (
	targetFailover = time.Second
	targetIdleCPU  = 5.0 // % of one core per node
	targetIdleRSS  = 512 // MiB per node
)

// clusterSide is one side's cluster: its nodes n1..n3 and a pseudo
// server whose URL lists all of them, for natscli.
type clusterSide struct {
	name, desc string
	nodes      []*server
	all        *server
}

// clusterSpec is how one side's cluster is started.
type clusterSpec struct {
	name, desc, bin string
	kind            clusterKind
}

// clusterKind builds a node's command line: contrail's flags, or a
// nats-server config file written into dir.
type clusterKind func(i int, ports [][3]int, dir, dataDir string) ([]string, error)

// contrailClusterArgs runs node i of a Contrail cluster: --node-id,
// --cluster-addr and --peers naming all three.
func contrailClusterArgs(i int, ports [][3]int, _, dataDir string) ([]string, error) {
	var peers []string
	for j, p := range ports {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", j+1, p[2]))
	}
	return append(contrailArgs(ports[i][0], ports[i][1], dataDir),
		"--node-id", fmt.Sprintf("n%d", i+1), "--cluster-addr", fmt.Sprintf("127.0.0.1:%d", ports[i][2]),
		"--peers", strings.Join(peers, ",")), nil
}

// natsServerClusterArgs writes node i's nats-server config: JetStream
// with the given sync_interval ("" keeps nats-server's default), a
// cluster block with routes to the others, and extra (more settings, or
// "").
func natsServerClusterArgs(syncInterval, extra string) clusterKind {
	return func(i int, ports [][3]int, dir, dataDir string) ([]string, error) {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p[2]))
			}
		}
		sync := ""
		if syncInterval != "" {
			sync = "  sync_interval: " + syncInterval + "\n"
		}
		conf := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n"+
			"jetstream {\n  store_dir: %q\n%s}\n"+
			"cluster {\n  name: bench\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n%s",
			i+1, ports[i][0], ports[i][1], dataDir, sync, ports[i][2], strings.Join(routes, ", "), extra)
		path := filepath.Join(dir, "server.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		return []string{"-c", path}, nil
	}
}

// startClusterSide starts the three nodes of a side at once (a node is
// healthy only once a majority is up) and waits until all are ready.
func startClusterSide(ctx context.Context, name, desc, bin string, kind clusterKind, root string) (*clusterSide, error) {
	flat, err := freePorts(3 * clusterNodes)
	if err != nil {
		return nil, err
	}
	ports := make([][3]int, clusterNodes)
	for i := range ports {
		ports[i] = [3]int{flat[3*i], flat[3*i+1], flat[3*i+2]}
	}
	cs := &clusterSide{name: name, desc: desc, nodes: make([]*server, clusterNodes)}
	errs := make([]error, clusterNodes)
	var wg sync.WaitGroup
	var urls []string
	for i := range cs.nodes {
		dir := filepath.Join(root, name, fmt.Sprintf("n%d", i+1))
		dataDir := filepath.Join(dir, "data")
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("creating data dir for %s: %w", name, err)
		}
		argv, err := kind(i, ports, dir, dataDir)
		if err != nil {
			return nil, err
		}
		s := &server{name: fmt.Sprintf("%s n%d", name, i+1),
			url:     fmt.Sprintf("nats://127.0.0.1:%d", ports[i][0]),
			monitor: fmt.Sprintf("http://127.0.0.1:%d", ports[i][1]),
			logPath: filepath.Join(dir, "server.log"), done: make(chan struct{})}
		logf, err := os.Create(s.logPath)
		if err != nil {
			return nil, err
		}
		cs.nodes[i] = s
		urls = append(urls, s.url)
		wg.Go(func() { errs[i] = s.launch(ctx, logf, bin, argv, clusterReadyWait) })
	}
	wg.Wait()
	cs.all = &server{name: name, url: strings.Join(urls, ","), monitor: cs.nodes[0].monitor, done: make(chan struct{})}
	if err := errors.Join(errs...); err != nil {
		cs.stop()
		return nil, err
	}
	return cs, nil
}

// stop stops every node.
func (cs *clusterSide) stop() {
	for _, n := range cs.nodes {
		if n != nil && n.cmd != nil {
			n.stop()
		}
	}
}

// deadNode is a node that exited on its own, if any.
func (cs *clusterSide) deadNode() *server {
	for _, n := range cs.nodes {
		if !n.alive() {
			return n
		}
	}
	return nil
}

// logTails is every node's log tail.
func (cs *clusterSide) logTails(n int) string {
	var b strings.Builder
	for _, s := range cs.nodes {
		fmt.Fprintf(&b, "  --- %s log (tail) ---\n%s\n", s.name, indent(s.logTail(n)))
	}
	return b.String()
}

// clusterMetric is one row of the cluster table.
type clusterMetric struct {
	workload, metric string
	lowerBetter      bool
	format           func(float64) string
	vals             map[string][]float64 // per side, per round
	errs             map[string]error
	note             map[string]string
}

func newClusterMetric(workload, metric string, lowerBetter bool, format func(float64) string) *clusterMetric {
	return &clusterMetric{workload: workload, metric: metric, lowerBetter: lowerBetter, format: format,
		vals: map[string][]float64{}, errs: map[string]error{}, note: map[string]string{}}
}

func (m *clusterMetric) median(side string) float64 {
	vs := slices.Clone(m.vals[side])
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func rateFormat(v float64) string  { return commas(int64(math.Round(v))) }
func msFormat(v float64) string    { return strconv.FormatFloat(v, 'f', 0, 64) }
func oneDecimal(v float64) string  { return strconv.FormatFloat(v, 'f', 1, 64) }
func twoDecimals(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// clusterWorkloads are the natscli workloads on an R3 file stream.
var clusterWorkloads = []Workload{
	{
		Name:  "R3 js pub async",
		Div:   2,
		Reset: [][]string{rmStream},
		Main:  []string{"bench", "js", "pub", "async", jsSubject, "--create", "--purge", "--storage", "file", "--replicas", "3"},
	},
	{
		// As the single-node "js pub async capped": every stored
		// message evicts the oldest, on all three replicas.
		Name:  "R3 js pub async capped",
		Div:   2,
		Reset: [][]string{rmStream},
		Setup: [][]string{{"stream", "add", streamName, "--subjects", jsSubject, "--storage", "file", "--replicas", "3",
			"--max-bytes", "1MB", "--discard", "old", "--defaults"}},
		Main: []string{"bench", "js", "pub", "async", jsSubject, "--purge"},
	},
	{
		Name:  "R3 js fetch",
		Div:   2,
		Reset: [][]string{rmStream},
		Setup: [][]string{{"bench", "js", "pub", "async", jsSubject, "--create", "--purge", "--storage", "file", "--replicas", "3"}},
		Main:  []string{"bench", "js", "fetch"},
	},
}

// clusterBenchmark runs the cluster scenario.
func clusterBenchmark(ctx context.Context, cfg config) error {
	root, cleanup, err := benchDir("contrail-bench-cluster-", cfg.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	if _, err := raiseOpenFileLimit(uint64(6*cfg.idleStreams + 4096)); err != nil {
		fmt.Fprintf(os.Stderr, "bench: warning: open-file limit: %v\n", err)
	}
	natsBin, err := natsCLI.ensure(ctx, cfg.natsBin)
	if err != nil {
		return err
	}
	contrailBin, serverBin, err := serverBinaries(ctx, cfg, root)
	if err != nil {
		return err
	}
	var cKind clusterKind = contrailClusterArgs
	cDesc := "Contrail, 3 nodes, ack after a quorum fsynced"
	if cfg.selftest {
		cKind, cDesc = natsServerClusterArgs("", ""), "SELFTEST: a nats-server cluster (default fsync)"
	}
	sides := []clusterSpec{
		{sideContrail, cDesc, contrailBin, cKind},
		{sideNatsServer, "nats-server " + natsServer.version + ", 3 nodes, default fsync (sync_interval 2m: acks before fsync)", serverBin, natsServerClusterArgs("", "")},
		{sideNatsServerFsy, "nats-server " + natsServer.version + ", 3 nodes, sync_interval: always (fsync before ack, as Contrail)", serverBin, natsServerClusterArgs("always", "")},
	}
	clusters := map[string]*clusterSide{}
	var order []string
	for _, s := range sides {
		cs, err := startClusterSide(ctx, s.name, s.desc, s.bin, s.kind, root)
		if err != nil {
			return err
		}
		defer cs.stop()
		clusters[s.name] = cs
		order = append(order, s.name)
		fmt.Printf("%-17s %s: %s\n", s.name, s.desc, cs.all.url)
	}
	fmt.Printf("nats:             %s %s\n", natsBin, natsCLI.version)
	// Every cluster gets the same quiet time after its start: elections,
	// and Contrail's leadership balancer spreading the partition leaders.
	fmt.Printf("letting the clusters settle for %s (load average %s)\n", clusterSettle, loadAverage())
	select {
	case <-time.After(clusterSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	runner, err := newNatsRunner(natsBin, root, cfg.timeout, cfg.subGrace, cfg.verbose)
	if err != nil {
		return err
	}

	var metrics []*clusterMetric
	// sidesFor alternates who goes first round by round.
	sidesFor := func(round int, names []string) []string {
		out := slices.Clone(names)
		if k := round % len(out); k > 0 {
			out = append(out[k:], out[:k]...)
		}
		return out
	}
	record := func(m *clusterMetric, side string, round int, v float64, err error, unit string) {
		if err != nil {
			m.errs[side] = err
			fmt.Printf("  round %d/%d  %-17s  FAILED: %v\n", round+1, cfg.rounds, side, err)
			var ce *cmdError
			if errors.As(err, &ce) && ce.output != "" {
				fmt.Printf("  --- nats output (tail) ---\n%s\n", indent(ce.output))
			}
			fmt.Print(clusters[side].logTails(15))
			return
		}
		m.vals[side] = append(m.vals[side], v)
		fmt.Printf("  round %d/%d  %-17s  %s %s\n", round+1, cfg.rounds, side, m.format(v), unit)
	}

	for _, w := range clusterWorkloads {
		msgs := w.msgs(cfg.msgs)
		m := newClusterMetric(w.Name, "msgs/s", false, rateFormat)
		metrics = append(metrics, m)
		// What the three nodes spent per message: on a shared machine it
		// varies less than the rate, as the clusters share the same
		// cores. Only for a workload whose round is all measured writes
		// (a setup would count too).
		var cpu *clusterMetric
		if len(w.Setup) == 0 {
			cpu = newClusterMetric(w.Name, clusterCPUMetric, true, oneDecimal)
			metrics = append(metrics, cpu)
		}
		fmt.Printf("\n%s (%s msgs x %d rounds)\n", w.Name, commas(msgs), cfg.rounds)
		for round := range cfg.rounds {
			for _, side := range sidesFor(round, order) {
				if m.errs[side] != nil {
					continue
				}
				tag := fmt.Sprintf("%s-%s-r%d", strings.ReplaceAll(w.Name, " ", "-"), side, round+1)
				before, cpuErr := clusterTicks(clusters[side])
				vals, warns, err := runner.runRound(ctx, w, clusters[side].all, msgs, tag)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				v := math.NaN()
				if err == nil {
					v = vals[0]
				}
				record(m, side, round, v, err, "msgs/s")
				if cpu != nil && err == nil {
					after, err := clusterTicks(clusters[side])
					if err = errors.Join(cpuErr, err); err != nil {
						record(cpu, side, round, 0, err, "")
					} else {
						record(cpu, side, round, float64(after-before)/clockTicksPerSec*1e6/float64(msgs), nil, "µs of server CPU per msg")
					}
				}
				for _, line := range warns {
					fmt.Printf("               nats: %s\n", line)
				}
			}
		}
	}

	{
		msgs := max(cfg.msgs/2, clusterStreams16)
		m := newClusterMetric(fmt.Sprintf("R3 js pub async, %d streams", clusterStreams16), "msgs/s (all clients)", false, rateFormat)
		metrics = append(metrics, m)
		fmt.Printf("\n%s (%d clients, one stream each, %s msgs in all x %d rounds)\n", m.workload, clusterStreams16, commas(msgs), cfg.rounds)
		for round := range cfg.rounds {
			for _, side := range sidesFor(round, order) {
				if m.errs[side] != nil {
					continue
				}
				v, err := runManyStreams(ctx, runner, clusters[side].all, msgs, fmt.Sprintf("many-%s-r%d", side, round+1))
				if ctx.Err() != nil {
					return ctx.Err()
				}
				record(m, side, round, v, err, "msgs/s")
			}
		}
	}

	{
		rate := newClusterMetric("R3 consumer info, serial", "requests/s", false, rateFormat)
		p50 := newClusterMetric("", "p50 ms", true, twoDecimals)
		metrics = append(metrics, rate, p50)
		fmt.Printf("\n%s: %d infos of one durable in a row, from a client on a follower (x %d rounds)\n", rate.workload, infoRequests, cfg.rounds)
		for round := range cfg.rounds {
			for _, side := range sidesFor(round, order) {
				if rate.errs[side] != nil {
					continue
				}
				res, err := measureInfo(ctx, clusters[side], infoRequests)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				record(rate, side, round, res.rate, err, "requests/s")
				if err == nil {
					record(p50, side, round, float64(res.p50.Microseconds())/1000, nil, "ms p50")
				}
			}
		}
	}

	{
		m := newClusterMetric("failover (kill -9 the R3 leader)", "ms to the first ack", true, msFormat)
		metrics = append(metrics, m)
		fmt.Printf("\n%s: a publisher on a follower publishes with retries; time from the kill to the first acknowledged publish sent after it (x %d rounds)\n", m.workload, cfg.rounds)
		for round := range cfg.rounds {
			for _, side := range sidesFor(round, order) {
				if m.errs[side] != nil {
					continue
				}
				d, err := measureFailover(ctx, clusters[side])
				if ctx.Err() != nil {
					return ctx.Err()
				}
				record(m, side, round, float64(d.Microseconds())/1000, err, "ms")
			}
		}
	}

	for _, side := range order {
		if dead := clusters[side].deadNode(); dead != nil {
			fmt.Printf("\n%s exited (%v)\n%s", dead.name, dead.waitErr, dead.logTail(20))
		}
	}

	// Idle cost last: the streams stay. Each side is measured alone, the
	// others stopped, so their work does not count against it.
	clusters[sideNatsServerFsy].stop()
	idle := []string{sideContrail, sideNatsServer}
	base := newClusterMetric("idle, before creating them", "CPU % of a core (busiest node)", true, oneDecimal)
	cpu := newClusterMetric(fmt.Sprintf("idle, %s R3 streams", commas(int64(cfg.idleStreams))), "CPU % of a core (busiest node)", true, oneDecimal)
	rss := newClusterMetric("", "RSS MiB (largest node)", true, oneDecimal)
	rate := newClusterMetric("", "streams created / s", false, oneDecimal)
	metrics = append(metrics, base, cpu, rss, rate)
	fmt.Printf("\nidle cost: create %s R3 file streams (%d clients, at most %s per side), wait %s, then CPU over %s and RSS per node\n",
		commas(int64(cfg.idleStreams)), idleWorkers, cfg.idleTimeout, idleSettle, idleWindow)
	for _, side := range idle {
		cs := clusters[side]
		res, err := measureIdle(ctx, cs, cfg.idleStreams, cfg.idleTimeout)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			record(cpu, side, 0, 0, err, "")
			cs.stop()
			continue
		}
		cpu.note[side] = res.stopped
		base.vals[side] = []float64{slices.Max(res.baseCPU)}
		cpu.vals[side] = []float64{slices.Max(res.cpu)}
		rss.vals[side] = []float64{slices.Max(res.rssMiB)}
		rate.vals[side] = []float64{float64(res.created) / res.createTime.Seconds()}
		fmt.Printf("  %-17s before: CPU %% per node %s; %s streams in %s (%.1f/s); then CPU %% per node %s, RSS MiB per node %s\n", side,
			joinFloats(res.baseCPU), commas(int64(res.created)), res.createTime.Round(time.Millisecond),
			float64(res.created)/res.createTime.Seconds(), joinFloats(res.cpu), joinFloats(res.rssMiB))
		cs.stop()
	}

	printClusterTable(os.Stdout, metrics, cfg.rounds)
	fmt.Printf("load average at the end: %s (the machine's other work competes with the clusters)\n", loadAverage())
	var failed []string
	for _, m := range metrics {
		for side, err := range m.errs {
			if err != nil {
				failed = append(failed, m.workload+" on "+side)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

func joinFloats(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = oneDecimal(v)
	}
	return strings.Join(parts, " / ")
}

// runManyStreams publishes msgs in all from clusterStreams16 natscli
// processes at once, each to its own R3 stream, and returns the
// aggregate rate: all messages over the wall time from the first start
// to the last exit.
func runManyStreams(ctx context.Context, n *natsRunner, srv *server, msgs int64, tag string) (float64, error) {
	per := msgs / clusterStreams16
	for i := range clusterStreams16 {
		name := fmt.Sprintf("bench%02d", i)
		_, _ = n.run(ctx, n.args(srv, []string{"stream", "rm", name, "--force"}, 0, ""))
		if _, err := n.run(ctx, n.args(srv, []string{"stream", "add", name, "--subjects", "bench.m" + strconv.Itoa(i),
			"--storage", "file", "--replicas", "3", "--defaults"}, 0, "")); err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
	}
	procs := make([]*proc, clusterStreams16)
	start := time.Now()
	for i := range procs {
		args := n.args(srv, []string{"bench", "js", "pub", "async", "bench.m" + strconv.Itoa(i), "--stream", fmt.Sprintf("bench%02d", i)},
			per, filepath.Join(n.runsDir, fmt.Sprintf("%s-%02d.csv", tag, i)))
		p, err := n.start(ctx, args, "")
		if err != nil {
			return 0, err
		}
		defer p.kill()
		procs[i] = p
	}
	for _, p := range procs {
		if err := p.wait(n.timeout); err != nil {
			return 0, err
		}
	}
	return float64(per*clusterStreams16) / time.Since(start).Seconds(), nil
}

// measureFailover kills the leader of an R3 stream with SIGKILL while a
// client connected to a follower publishes, and returns the time from
// the kill to the first acknowledged publish sent after it. The killed
// node is started again on its data and the round ends once every
// replica is current.
func measureFailover(ctx context.Context, cs *clusterSide) (time.Duration, error) {
	const name, subj = "failover", "failover.x"
	nc, js, err := connectJS(cs.all.url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	leader, err := r3Stream(ctx, cs, js, name, subj)
	if err != nil {
		return 0, err
	}
	var urls []string
	for i := range cs.nodes {
		if i != leader {
			urls = append(urls, cs.nodes[i].url)
		}
	}
	urls = append(urls, cs.nodes[leader].url)
	pc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	pjs, err := jetstream.New(pc)
	if err != nil {
		return 0, err
	}

	var killedAt atomic.Int64 // UnixNano; 0 before the kill
	firstAck := make(chan time.Time, 1)
	stop := make(chan struct{})
	warm := make(chan struct{})
	var errMu sync.Mutex
	var pubErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		acked := 0
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now()
			octx, cancel := context.WithTimeout(ctx, failoverAttempt)
			_, err := pjs.Publish(octx, subj, []byte("m"), jetstream.WithMsgID(fmt.Sprintf("%d-%d", sent.UnixNano(), seq)),
				jetstream.WithRetryWait(10*time.Millisecond))
			cancel()
			if err != nil {
				if k := killedAt.Load(); k == 0 && acked < 50 {
					errMu.Lock()
					pubErr = err
					errMu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
				continue
			}
			acked++
			if acked == 50 {
				close(warm)
			}
			if k := killedAt.Load(); k != 0 && sent.UnixNano() >= k {
				firstAck <- time.Now()
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	select {
	case <-warm:
	case <-time.After(clusterOpTimeout):
		errMu.Lock()
		defer errMu.Unlock()
		return 0, fmt.Errorf("publisher not acknowledged 50 times before the kill (last error: %v)", pubErr)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	victim := cs.nodes[leader]
	t0 := time.Now()
	killedAt.Store(t0.UnixNano())
	if err := victim.cmd.Process.Kill(); err != nil {
		return 0, err
	}
	var d time.Duration
	select {
	case at := <-firstAck:
		d = at.Sub(t0)
	case <-time.After(failoverGiveUp):
		return 0, fmt.Errorf("no publish acknowledged within %s of killing leader n%d", failoverGiveUp, leader+1)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	<-victim.done
	again, err := restartServer(ctx, victim, clusterReadyWait)
	if err != nil {
		return 0, fmt.Errorf("restarting n%d: %w", leader+1, err)
	}
	cs.nodes[leader] = again
	// The next round needs every replica back.
	if _, err := untilOK(ctx, func(octx context.Context) (*jetstream.StreamInfo, error) {
		s, err := js.Stream(octx, name)
		if err != nil {
			return nil, err
		}
		info, err := s.Info(octx)
		if err != nil {
			return nil, err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != len(cs.nodes)-1 {
			return nil, errors.New("replicas missing")
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				return nil, fmt.Errorf("%s not current", r.Name)
			}
		}
		return info, nil
	}); err != nil {
		fmt.Printf("  warning: %s: n%d did not catch up: %v\n", cs.name, leader+1, err)
	}
	return d, nil
}

// connectJS connects a JetStream client to url (one server or a list).
func connectJS(url string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// r3Stream creates (or finds) an R3 file stream on subj and returns the
// index of the node leading it, once it has a leader.
func r3Stream(ctx context.Context, cs *clusterSide, js jetstream.JetStream, name, subj string) (int, error) {
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage, Replicas: 3}
	info, err := untilOK(ctx, func(octx context.Context) (*jetstream.StreamInfo, error) {
		s, err := js.CreateOrUpdateStream(octx, cfg)
		if err != nil {
			return nil, err
		}
		info, err := s.Info(octx)
		if err == nil && (info.Cluster == nil || info.Cluster.Leader == "") {
			err = errors.New("no leader yet")
		}
		return info, err
	})
	if err != nil {
		return 0, fmt.Errorf("stream %s with a leader: %w", name, err)
	}
	for i := range cs.nodes {
		if fmt.Sprintf("n%d", i+1) == info.Cluster.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("leader %q is not one of n1..n%d", info.Cluster.Leader, len(cs.nodes))
}

// infoResult is one round of serial consumer infos.
type infoResult struct {
	rate float64       // requests answered per second
	p50  time.Duration // one request's round trip
}

// measureInfo asks for a durable consumer's info n times in a row from a
// client connected to a follower of its R3 stream, as `nats consumer
// info` does: each request goes to the consumer's leader and back, and
// on Contrail waits for its read fence. A stock client's view of the
// API's latency, which no nats bench workload measures.
func measureInfo(ctx context.Context, cs *clusterSide, n int) (infoResult, error) {
	const name, subj, durable = "infos", "infos.x", "C"
	nc, js, err := connectJS(cs.all.url)
	if err != nil {
		return infoResult{}, err
	}
	defer nc.Close()
	leader, err := r3Stream(ctx, cs, js, name, subj)
	if err != nil {
		return infoResult{}, err
	}
	fc, fjs, err := connectJS(cs.nodes[(leader+1)%len(cs.nodes)].url)
	if err != nil {
		return infoResult{}, err
	}
	defer fc.Close()
	cons, err := untilOK(ctx, func(octx context.Context) (jetstream.Consumer, error) {
		return fjs.CreateOrUpdateConsumer(octx, name, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy})
	})
	if err != nil {
		return infoResult{}, fmt.Errorf("consumer %s on %s: %w", durable, name, err)
	}
	ask := func() error {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := cons.Info(octx)
		return err
	}
	for range infoWarmup {
		if err := ask(); err != nil {
			return infoResult{}, fmt.Errorf("warm-up consumer info: %w", err)
		}
	}
	took := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		if err := ask(); err != nil {
			return infoResult{}, fmt.Errorf("consumer info %d of %d: %w", i+1, n, err)
		}
		took = append(took, time.Since(t0))
	}
	elapsed := time.Since(start)
	slices.Sort(took)
	return infoResult{rate: float64(n) / elapsed.Seconds(), p50: took[len(took)/2]}, nil
}

// untilOK calls f with a per-call timeout until it succeeds, for at most
// clusterOpTimeout.
func untilOK[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(clusterOpTimeout)
	for {
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := f(octx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return v, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idleResult is one side's idle cost.
type idleResult struct {
	created              int
	createTime           time.Duration
	baseCPU, cpu, rssMiB []float64 // per node; baseCPU before any stream is created
	stopped              string    // why fewer than asked were created, if so
}

// measureIdle creates n R3 file streams (stopping at timeout: then
// fewer), lets the cluster settle, and reads each node's CPU use over
// idleWindow and RSS from /proc.
func measureIdle(ctx context.Context, cs *clusterSide, n int, timeout time.Duration) (*idleResult, error) {
	conns := make([]jetstream.JetStream, idleWorkers)
	for i := range conns {
		nc, err := nats.Connect(cs.nodes[i%len(cs.nodes)].url, nats.Timeout(clusterOpTimeout), nats.MaxReconnects(-1))
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		defer nc.Close()
		var err2 error
		if conns[i], err2 = jetstream.New(nc); err2 != nil {
			return nil, err2
		}
	}
	r := &idleResult{}
	var err error
	if r.baseCPU, err = cpuPercents(ctx, cs); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var created, worker atomic.Int64
	start := time.Now()
	err = parallel(cctx, n, idleWorkers, func(i int) error {
		js := conns[int(worker.Add(1))%idleWorkers]
		name := fmt.Sprintf("I%06d", i)
		_, err := untilOK(cctx, func(octx context.Context) (jetstream.Stream, error) {
			return js.CreateStream(octx, jetstream.StreamConfig{Name: name, Subjects: []string{"idle." + strconv.Itoa(i)},
				Storage: jetstream.FileStorage, Replicas: 3})
		})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			if cctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("create %s: %w", name, err)
		}
		if c := created.Add(1); c%1000 == 0 {
			fmt.Printf("    %s: %s streams  %s\n", cs.name, commas(c), time.Since(start).Round(time.Millisecond))
		}
		return nil
	})
	r.created, r.createTime = int(created.Load()), time.Since(start)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case cctx.Err() != nil:
		r.stopped = fmt.Sprintf("only %s streams created in %s (-idle-timeout)", commas(int64(r.created)), timeout)
	case errors.Is(err, context.DeadlineExceeded):
		// The server stopped answering: measure what it has.
		r.stopped = fmt.Sprintf("creation stalled after %s streams in %s: %v (no reply for %s)",
			commas(int64(r.created)), r.createTime.Round(time.Second), err, clusterOpTimeout)
		fmt.Printf("    %s: %s\n", cs.name, r.stopped)
	case err != nil:
		return nil, err
	}
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.cpu, err = cpuPercents(ctx, cs); err != nil {
		return nil, err
	}
	for _, s := range cs.nodes {
		rss, err := readRSS(s.pid())
		if err != nil {
			return nil, err
		}
		r.rssMiB = append(r.rssMiB, mib(rss.total))
	}
	return r, nil
}

// loadAverage is the 1, 5 and 15 minute load averages from
// /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// clusterCPUMetric names the CPU a workload's round cost the three nodes.
const clusterCPUMetric = "server CPU µs/msg (3 nodes)"

// clusterTicks is the user plus system time of every node of cs.
func clusterTicks(cs *clusterSide) (int64, error) {
	var sum int64
	for _, s := range cs.nodes {
		t, err := cpuTicks(s.pid())
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// cpuPercents is each node's CPU use over idleWindow, in % of one core.
func cpuPercents(ctx context.Context, cs *clusterSide) ([]float64, error) {
	before := make([]int64, len(cs.nodes))
	var err error
	for i, s := range cs.nodes {
		if before[i], err = cpuTicks(s.pid()); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	select {
	case <-time.After(idleWindow):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := time.Since(t0).Seconds()
	out := make([]float64, len(cs.nodes))
	for i, s := range cs.nodes {
		after, err := cpuTicks(s.pid())
		if err != nil {
			return nil, err
		}
		out[i] = 100 * float64(after-before[i]) / clockTicksPerSec / elapsed
	}
	return out, nil
}

// cpuTicks is a process's user plus system time in clock ticks, from
// /proc/<pid>/stat (fields 14 and 15; the command name in field 2 may
// hold spaces, so fields are counted after its closing parenthesis).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return ut + st, nil
}

// printClusterTable prints the medians side by side, the ratios to both
// nats-server runs, notes and Contrail's figures against its targets.
func printClusterTable(out io.Writer, metrics []*clusterMetric, rounds int) {
	sides := []string{sideContrail, sideNatsServer, sideNatsServerFsy}
	rows := [][]string{{"workload", "metric", sideContrail, sideNatsServer, "ratio", sideNatsServerFsy, "ratio"}}
	// A side that failed a round shows the median of the rounds it
	// completed, marked with how many failed (its later rounds were
	// skipped), or FAILED if none completed.
	cell := func(m *clusterMetric, side string) string {
		v := fmtNaN(m.format, m.median(side))
		switch {
		case m.errs[side] == nil:
			return v
		case len(m.vals[side]) == 0:
			return "FAILED"
		default:
			return fmt.Sprintf("%s (%d ok, then FAILED)", v, len(m.vals[side]))
		}
	}
	ratio := func(m *clusterMetric, ref string) string {
		c, n := m.median(sideContrail), m.median(ref)
		if math.IsNaN(c) || math.IsNaN(n) || n == 0 {
			return "-"
		}
		return strconv.FormatFloat(c/n, 'f', 2, 64)
	}
	for _, m := range metrics {
		row := []string{m.workload, m.metric}
		for i, side := range sides {
			row = append(row, cell(m, side))
			if i > 0 {
				row = append(row, ratio(m, side))
			}
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(out, "\nmedian of %d round(s) (idle: one measurement); ratio = contrail / that nats-server run\n", rounds)
	fmt.Fprintln(out, "nats-server = default fsync (R3 acks before the bytes are fsynced); nats-server-sync = sync_interval: always (the durability Contrail gives)")
	fmt.Fprintln(out, "msgs/s and streams/s: higher is better; ms, CPU and RSS: lower is better")
	fmt.Fprintln(out)
	writeTable(out, rows, 2)
	for _, m := range metrics {
		for _, side := range sides {
			if note := m.note[side]; note != "" {
				fmt.Fprintf(out, "note: %s on %s: %s\n", m.workload, side, note)
			}
		}
	}
	var targets []string
	for _, m := range metrics {
		c := m.median(sideContrail)
		if math.IsNaN(c) {
			continue
		}
		if m.errs[sideContrail] != nil {
			targets = append(targets, fmt.Sprintf("%s: FAILED in a round (see above)", m.workload))
			continue
		}
		switch {
		case m.workload == "R3 js pub async" && m.metric == "msgs/s":
			n := m.median(sideNatsServer)
			targets = append(targets, fmt.Sprintf("R3 async publish ≥ 1.5x nats-server: %s", verdict(!math.IsNaN(n) && c >= 1.5*n)))
		case strings.HasPrefix(m.workload, "failover"):
			targets = append(targets, fmt.Sprintf("failover ≤ %s: %s", targetFailover, verdict(c <= float64(targetFailover.Milliseconds()))))
		case strings.HasPrefix(m.metric, "CPU") && strings.HasSuffix(m.workload, "R3 streams"):
			targets = append(targets, fmt.Sprintf("idle CPU ≤ %.0f%% of a core per node: %s", targetIdleCPU, verdict(c <= targetIdleCPU)))
		case strings.HasPrefix(m.metric, "RSS"):
			targets = append(targets, fmt.Sprintf("idle RSS ≤ %d MiB per node: %s", targetIdleRSS, verdict(c <= targetIdleRSS)))
		}
	}
	if len(targets) > 0 {
		fmt.Fprintf(out, "\n%s targets: %s\n", sideContrail, strings.Join(targets, "; "))
	}
}

func fmtNaN(f func(float64) string, v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return f(v)
}
