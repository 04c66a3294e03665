package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Timeouts for things that should happen promptly. They are generous so
// a loaded machine (or the race detector) does not make tests flaky;
// nothing waits for them unless something is wrong.
const (
	startTimeout = 20 * time.Second
	ioTimeout    = 10 * time.Second
	stopTimeout  = 10 * time.Second
)

// ---------------------------------------------------------------------
// Processes

// proc is a server process started by a test: a contrail node or the
// reference nats-server.
type proc struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	out     *syncBuffer   // stdout and stderr together
	exited  chan struct{} // closed once the process has been reaped
	waitErr error         // set before exited is closed
	// signaled is set once the test signals the process; exiting before
	// that is a crash.
	signaled atomic.Bool
	// cleanExit makes stop require exit status 0 after SIGTERM (contrail
	// promises it; the reference server is not under test).
	cleanExit bool
	// sent records the signals the test sent, as log lines of the
	// process's form, for a failed cluster test's timeline.
	sent syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the exec copier and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startProc(t testing.TB, name, bin string, args ...string) (*proc, error) {
	return startProcEnv(t, name, bin, nil, args...)
}

// startProcEnv is startProc with env added to the process's environment.
func startProcEnv(t testing.TB, name, bin string, env []string, args ...string) (*proc, error) {
	p := &proc{t: t, name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(childEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// childEnv is the environment of started processes. A race-enabled
// binary otherwise sleeps a second at exit, waiting for late reports.
func childEnv() []string {
	return append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=50"))
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	p.signaled.Store(true)
	fmt.Fprintf(&p.sent, "time=%s level=TEST msg=\"test sent %v\"\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), sig)
	if err := p.cmd.Process.Signal(sig); err != nil && p.running() {
		p.t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// wait waits up to timeout for the process to exit and returns its exit
// code; ok is false if it was still running.
func (p *proc) wait(timeout time.Duration) (code int, ok bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		return 0, false
	}
	if p.waitErr == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal()), true
		}
		return ee.ExitCode(), true
	}
	return -1, true
}

// stop ends the process: SIGTERM, then SIGKILL if it does not exit in
// time. It reports a node that had to be killed, and any data race the
// race-enabled binary printed.
func (p *proc) stop() {
	switch {
	case !p.running():
		if !p.signaled.Load() {
			p.t.Errorf("%s exited by itself while the test ran: %v", p.name, p.waitErr)
		}
	case p.t.Failed():
		// Keep the state for the log; a failed test gets no grace. With
		// CONTRAIL_TEST_LOGDIR the process first prints every
		// goroutine's stack (SIGQUIT): what it was doing when the test
		// gave up on it.
		if os.Getenv("CONTRAIL_TEST_LOGDIR") != "" {
			p.cmd.Process.Signal(syscall.SIGQUIT)
			p.wait(2 * time.Second)
		}
		p.cmd.Process.Kill()
		p.wait(stopTimeout)
	default:
		p.signaled.Store(true)
		p.cmd.Process.Signal(syscall.SIGTERM)
		code, ok := p.wait(stopTimeout)
		switch {
		case !ok:
			// SIGQUIT makes the Go runtime print every goroutine's
			// stack on the way out: what the stop waits for.
			p.cmd.Process.Signal(syscall.SIGQUIT)
			if _, ok := p.wait(stopTimeout); !ok {
				p.cmd.Process.Kill()
				p.wait(stopTimeout)
			}
			p.t.Errorf("%s did not exit within %v of SIGTERM; stopped with SIGQUIT (stacks in its output)", p.name, stopTimeout)
		case code != 0 && p.cleanExit:
			p.t.Errorf("%s exited with status %d after SIGTERM, want 0", p.name, code)
		}
	}
	out := p.out.String()
	if strings.Contains(out, "WARNING: DATA RACE") {
		p.t.Errorf("%s reported a data race:\n%s", p.name, out)
		return
	}
	if p.t.Failed() {
		p.t.Logf("%s output (last 64 KiB):\n%s", p.name, tail(out, 64<<10))
		// CONTRAIL_TEST_LOGDIR keeps the whole output of a failed test's
		// processes, for the failures 64 KiB does not explain.
		if dir := os.Getenv("CONTRAIL_TEST_LOGDIR"); dir != "" {
			name := strings.NewReplacer("/", "_", " ", "_").Replace(p.t.Name()) + "-" + p.name + "-" + strconv.Itoa(p.cmd.Process.Pid) + ".log"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
				p.t.Logf("keep %s output: %v", p.name, err)
			}
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// ---------------------------------------------------------------------
// Contrail nodes

// node is a running `contrail dataplane`.
type node struct {
	*proc
	NatsAddr string // host:port of the client listener
	MonAddr  string // host:port of monitoring
	URL      string // nats:// (or tls://) URL for clients
	MonURL   string // http:// base URL of monitoring
	DataDir  string
	Dir      string // a scratch directory for the test's files
}

// nodeOpts tweaks how startNode runs the node.
type nodeOpts struct {
	// config is the text of a configuration file passed with --config;
	// it may contain {{DIR}}, replaced with the node's scratch directory.
	config string
	// args are extra flags.
	args []string
	// tls makes URL use the tls:// scheme.
	tls bool
	// dir is the scratch directory to use (for files written before the
	// node starts); a new one by default.
	dir string
}

// startNode starts a contrail node on free loopback ports, waits until it
// serves, and stops it when the test ends.
func startNode(t testing.TB, o nodeOpts) *node {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	var lastErr error
	// A port found free may be taken by someone else before the node binds
	// it; try again with fresh ports then.
	for attempt := 0; attempt < 5; attempt++ {
		n, err := tryStartNode(t, o, dir)
		if err == nil {
			return n
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("starting contrail: %v", lastErr)
	return nil
}

func tryStartNode(t testing.TB, o nodeOpts, dir string) (*node, error) {
	n := &node{
		NatsAddr: freeAddr(t),
		MonAddr:  freeAddr(t),
		DataDir:  filepath.Join(dir, "data"),
		Dir:      dir,
	}
	args := []string{"dataplane",
		"--nats-addr", n.NatsAddr,
		"--monitor-addr", n.MonAddr,
		"--data-dir", n.DataDir,
	}
	if o.config != "" {
		cfg := strings.ReplaceAll(o.config, "{{DIR}}", dir)
		args = append(args, "--config", writeFile(t, dir, "node.conf", cfg))
	}
	args = append(args, o.args...)
	p, err := startProc(t, "contrail", contrailBin, args...)
	if err != nil {
		return nil, err
	}
	n.proc = p
	p.cleanExit = true
	scheme := "nats"
	if o.tls {
		scheme = "tls"
	}
	n.URL = scheme + "://" + n.NatsAddr
	n.MonURL = "http://" + n.MonAddr
	if err := waitHealthy(p, n.MonURL); err != nil {
		p.stop()
		return nil, err
	}
	t.Cleanup(p.stop)
	return n, nil
}

// waitHealthy polls /healthz until it answers 200, the process exits, or
// startTimeout passes. The client listener is bound before monitoring, so
// a healthy monitor means clients can connect.
func waitHealthy(p *proc, monURL string) error {
	return waitHealthyWithin(p, monURL, startTimeout)
}

// waitHealthyWithin is waitHealthy with its own deadline.
func waitHealthyWithin(p *proc, monURL string, within time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	for {
		resp, err := client.Get(monURL + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.running() {
			return fmt.Errorf("%s exited during start (%v):\n%s", p.name, p.waitErr, p.out.String())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %v (last error %v):\n%s", p.name, startTimeout, err, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr finds a free loopback TCP address, never one it returned before
// in this process.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// listenLoopback listens on a loopback port that freeAddr has not handed
// out in this process, and records its address so freeAddr never will.
// Every listener a test opens beside its servers goes through here: the
// kernel may offer a port again once it is closed, before the process it
// was picked for binds it, so a test starting several servers would
// otherwise give two of them, or a server and a test proxy, one port.
func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	var taken []net.Listener
	defer func() {
		for _, ln := range taken {
			ln.Close()
		}
	}()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		addr := ln.Addr().String()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return ln
		}
		// Held open until a fresh port turns up, so the kernel offers
		// another one next.
		taken = append(taken, ln)
	}
}

// handedOut holds every address freeAddr has returned in this process.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// writeFile writes a file in dir and returns its path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return path
}

// runContrail runs the binary to completion (for commands that exit by
// themselves) and returns its exit code, stdout and stderr.
func runContrail(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(contrailBin, args...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting contrail %v: %v", args, err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, out.String(), errb.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), out.String(), errb.String()
		default:
			t.Fatalf("contrail %v: %v", args, err)
		}
	case <-time.After(startTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("contrail %v did not exit within %v; stderr:\n%s", args, startTimeout, errb.String())
	}
	return 0, "", ""
}

// ---------------------------------------------------------------------
// Stock tools

// findTool finds an installed Go tool on PATH or in $(go env GOPATH)/bin
// and checks its version, failing the test with how to install it when it
// is missing or another version: these tests prove compatibility with the
// stock tools, and must not pass without them.
func findTool(t testing.TB, name, pkg, version string) string {
	t.Helper()
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if r, ok := tools[name]; ok {
		if r.err != "" {
			t.Fatal(r.err)
		}
		return r.path
	}
	install := fmt.Sprintf("go install %s@%s", pkg, version)
	path, err := lookTool(name)
	r := toolResult{path: path}
	switch {
	case err != nil:
		r.err = fmt.Sprintf("%s not found on PATH or in $(go env GOPATH)/bin; run `%s` (`make tools` does)", name, install)
	default:
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), version) {
			r.err = fmt.Sprintf("%s is %q (%v), the tests need %s; run `%s` (`make tools` does)",
				path, strings.TrimSpace(string(out)), err, version, install)
		}
	}
	tools[name] = r
	if r.err != "" {
		t.Fatal(r.err)
	}
	return r.path
}

var (
	toolsMu sync.Mutex
	tools   = map[string]toolResult{} // by name; guarded by toolsMu
)

type toolResult struct{ path, err string }

func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return "", err
	}
	for _, dir := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
		p := filepath.Join(dir, "bin", name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func natsCLI(t testing.TB) string {
	return findTool(t, "nats", "github.com/nats-io/natscli/nats", "v0.5.0")
}

// refServer is a real nats-server, started as the reference that
// Contrail's behaviour is compared with.
type refServer struct {
	*proc
	URL    string
	MonURL string
}

// startNatsServer starts nats-server on free loopback ports; extra args
// are added to its command line.
func startNatsServer(t testing.TB, extra ...string) *refServer {
	t.Helper()
	bin := findTool(t, "nats-server", "github.com/nats-io/nats-server/v2", "v2.15.2")
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		addr, mon := freeAddr(t), freeAddr(t)
		host, port, _ := net.SplitHostPort(addr)
		_, mport, _ := net.SplitHostPort(mon)
		args := append([]string{"-a", host, "-p", port, "-m", mport}, extra...)
		p, err := startProc(t, "nats-server", bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		r := &refServer{proc: p, URL: "nats://" + addr, MonURL: "http://" + mon}
		if lastErr = waitHealthy(p, r.MonURL); lastErr == nil {
			t.Cleanup(p.stop)
			return r
		}
		p.stop()
		if !strings.Contains(lastErr.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("starting nats-server: %v", lastErr)
	return nil
}

// ---------------------------------------------------------------------
// nats.go

// connect connects nats.go to url and closes the connection when the test
// ends. Reconnecting is off: a test that loses its server should see it.
func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := dial(t, url, opts...)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	return nc
}

// dial is connect returning the error instead of failing.
func dial(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{
		nats.Name(t.Name()),
		nats.Timeout(ioTimeout),
		nats.NoReconnect(),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	return nc, nil
}

// flush is nc.Flush failing the test on error; after it returns, the
// server has processed everything nc sent before.
func flush(t testing.TB, nc *nats.Conn) {
	t.Helper()
	if err := nc.FlushTimeout(ioTimeout); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// subscribeSync subscribes and flushes, so the subscription is live on the
// server when it returns.
func subscribeSync(t testing.TB, nc *nats.Conn, subj string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatalf("subscribe %q: %v", subj, err)
	}
	flush(t, nc)
	return sub
}

// nextMsg waits for sub's next message.
func nextMsg(t testing.TB, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(ioTimeout)
	if err != nil {
		t.Fatalf("waiting for a message on %q: %v", sub.Subject, err)
	}
	return m
}

func publish(t testing.TB, nc *nats.Conn, subj string, data []byte) {
	t.Helper()
	if err := nc.Publish(subj, data); err != nil {
		t.Fatalf("publish %q: %v", subj, err)
	}
}

// roundTrip proves nc still works: a fresh subscription gets a message
// nc publishes to it.
func roundTrip(t testing.TB, nc *nats.Conn) {
	t.Helper()
	subj := "roundtrip." + nats.NewInbox()[len("_INBOX."):]
	sub := subscribeSync(t, nc, subj)
	defer sub.Unsubscribe()
	publish(t, nc, subj, []byte("ping"))
	if m := nextMsg(t, sub); string(m.Data) != "ping" {
		t.Fatalf("round trip got %q, want %q", m.Data, "ping")
	}
}

// ---------------------------------------------------------------------
// Raw protocol connections

// rawConn is a hand-driven client connection for checking exact bytes.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	// info is the server's INFO, parsed.
	info map[string]any
}

// dialRaw connects and reads the server's INFO. It sends nothing.
func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawConn{t: t, conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	line := c.line()
	js, ok := strings.CutPrefix(line, "INFO ")
	if !ok {
		t.Fatalf("first line from server is %q, want INFO", line)
	}
	if err := json.Unmarshal([]byte(js), &c.info); err != nil {
		t.Fatalf("INFO is not JSON: %v: %q", err, js)
	}
	return c
}

// connectRaw dials and sends CONNECT with the given JSON and a PING,
// consuming the PONG, so the connection is fully set up.
func connectRaw(t testing.TB, addr, connectJSON string) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	c.send("CONNECT " + connectJSON + "\r\nPING\r\n")
	c.expect("PONG")
	return c
}

// send writes s.
func (c *rawConn) send(s string) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatalf("raw write: %v", err)
	}
}

// line reads one CRLF-terminated line and returns it without the CRLF.
func (c *rawConn) line() string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	s, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("raw read: %v (partial %q)", err, s)
	}
	if !strings.HasSuffix(s, "\r\n") {
		c.t.Fatalf("line %q does not end in CRLF", s)
	}
	return strings.TrimSuffix(s, "\r\n")
}

