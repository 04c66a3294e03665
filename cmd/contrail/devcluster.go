package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/contrail/contrail/controlplane"
)

// `contrail dev --nodes N` runs N data-plane nodes as child processes of
// the same binary (`contrail dataplane` with --node-id, --cluster-addr and
// --peers), so that one node can be killed with kill -9 to watch the
// others take over; the control plane stays in the dev process. A node
// that dies after it first came up is started again after
// devRestartDelay on its data dir, and catches up from the others.

// devRestartDelay is how long a dead dev node stays down: long enough to
// watch the failover, short enough not to wait for it.
const devRestartDelay = 5 * time.Second

// devStopTimeout bounds a node's graceful stop before it is killed.
const devStopTimeout = 15 * time.Second

// checkDevNodes accepts the node counts that make a working dev setup:
// one node, or a cluster that survives the loss of a node.
func checkDevNodes(n int) error {
	switch {
	case n < 1 || n > 5:
		return fmt.Errorf("--nodes %d: want 1 (a single node) or 3 to 5 (a cluster)", n)
	case n == 2:
		return errors.New("--nodes 2: a two-node cluster stops when either node does (raft needs a majority); use 3")
	}
	return nil
}

// devNodeAddrs spreads one address flag over n nodes: a list of n
// addresses is used as given; one HOST:PORT gives node i PORT+i; port 0
// gives each node a free port, picked now so it can be printed. An
// empty spec (a disabled monitor) gives n empty addresses.
func devNodeAddrs(flagName, spec string, n int) ([]string, error) {
	out := make([]string, n)
	if spec == "" {
		return out, nil
	}
	parts := strings.Split(spec, ",")
	switch len(parts) {
	case n:
		for i, p := range parts {
			if _, _, err := splitHostPort(strings.TrimSpace(p)); err != nil {
				return nil, fmt.Errorf("--%s %q: %w", flagName, p, err)
			}
			out[i] = strings.TrimSpace(p)
		}
		return out, nil
	case 1:
	default:
		return nil, fmt.Errorf("--%s: %d addresses for %d nodes; give one (the first node's, the others take the next ports) or %d", flagName, len(parts), n, n)
	}
	host, port, err := splitHostPort(spec)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	for i := range out {
		p := port + i
		if port == 0 {
			if p, err = freePort(host); err != nil {
				return nil, fmt.Errorf("--%s: %w", flagName, err)
			}
		} else if p > 65535 {
			return nil, fmt.Errorf("--%s: port %d for node %d is out of range", flagName, p, i+1)
		}
		out[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return out, nil
}

// freePort asks the kernel for a free port on host.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// devNode is one child node of `contrail dev --nodes N`.
type devNode struct {
	id                                 string // n1, n2, ...
	natsAddr, monitorAddr, clusterAddr string
	dataDir                            string
	bin                                string
	args                               []string
	env                                []string // added to this process's environment
	out                                io.Writer
	log                                *slog.Logger

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	err    error         // cmd's exit status, set before exited closes
}

// devNodes lays out the nodes over the flags' addresses, each with its
// own data dir under the dev data dir.
func devNodes(f *devFlags, out io.Writer, log *slog.Logger) ([]*devNode, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to run the nodes: %w", err)
	}
	natsAddrs, err := devNodeAddrs("nats-addr", f.natsAddr, f.nodes)
	if err != nil {
		return nil, err
	}
	monAddrs, err := devNodeAddrs("monitor-addr", f.monitorAddr, f.nodes)
	if err != nil {
		return nil, err
	}
	clusterAddrs, err := devNodeAddrs("cluster-addr", f.clusterAddr, f.nodes)
	if err != nil {
		return nil, err
	}
	// The nodes share a cluster secret made for this run, so the local
	// cluster's port admits only its own nodes, as a deployed one should.
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	env := []string{clusterSecretEnv + "=" + hex.EncodeToString(secret)}
	nodes := make([]*devNode, f.nodes)
	peers := make([]string, f.nodes)
	for i := range nodes {
		id := "n" + strconv.Itoa(i+1)
		nodes[i] = &devNode{id: id, natsAddr: natsAddrs[i], monitorAddr: monAddrs[i], clusterAddr: clusterAddrs[i],
			dataDir: filepath.Join(f.dataDir, id), bin: bin, env: env, out: &prefixWriter{prefix: "[" + id + "] ", w: out},
			log: log.With("node", id)}
		peers[i] = id + "=" + clusterAddrs[i]
	}
	// Every node tiers to one directory of the dev data dir: a replicated
	// stream's segments are shared by its replicas (the leader uploads,
	// any node may read after a failover), and each node's keys carry its
	// id, so the nodes never touch each other's objects.
	tierDir, err := filepath.Abs(filepath.Join(f.dataDir, "tier"))
	if err != nil {
		return nil, err
	}
	tierArgs := []string{"--tier-url", "file://" + tierDir}
	if f.tierSegment != "" {
		tierArgs = append(tierArgs, "--tier-segment-bytes", f.tierSegment)
	}
	if f.tierLocal != "" {
		tierArgs = append(tierArgs, "--tier-local-bytes", f.tierLocal)
	}
	for _, n := range nodes {
		n.args = append([]string{"dataplane", "--node-id", n.id,
			"--nats-addr", n.natsAddr, "--monitor-addr", n.monitorAddr,
			"--cluster-addr", n.clusterAddr, "--peers", strings.Join(peers, ","),
			"--data-dir", n.dataDir, "--log-level", f.logLevel}, tierArgs...)
	}
	return nodes, nil
}

// natsURLs is every node's client URL, comma-separated as clients take
// them.
func natsURLs(nodes []*devNode) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url()
	}
	return strings.Join(urls, ",")
}

