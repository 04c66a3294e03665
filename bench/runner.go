package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// natsRunner runs natscli commands against a server.
type natsRunner struct {
	bin      string
	env      []string // natscli environment, isolated from the user's contexts
	runsDir  string   // where CSV files go
	timeout  time.Duration
	subGrace time.Duration
	verbose  bool
}

// newNatsRunner prepares an environment in which natscli ignores the
// user's NATS_* variables and saved contexts.
func newNatsRunner(bin, root string, timeout, subGrace time.Duration, verbose bool) (*natsRunner, error) {
	cfgDir := filepath.Join(root, "natscli-config")
	runsDir := filepath.Join(root, "runs")
	for _, d := range []string{cfgDir, runsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_CONFIG_HOME="+cfgDir)
	return &natsRunner{bin: bin, env: env, runsDir: runsDir, timeout: timeout, subGrace: subGrace, verbose: verbose}, nil
}

// cmdError is a failed natscli invocation with the tail of its output.
type cmdError struct {
	cmdline string
	output  string
	err     error
}

func (e *cmdError) Error() string { return fmt.Sprintf("`%s`: %v", e.cmdline, e.err) }
func (e *cmdError) Unwrap() error { return e.err }

// errTimedOut marks a natscli command killed for running too long.
var errTimedOut = errors.New("timed out")

// proc is a running natscli command.
type proc struct {
	cmdline string
	out     *watchBuffer
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// args builds the full natscli command line for args against srv.
func (n *natsRunner) args(srv *server, args []string, msgs int64, csvPath string) []string {
	full := append([]string{"-s", srv.url}, args...)
	if len(args) > 0 && args[0] == "bench" {
		full = append(full, "--msgs", strconv.FormatInt(msgs, 10), "--size", "128B", "--no-progress")
		if csvPath != "" {
			full = append(full, "--csv", csvPath)
		}
	}
	return full
}

// start launches natscli; watch, if non-empty, is a substring of its
// output that out.seen waits for.
func (n *natsRunner) start(ctx context.Context, args []string, watch string) (*proc, error) {
	p := &proc{
		cmdline: n.bin + " " + strings.Join(args, " "),
		out:     newWatchBuffer(watch),
		done:    make(chan struct{}),
	}
	if n.verbose {
		fmt.Printf("    $ %s\n", p.cmdline)
	}
	p.cmd = exec.CommandContext(ctx, n.bin, args...)
	p.cmd.Env = n.env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	isolate(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, &cmdError{cmdline: p.cmdline, err: err}
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// wait waits up to timeout for p to exit, killing it on timeout.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.fail(fmt.Errorf("%w after %s", errTimedOut, timeout))
	}
	if p.err != nil {
		return p.fail(p.err)
	}
	return nil
}

// kill stops p if it is still running.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) fail(err error) error {
	return &cmdError{cmdline: p.cmdline, output: tailLines(p.out.String(), 15), err: err}
}

// run runs natscli to completion.
func (n *natsRunner) run(ctx context.Context, args []string) (*proc, error) {
	p, err := n.start(ctx, args, "")
	if err != nil {
		return nil, err
	}
	return p, p.wait(n.timeout)
}

// runRound runs one round of w against srv and returns w.metrics() values
// and any warnings natscli printed for the measured commands.
func (n *natsRunner) runRound(ctx context.Context, w Workload, srv *server, msgs int64, tag string) ([]float64, []string, error) {
	for _, args := range w.Reset {
		// Best effort: e.g. the stream does not exist on the first round.
		_, _ = n.run(ctx, n.args(srv, args, msgs, ""))
	}
	for _, args := range w.Setup {
		if _, err := n.run(ctx, n.args(srv, args, msgs, "")); err != nil {
			return nil, nil, fmt.Errorf("setup: %w", err)
		}
	}
	mainCSV := filepath.Join(n.runsDir, tag+"-main.csv")
	if w.Sub == nil {
		p, err := n.run(ctx, n.args(srv, w.Main, msgs, mainCSV))
		if err != nil {
			return nil, nil, err
		}
		st, err := parseBenchCSV(mainCSV)
		if err != nil {
			return nil, nil, p.fail(err)
		}
		if w.Latency {
			return []float64{st.rate, st.p50}, warnings(p), nil
		}
		return []float64{st.rate}, warnings(p), nil
	}

	// Subscriber first; the publisher starts once it has subscribed.
	subCSV := filepath.Join(n.runsDir, tag+"-sub.csv")
	sub, err := n.start(ctx, n.args(srv, w.Sub, msgs, subCSV), "[1] Starting ")
	if err != nil {
		return nil, nil, err
	}
	defer sub.kill()
	if err := n.waitSubscribed(ctx, sub, srv, w.Sub[len(w.Sub)-1]); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	pub, err := n.run(ctx, n.args(srv, w.Main, msgs, mainCSV))
	if err != nil {
		return nil, nil, err
	}
	// The subscriber gets a bounded time to drain after the publisher ends;
	// if the server dropped messages it would otherwise wait forever.
	drain := max(30*time.Second, 3*time.Since(start))
	if err := sub.wait(drain); err != nil {
		var ce *cmdError
		if errors.As(err, &ce) && errors.Is(err, errTimedOut) {
			ce.err = fmt.Errorf("subscriber still waiting %s after the publisher finished: messages lost (slow consumer?)", drain)
		}
		return nil, nil, err
	}
	subSt, err := parseBenchCSV(subCSV)
	if err != nil {
		return nil, nil, sub.fail(err)
	}
	pubSt, err := parseBenchCSV(mainCSV)
	if err != nil {
		return nil, nil, pub.fail(err)
	}
	return []float64{subSt.rate, pubSt.rate}, warnings(sub, pub), nil
}

// waitSubscribed waits until sub's subscription on subject exists. It
// watches for natscli's "[1] Starting ..." log line (printed just before
// it subscribes), then polls the monitor's /subsz?subs=1&test=SUBJECT until
// a matching subscription shows up. Without a usable /subsz it falls back
// to waiting subGrace after the log line.
func (n *natsRunner) waitSubscribed(ctx context.Context, sub *proc, srv *server, subject string) error {
	deadline := time.After(30 * time.Second)
	select {
	case <-sub.out.seen:
	case <-sub.done:
		return sub.fail(fmt.Errorf("subscriber exited before subscribing: %v", sub.err))
	case <-deadline:
		return sub.fail(errors.New("subscriber did not start within 30s"))
	case <-ctx.Done():
		return ctx.Err()
	}
	client := &http.Client{Timeout: time.Second}
	url := srv.monitor + "/subsz?subs=1&test=" + subject
	for {
		total, err := subszTotal(ctx, client, url)
		if err != nil {
			if n.verbose {
				fmt.Printf("    (no usable /subsz: %v; waiting %s)\n", err, n.subGrace)
			}
			select {
			case <-time.After(n.subGrace):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if total > 0 {
			return nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-sub.done:
			return sub.fail(fmt.Errorf("subscriber exited early: %v", sub.err))
		case <-deadline:
			return sub.fail(fmt.Errorf("no subscription on %q visible in %s within 30s", subject, url))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// subszTotal returns the "total" field of nats-server's /subsz answer.
func subszTotal(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	var body struct {
		Total *int `json:"total"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	if body.Total == nil {
		return 0, fmt.Errorf("GET %s: no \"total\" field", url)
	}
	return *body.Total, nil
}

// warnings returns natscli's warning lines (e.g. "WARNING: at least one of
// the pull consumer Fetch operation timed out"), deduplicated, with counts.
func warnings(procs ...*proc) []string {
	count := map[string]int{}
	var order []string
	for _, p := range procs {
		for _, line := range strings.Split(p.out.String(), "\n") {
			if !strings.Contains(strings.ToLower(line), "warning") && !strings.Contains(line, "timeout!") {
				continue
			}
			// Drop natscli's "15:04:05 " log timestamp so repeats collapse.
			if f := strings.SplitN(line, " ", 2); len(f) == 2 && strings.Count(f[0], ":") == 2 {
				line = f[1]
			}
			if count[line] == 0 {
				order = append(order, line)
			}
			count[line]++
		}
	}
	var out []string
	for _, line := range order {
		if count[line] > 1 {
			line = fmt.Sprintf("%s (x%d)", line, count[line])
		}
		out = append(out, line)
	}
	return out
}

// benchStats is what the harness reads from a `nats bench --csv` file.
type benchStats struct {
	rate float64 // msgs/s, summed over clients
	p50  float64 // p50 per-operation latency in µs, averaged over clients
}

// parseBenchCSV reads natscli's CSV: a header starting with "#RunID", one
// row per client, with MsgsPerSec and (when latencies were recorded)
// P50LatencyMicroSecs columns.
func parseBenchCSV(path string) (benchStats, error) {
	var st benchStats
	b, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("reading bench CSV: %w", err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return st, fmt.Errorf("parsing %s: %w", path, err)
	}
	if len(recs) < 2 {
		return st, fmt.Errorf("%s: no data rows", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[strings.TrimPrefix(h, "#")] = i
	}
	rateCol, ok := col["MsgsPerSec"]
	if !ok {
		return st, fmt.Errorf("%s: no MsgsPerSec column in header %v", path, recs[0])
	}
	p50Col, hasP50 := col["P50LatencyMicroSecs"]
	for _, r := range recs[1:] {
		if len(r) <= rateCol || (hasP50 && len(r) <= p50Col) {
			return st, fmt.Errorf("%s: short row %v", path, r)
		}
		v, err := strconv.ParseFloat(r[rateCol], 64)
		if err != nil {
			return st, fmt.Errorf("%s: MsgsPerSec %q: %w", path, r[rateCol], err)
		}
		st.rate += v
		if hasP50 {
			l, err := strconv.ParseFloat(r[p50Col], 64)
			if err != nil {
				return st, fmt.Errorf("%s: P50LatencyMicroSecs %q: %w", path, r[p50Col], err)
			}
			st.p50 += l / float64(len(recs)-1)
		}
	}
	return st, nil
}

// watchBuffer collects a process's output and closes seen once the output
// contains a given substring.
type watchBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	watch string
	seen  chan struct{}
}

func newWatchBuffer(watch string) *watchBuffer {
	w := &watchBuffer{watch: watch, seen: make(chan struct{})}
	if watch == "" {
		close(w.seen)
	}
	return w
}

// Write implements io.Writer.
func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.watch != "" && bytes.Contains(w.buf.Bytes(), []byte(w.watch)) {
		close(w.seen)
		w.watch = ""
	}
	return len(p), nil
}

// String returns everything written so far.
func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