// expect reads a line and fails unless it is want.
func (c *rawConn) expect(want string) {
	c.t.Helper()
	if got := c.line(); got != want {
		c.t.Fatalf("got line %q, want %q", got, want)
	}
}

// expectBytes reads exactly len(want) bytes and fails unless they match.
func (c *rawConn) expectBytes(want string) {
	c.t.Helper()
	got := make([]byte, len(want))
	c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	if n, err := io.ReadFull(c.r, got); err != nil {
		c.t.Fatalf("raw read: %v (got %q, want %q)", err, got[:n], want)
	}
	if string(got) != want {
		c.t.Fatalf("got bytes %q, want %q", got, want)
	}
}

// expectClosed reads until the server closes the connection and returns
// the lines received before that. It fails if the connection stays open
// for timeout.
func (c *rawConn) expectClosed(timeout time.Duration) []string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	c.conn.SetReadDeadline(deadline)
	var lines []string
	for {
		s, err := c.r.ReadString('\n')
		if s != "" {
			lines = append(lines, strings.TrimSuffix(s, "\r\n"))
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.t.Fatalf("connection still open after %v; received %q", timeout, lines)
		}
		return lines // EOF or reset: closed by the server
	}
}

// hostPort splits "host:port" into its parts for config files.
func hostPort(t testing.TB, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, n
}

// ---------------------------------------------------------------------
// HTTP and polling

// getJSON GETs url and decodes the JSON body into v.
func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	if err := fetchJSON(url, v); err != nil {
		t.Fatal(err)
	}
}

// fetchJSON is getJSON returning the error; safe off the test goroutine.
func fetchJSON(url string, v any) error {
	client := &http.Client{Timeout: ioTimeout}
	resp, err := client.Get(url)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: reading body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", url, err, body)
	}
	return nil
}

// varz fetches /varz as a generic map.
func varz(t testing.TB, monURL string) map[string]any {
	t.Helper()
	var v map[string]any
	getJSON(t, monURL+"/varz", &v)
	return v
}

// num reads a JSON number field.
func num(t testing.TB, m map[string]any, key string) float64 {
	t.Helper()
	f, ok := m[key].(float64)
	if !ok {
		t.Fatalf("field %q is %T (%v), want a number", key, m[key], m[key])
	}
	return f
}

// waitFor polls cond until it holds, failing after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recvChan waits for a value on ch.
func recvChan[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(ioTimeout):
		t.Fatalf("timed out after %v waiting for %s", ioTimeout, what)
	}
	var zero T
	return zero
}