// url is the node's client URL.
func (n *devNode) url() string { return "nats://" + n.natsAddr }

// launch starts the node's process.
func (n *devNode) launch() error {
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = n.out, n.out
	devChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

// pid is the running process's id.
func (n *devNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// state is the current process's exit channel and status.
func (n *devNode) state() (<-chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exited, n.err
}

// waitUp waits until the node accepts clients and, with a monitor, says
// it is healthy; it fails if the process exits first.
func (n *devNode) waitUp(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited, _ := n.state()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := waitListening(ctx, n.natsAddr)
	if err == nil && n.monitorAddr != "" {
		err = waitHTTP200(ctx, "http://"+n.monitorAddr+"/healthz")
	}
	select {
	case <-exited:
		_, status := n.state()
		return fmt.Errorf("node %s exited at start (%v); its log lines are prefixed [%s] above", n.id, status, n.id)
	default:
		return err
	}
}

// waitHTTP200 polls url until it answers 200 or ctx ends.
func waitHTTP200(ctx context.Context, url string) error {
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// supervise keeps the node running until ctx ends, then stops it: a node
// that dies (kill -9 to watch a failover) is started again after
// devRestartDelay.
func (n *devNode) supervise(ctx context.Context) {
	for {
		exited, _ := n.state()
		select {
		case <-ctx.Done():
			n.stop()
			return
		case <-exited:
		}
		_, status := n.state()
		n.log.Warn("node exited; starting it again", "status", fmt.Sprint(status), "in", devRestartDelay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(devRestartDelay):
		}
		if err := n.launch(); err != nil {
			n.log.Error("restarting node", "err", err)
			return
		}
		n.log.Info("node started again", "pid", n.pid())
	}
}

// quitAll passes a SIGQUIT on to the nodes. A dev cluster that will not
// stop is most often waiting for a node, and the node's stacks say why;
// but the nodes run in their own process group, so the signal sent to
// dev does not reach them. So dev writes its own goroutines' stacks,
// sends SIGQUIT to every node (each writes its stacks and exits), waits
// up to two seconds for them, and exits with the status the runtime's
// own SIGQUIT gives (2). Returns a func that stops watching.
func quitAll(nodes []*devNode) (stop func()) {
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-quit:
		}
		devOutput.Lock()
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		devOutput.Unlock()
		var waits []chan struct{}
		for _, n := range nodes {
			n.mu.Lock()
			cmd, exited := n.cmd, n.exited
			n.mu.Unlock()
			if cmd != nil && cmd.Process.Signal(syscall.SIGQUIT) == nil {
				waits = append(waits, exited)
			}
		}
		deadline := time.After(2 * time.Second)
		for _, exited := range waits {
			select {
			case <-exited:
			case <-deadline:
			}
		}
		os.Exit(2)
	}()
	return func() {
		signal.Stop(quit)
		close(done)
	}
}

// stop asks the node to shut down (SIGTERM: it hands its leaderships to
// the others) and kills it if it takes longer than devStopTimeout.
func (n *devNode) stop() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = cmd.Process.Kill()
	}
	select {
	case <-exited:
	case <-time.After(devStopTimeout):
		n.log.Warn("node did not stop in time; killing it", "timeout", devStopTimeout)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// prefixWriter writes whole lines to w, each starting with prefix, so
// the nodes' logs can share the dev process's stderr.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	buf    []byte
}

// devOutput serializes the nodes' lines on the shared stream.
var devOutput sync.Mutex

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		devOutput.Lock()
		_, err := fmt.Fprintf(p.w, "%s%s", p.prefix, p.buf[:i+1])
		devOutput.Unlock()
		p.buf = p.buf[i+1:]
		if err != nil {
			return len(b), err
		}
	}
}

// runDevCluster is `contrail dev --nodes N` for N > 1: the control plane
// here, the nodes as children, one cell listing every node's URL.
// The nodes trust cp's operator and fetch accounts from its resolver.
func runDevCluster(ctx context.Context, f *devFlags, cp *controlplane.ControlPlane, nodes []*devNode, stdout io.Writer, log *slog.Logger) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, n := range nodes {
		n.args = append(n.args, "--operator", cp.OperatorPath(), "--resolver", "URL("+cp.ResolverURL()+")",
			"--system-account", cp.Keys.SystemPub)
	}
	defer quitAll(nodes)()
	var wg sync.WaitGroup
	var cpErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		cpErr = cp.Serve(ctx)
	}()
	code := 0
	var started []*devNode
	for _, n := range nodes {
		if err := n.launch(); err != nil {
			log.Error("starting the nodes", "err", err)
			code = 1
			break
		}
		started = append(started, n)
	}
	// A node that cannot come up at all (a port taken, a bad data dir)
	// stops dev: restarting it would only repeat the error.
	for _, n := range started {
		if code != 0 {
			break
		}
		if err := n.waitUp(ctx); err != nil {
			if ctx.Err() == nil {
				log.Error("starting the nodes", "err", err)
				code = 1
			}
		}
	}
	if code != 0 || ctx.Err() != nil {
		cancel()
	} else {
		for _, n := range started {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.supervise(ctx)
			}()
		}
		if err := cp.WaitCells(ctx); err == nil {
			if dev, err := cp.EnsureDevOrg(ctx); err != nil {
				log.Error("creating the dev organization", "err", err)
				code = 1
				cancel()
			} else {
				if err := devJetStreamReady(ctx, nodes, dev.CredsPath); err != nil && ctx.Err() == nil {
					log.Warn("the cluster's JetStream did not answer yet", "err", err)
				}
				printDevCluster(stdout, f, cp, nodes, dev)
			}
		}
		<-ctx.Done()
	}
	for _, n := range started {
		n.stop() // the supervisors stop them too; this covers a failed start
	}
	wg.Wait()
	if cpErr != nil {
		log.Error("control plane stopped", "err", cpErr)
		code = 1
	}
	return code
}

// devJetStreamReady connects to every node as the dev user, which loads
// the dev account there (a node learns of an account when a client of
// it connects; a JetStream request for it routed from another node
// before that goes unanswered), then waits until the cluster answers
// the JetStream API (the meta group has a leader), so that what dev
// prints works at once.
func devJetStreamReady(ctx context.Context, nodes []*devNode, creds string) error {
	var last *nats.Conn
	for _, n := range nodes {
		nc, err := nats.Connect(n.url(), nats.UserCredentials(creds), nats.Name("contrail-dev"))
		if err != nil {
			return fmt.Errorf("node %s: %w", n.id, err)
		}
		defer nc.Close()
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			return fmt.Errorf("node %s: %w", n.id, err)
		}
		last = nc
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := last.RequestWithContext(rctx, "$JS.API.STREAM.NAMES", nil)
		rcancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// printDevCluster prints what a newcomer needs to try R3 and failover.
func printDevCluster(out io.Writer, f *devFlags, cp *controlplane.ControlPlane, nodes []*devNode, dev *controlplane.DevOrg) {
	all := natsURLs(nodes)
	fmt.Fprintf(out, "Contrail dev is running a %d-node cluster (data in %s)\n", len(nodes), f.dataDir)
	fmt.Fprintf(out, "  API:    http://%s/v1   (contract: http://%s/openapi.yaml)\n", cp.Addr(), cp.Addr())
	fmt.Fprintf(out, "  console: http://%s/   (open it in a browser and sign up)\n", cp.Addr())
	fmt.Fprintf(out, "  NATS:   %s\n", all)
	for _, n := range nodes {
		mon := "off"
		if n.monitorAddr != "" {
			mon = "http://" + n.monitorAddr
		}
		fmt.Fprintf(out, "  node %s: client %s   cluster %s   monitor %s   pid %d   data %s\n",
			n.id, n.url(), n.clusterAddr, mon, n.pid(), n.dataDir)
	}
	fmt.Fprintf(out, "  creds:  %s\n", dev.CredsPath)
	fmt.Fprintf(out, "  token:  %s   (an API token of the dev organization)\n", dev.TokenPath)
	fmt.Fprintf(out, "  try:    nats --server %s --creds %s stream add ORDERS --subjects 'orders.>' --replicas 3 --defaults\n", all, dev.CredsPath)
	fmt.Fprintf(out, "          kill -9 the pid of the stream's leader (nats stream info ORDERS names it); it starts again after %s\n", devRestartDelay)
	fmt.Fprintln(out, "Contrail dev is ready")
}
