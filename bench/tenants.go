package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Tenant-density scenario (-tenants N): N accounts, each with one
// connected user and one file stream, then the servers' idle RSS.
const (
	tenantWorkers   = 32        // concurrent connects / stream creations / publishers
	tenantMsgs      = 5         // messages published into each account's stream
	tenantStream    = "EVENTS"  // every account's stream (names are per account)
	tenantSubject   = "events"  // its one subject
	tenantRSSLimit  = 200 << 10 // KiB: Contrail's idle RSS target...
	tenantLimitUpTo = 1000      // ...for up to this many accounts
	rssInterval     = 250 * time.Millisecond
	rssWindow       = 2 * time.Second // RSS is stable when it moved < rssTolerance over this window
	rssTolerance    = 0.01
	rssBound        = 20 * time.Second // give up waiting for stability after this long
	tenantOpTimeout = 30 * time.Second // per connect / stream create / publish
)

// tenantJSLimits are the JetStream limits of every account, as
// `nsc add account --js-mem-storage 1M --js-disk-storage 16M --js-streams 10 --js-consumer 10` sets them.
var tenantJSLimits = jwt.JetStreamLimits{MemoryStorage: 1 << 20, DiskStorage: 16 << 20, Streams: 10, Consumer: 10}

// tenant is one account with its single user.
type tenant struct {
	name     string
	pub      string // account public key
	userJWT  string
	userSeed string
}

// tenantWorld is an operator, its system account and N accounts, with an
// HTTP URL resolver (GET <base><account key> → JWT) serving their JWTs
// from this process.
type tenantWorld struct {
	opJWT   string
	sysPub  string
	jwts    map[string]string // account key → JWT; read-only once serving
	tenants []tenant
	base    string // resolver base URL, ends in '/'
	opFile  string // the operator JWT's file, for Contrail's --operator
	srv     *http.Server
	fetches atomic.Int64
}

// newTenantWorld creates the operator, the system account and n accounts
// with one user each, signed as nsc signs them.
func newTenantWorld(n int) (*tenantWorld, error) {
	return newTenantWorldLimits(n, tenantJSLimits)
}

// newTenantWorldLimits is newTenantWorld with the accounts' JetStream
// limits given.
func newTenantWorldLimits(n int, lim jwt.JetStreamLimits) (*tenantWorld, error) {
	op, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	opPub, _ := op.PublicKey()
	w := &tenantWorld{jwts: make(map[string]string, n+1)}

	account := func(name string, js bool) (nkeys.KeyPair, string, error) {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			return nil, "", err
		}
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = lim
		}
		token, err := ac.Encode(op)
		if err != nil {
			return nil, "", fmt.Errorf("signing account %s: %w", name, err)
		}
		w.jwts[pub] = token
		return kp, pub, nil
	}
	if _, w.sysPub, err = account("SYS", false); err != nil {
		return nil, err
	}
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "BENCH"
	oc.SystemAccount = w.sysPub
	if w.opJWT, err = oc.Encode(op); err != nil {
		return nil, fmt.Errorf("signing operator: %w", err)
	}
	for i := range n {
		name := fmt.Sprintf("tenant-%05d", i+1)
		akp, apub, err := account(name, true)
		if err != nil {
			return nil, err
		}
		ukp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		upub, _ := ukp.PublicKey()
		seed, _ := ukp.Seed()
		uc := jwt.NewUserClaims(upub)
		uc.Name = name + "-user"
		ujwt, err := uc.Encode(akp)
		if err != nil {
			return nil, fmt.Errorf("signing user of %s: %w", name, err)
		}
		w.tenants = append(w.tenants, tenant{name: name, pub: apub, userJWT: ujwt, userSeed: string(seed)})
	}
	return w, nil
}

// startTenantWorld makes a world of n accounts with JetStream limits lim,
// serves it, and writes the operator JWT into root. The caller closes it.
func startTenantWorld(n int, lim jwt.JetStreamLimits, root string) (*tenantWorld, error) {
	w, err := newTenantWorldLimits(n, lim)
	if err != nil {
		return nil, err
	}
	if err := w.serve(); err != nil {
		return nil, err
	}
	w.opFile = filepath.Join(root, "operator.jwt")
	if err := os.WriteFile(w.opFile, []byte(w.opJWT), 0o600); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// contrailSide is Contrail trusting the world's operator and resolving
// its accounts from the world's resolver, with the extra flags given.
func (w *tenantWorld) contrailSide(bin string, extra ...string) tenantSide {
	return tenantSide{name: sideContrail, bin: bin, args: func(port, monitorPort int, dataDir string) []string {
		return append(append(contrailArgs(port, monitorPort, dataDir), w.contrailTrust()...), extra...)
	}}
}

// natsServerSide is nats-server, as side name, trusting the world's
// operator: its configuration (JetStream in the side's own data dir) is
// written to root/<name>.conf.
func (w *tenantWorld) natsServerSide(root, name, bin string) (tenantSide, error) {
	conf := filepath.Join(root, name+".conf")
	if err := os.WriteFile(conf, []byte(w.natsServerTenantConf(serverDataDir(root, name))), 0o600); err != nil {
		return tenantSide{}, err
	}
	return tenantSide{name: name, bin: bin, args: func(port, monitorPort int, dataDir string) []string {
		return []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", strconv.Itoa(monitorPort)}
	}}, nil
}

// serve starts the URL resolver on a free loopback port.
func (w *tenantWorld) serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("resolver listen: %w", err)
	}
	const prefix = "/jwt/v1/accounts/"
	w.base = "http://" + ln.Addr().String() + prefix
	w.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key, under := strings.CutPrefix(r.URL.Path, prefix)
		if r.Method == http.MethodGet && under && key == "" {
			return // nats-server checks the base URL answers 200 at startup
		}
		token, ok := w.jwts[key]
		if r.Method != http.MethodGet || !under || !ok {
			http.NotFound(rw, r)
			return
		}
		w.fetches.Add(1)
		rw.Header().Set("Content-Type", "application/jwt")
		_, _ = io.WriteString(rw, token)
	})}
	go func() { _ = w.srv.Serve(ln) }()
	return nil
}

func (w *tenantWorld) close() {
	if w.srv != nil {
		_ = w.srv.Close()
	}
}

// natsServerTenantConf is nats-server's configuration for the world:
// trusted operator, system account, URL resolver, JetStream.
func (w *tenantWorld) natsServerTenantConf(storeDir string) string {
	return w.natsServerTrust() + fmt.Sprintf("jetstream {\n  store_dir: %q\n}\n", storeDir)
}

// natsServerTrust is the part of nats-server's configuration that trusts
// the world: operator, system account, URL resolver.
func (w *tenantWorld) natsServerTrust() string {
	return fmt.Sprintf("operator: %q\nsystem_account: %q\nresolver: URL(%s)\n", w.opJWT, w.sysPub, w.base)
}

// contrailTrust is Contrail's flags that trust the world.
func (w *tenantWorld) contrailTrust() []string {
	return []string{"--operator", w.opFile, "--resolver", w.base, "--system-account", w.sysPub}
}

// tenantResult is what one server did in the scenario.
type tenantResult struct {
	sideOutcome
	clients                  int           // connections the bench holds
	conns, accounts, streams int           // as the server's monitor reports them; -1 unknown
	connectT, createT        time.Duration // wall time of each phase
	publishT                 time.Duration
	emptyRSS, idleRSS        int64 // KiB, after start and once idle
	idleStable               bool
	runtime                  string // Go runtime figures (Contrail, from pprof), if known
	heapTop                  string // `go tool pprof -top` of the heap when over the limit
	resolverFetches          int64
}

// perAccountKiB is the RSS the accounts added, per account.
func (r *tenantResult) perAccountKiB(n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(r.idleRSS-r.emptyRSS) / float64(n)
}

// tenantSide describes how to start one side of the scenario.
type tenantSide struct {
	name  string
	bin   string
	args  serverArgs
	pprof string // base URL of the side's pprof endpoint, if any
}

// tenantBenchmark runs the tenant-density scenario on both servers, one
// after the other, and prints the table. It fails if Contrail's idle RSS
// exceeds the target.
func tenantBenchmark(ctx context.Context, cfg config) error {
	n := cfg.tenants
	root, cleanup, err := benchDir("contrail-bench-tenants-", cfg.keep)
	if err != nil {
		return err
	}
	defer cleanup()

	// Each side holds n client connections (plus stream files); the bench
	// holds n too. Setting the limit explicitly (rather than relying on
	// Go's own soft-limit raise, which children do not inherit) makes the
	// servers inherit it.
	limit, err := raiseOpenFileLimit(uint64(3*n + 1024))
	if err != nil {
		return fmt.Errorf("open-file limit: %w", err)
	}

	contrailBin, serverBin, err := serverBinaries(ctx, cfg, root)
	if err != nil {
		return err
	}

	t0 := time.Now()
	world, err := startTenantWorld(n, tenantJSLimits, root)
	if err != nil {
		return err
	}
	defer world.close()
	fmt.Printf("tenants: %d accounts (JetStream mem 1 MiB, disk 16 MiB, 10 streams, 10 consumers), 1 user each; made in %s\n",
		n, time.Since(t0).Round(time.Millisecond))
	fmt.Printf("resolver: %s<account key>; open-file limit %d (bench and servers)\n", world.base, limit)

	var sides []tenantSide
	if cfg.selftest {
		s, err := world.natsServerSide(root, sideContrail, serverBin)
		if err != nil {
			return err
		}
		sides = append(sides, s)
		fmt.Println("SELFTEST: the contrail side is a second nats-server")
	} else {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		pprofAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
		s := world.contrailSide(contrailBin, "--pprof-addr", pprofAddr)
		s.pprof = "http://" + pprofAddr
		sides = append(sides, s)
	}
	s, err := world.natsServerSide(root, sideNatsServer, serverBin)
	if err != nil {
		return err
	}
	sides = append(sides, s)

	results, err := runSides(ctx, sides, func(s tenantSide) *tenantResult {
		fmt.Printf("\n%s: %s\n", s.name, s.bin)
		before := world.fetches.Load()
		r := runTenantSide(ctx, s, root, world, n)
		r.resolverFetches = world.fetches.Load() - before
		return r
	})
	if err != nil {
		return err
	}

	printTenantTable(os.Stdout, results, n)
	var over []string
	if c := results[0]; c.failed == nil && n <= tenantLimitUpTo && c.idleRSS <= tenantRSSLimit {
		fmt.Printf("\n%s idles at %.1f MiB with %d accounts: within the %d MiB target\n",
			sideContrail, mib(c.idleRSS), n, tenantRSSLimit>>10)
	} else if c.failed == nil && n <= tenantLimitUpTo {
		fmt.Printf("\n%s idles at %.1f MiB with %d accounts: over the %d MiB target for up to %d connected, JetStream-enabled accounts\n",
			sideContrail, mib(c.idleRSS), n, tenantRSSLimit>>10, tenantLimitUpTo)
		if c.runtime != "" {
			fmt.Printf("  Go runtime: %s\n", c.runtime)
		}
		if c.heapTop != "" {
			fmt.Printf("  heap profile (in-use space) taken while idle:\n%s\n", indent(c.heapTop))
		}
		over = append(over, fmt.Sprintf("contrail idle RSS %.1f MiB > %d MiB", mib(c.idleRSS), tenantRSSLimit>>10))
	}
	return sidesError(results, over...)
}

// runTenantSide starts one server, connects a client per account, creates
// and fills a stream in each, waits until the server's RSS settles, takes
// the figures and stops the server.
func runTenantSide(ctx context.Context, s tenantSide, root string, world *tenantWorld, n int) *tenantResult {
	r := &tenantResult{sideOutcome: sideOutcome{side: s.name}, conns: -1, accounts: -1, streams: -1}
	r.failed = onServer(ctx, s.name, s.bin, s.args, root, func(srv *server) error { return r.measure(ctx, s, srv, world, n) })
	return r
}

// measure takes the side's figures on srv.
func (r *tenantResult) measure(ctx context.Context, s tenantSide, srv *server, world *tenantWorld, n int) error {
	pid := srv.pid()
	res, err := waitStableRSS(ctx, pid)
	if err != nil {
		return err
	}
	r.emptyRSS = res.last.total
	fmt.Printf("  started: %s\n", res.describe())

	conns := make([]*nats.Conn, n)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	streams := make([]jetstream.JetStream, n)

	phase := func(what string, do func(i int) error) (time.Duration, error) {
		start := time.Now()
		err := parallel(ctx, n, tenantWorkers, do)
		d := time.Since(start)
		if err != nil {
			return d, fmt.Errorf("%s: %w", what, err)
		}
		fmt.Printf("  %-15s %d in %s (%.0f/s)\n", what, n, d.Round(time.Millisecond), float64(n)/d.Seconds())
		return d, nil
	}
	if r.connectT, err = phase("connected", func(i int) error {
		t := world.tenants[i]
		nc, err := nats.Connect(srv.url, nats.UserJWTAndSeed(t.userJWT, t.userSeed), nats.Name(t.name),
			nats.NoReconnect(), nats.Timeout(tenantOpTimeout))
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		conns[i] = nc
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		streams[i] = js
		return nil
	}); err != nil {
		return err
	}
	r.clients = n
	if r.createT, err = phase("created streams", func(i int) error {
		ctx, cancel := context.WithTimeout(ctx, tenantOpTimeout)
		defer cancel()
		_, err := streams[i].CreateStream(ctx, jetstream.StreamConfig{
			Name: tenantStream, Subjects: []string{tenantSubject}, Storage: jetstream.FileStorage})
		if err != nil {
			return fmt.Errorf("%s: %w", world.tenants[i].name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	payload := bytes.Repeat([]byte("x"), 128)
	if r.publishT, err = phase("filled streams", func(i int) error {
		ctx, cancel := context.WithTimeout(ctx, tenantOpTimeout)
		defer cancel()
		for m := range tenantMsgs {
			ack, err := streams[i].Publish(ctx, tenantSubject, payload)
			if err != nil {
				return fmt.Errorf("%s: publish %d: %w", world.tenants[i].name, m+1, err)
			}
			if ack.Sequence != uint64(m+1) {
				return fmt.Errorf("%s: publish %d acked as sequence %d", world.tenants[i].name, m+1, ack.Sequence)
			}
		}
		return nil
	}); err != nil {
		return err
	}

	if res, err = waitStableRSS(ctx, pid); err != nil {
		return err
	}
	r.idleRSS, r.idleStable = res.last.total, res.stable
	fmt.Printf("  idle:    %s\n", res.describe())
	for _, nc := range conns {
		if nc.Status() != nats.CONNECTED {
			return fmt.Errorf("client %s is %v after idling", nc.Opts.Name, nc.Status())
		}
	}
	r.conns, r.accounts, r.streams = monitorCounts(ctx, srv.monitor)
	if s.pprof != "" {
		r.runtime = goRuntimeStats(ctx, s.pprof)
		if r.runtime != "" {
			fmt.Printf("  Go runtime: %s\n", r.runtime)
		}
		if n <= tenantLimitUpTo && r.idleRSS > tenantRSSLimit {
			r.heapTop = heapTop(ctx, s.pprof)
		}
	}
	if !srv.alive() {
		return fmt.Errorf("server exited: %v", srv.waitErr)
	}
	return nil
}

// parallel runs do(0..n-1) on up to workers goroutines and returns the
// first error; after an error no new items are started.
func parallel(ctx context.Context, n, workers int, do func(i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// rssSample is one VmRSS reading, at a time since sampling started.
type rssSample struct {
	at  time.Duration
	kib int64
}

// parseStatusKiB returns a "Name:   123 kB" figure (KiB) of a
// /proc/<pid>/status file, e.g. field "VmRSS".
func parseStatusKiB(status []byte, field string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, sc.Text())
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s line (kernel thread or exited process?)", field)
}

// procRSS is a process's resident set in KiB: total, anonymous (heap,
// stacks), file-backed (mostly the binary's text), and the peak of the
// total so far (VmHWM).
type procRSS struct{ total, anon, file, peak int64 }

// readRSS reads pid's resident set from /proc/<pid>/status.
func readRSS(pid int) (procRSS, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procRSS{}, err
	}
	var r procRSS
	if r.total, err = parseStatusKiB(b, "VmRSS"); err != nil {
		return procRSS{}, err
	}
	r.anon, _ = parseStatusKiB(b, "RssAnon") // since Linux 4.5; 0 if absent
	r.file, _ = parseStatusKiB(b, "RssFile")
	r.peak, _ = parseStatusKiB(b, "VmHWM")
	return r, nil
}

// rssStable reports whether the samples cover at least window and the
// ones within the last window vary by less than tol (a fraction of the
// largest of them). Samples are in time order.
func rssStable(samples []rssSample, window time.Duration, tol float64) bool {
	if len(samples) < 2 {
		return false
	}
	last := samples[len(samples)-1]
	from := last.at - window
	if samples[0].at > from {
		return false // not sampled for a whole window yet
	}
	lo, hi := last.kib, last.kib
	for i := len(samples) - 1; i >= 0 && samples[i].at >= from; i-- {
		lo, hi = min(lo, samples[i].kib), max(hi, samples[i].kib)
	}
	return hi > 0 && float64(hi-lo) < tol*float64(hi)
}

// rssResult is the outcome of waitStableRSS.
type rssResult struct {
	last   procRSS // the last sample
	waited time.Duration
	stable bool
}

func (r rssResult) describe() string {
	s := fmt.Sprintf("RSS %.1f MiB (anon %.1f, file %.1f), ", mib(r.last.total), mib(r.last.anon), mib(r.last.file))
	if r.stable {
		return s + fmt.Sprintf("stable within 1%% over %s after %s", rssWindow, r.waited.Round(10*time.Millisecond))
	}
	return s + fmt.Sprintf("NOT stable within 1%% after %s; last sample", r.waited.Round(10*time.Millisecond))
}

// waitStableRSS samples pid's VmRSS every rssInterval until it moved less
// than rssTolerance over rssWindow, or for at most rssBound.
func waitStableRSS(ctx context.Context, pid int) (rssResult, error) {
	start := time.Now()
	var samples []rssSample
	for {
		rss, err := readRSS(pid)
		if err != nil {
			return rssResult{}, fmt.Errorf("reading RSS of pid %d: %w", pid, err)
		}
		samples = append(samples, rssSample{at: time.Since(start), kib: rss.total})
		res := rssResult{last: rss, waited: time.Since(start)}
		if res.stable = rssStable(samples, rssWindow, rssTolerance); res.stable || res.waited >= rssBound {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return rssResult{}, ctx.Err()
		case <-time.After(rssInterval):
		}
	}
}

// monitorCounts reads the connection, JetStream account and stream counts
// from the server's /varz and /jsz (-1 where unavailable).
func monitorCounts(ctx context.Context, base string) (conns, accounts, streams int) {
	conns, accounts, streams = -1, -1, -1
	var v struct {
		Connections *int `json:"connections"`
	}
	if getJSON(ctx, base+"/varz", &v) == nil && v.Connections != nil {
		conns = *v.Connections
	}
	var j struct {
		Accounts *int `json:"accounts"`
		Streams  *int `json:"streams"`
	}
	if getJSON(ctx, base+"/jsz", &j) == nil {
		if j.Accounts != nil {
			accounts = *j.Accounts
		}
		if j.Streams != nil {
			streams = *j.Streams
		}
	}
	return conns, accounts, streams
}

func getBody(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

func getJSON(ctx context.Context, url string, v any) error {
	b, err := getBody(ctx, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// parseMemStats picks "# Name = value" lines out of a debug=1 heap
// profile (runtime.MemStats as net/http/pprof prints it); for
// "# Stack = inuse / sys" the first figure is kept.
func parseMemStats(profile []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok || !strings.HasPrefix(sc.Text(), "# ") || strings.ContainsAny(name, " \t") {
			continue
		}
		val, _, _ = strings.Cut(strings.TrimSpace(val), " ") // "# Stack = inuse / sys"
		if v, err := strconv.ParseInt(val, 10, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// goRuntimeStats summarises a Go server's memory and goroutines from its
// pprof endpoint ("" if unreachable).
func goRuntimeStats(ctx context.Context, base string) string {
	heap, err := getBody(ctx, base+"/debug/pprof/heap?debug=1")
	if err != nil {
		return ""
	}
	ms := parseMemStats(heap)
	s := fmt.Sprintf("Sys %.1f MiB, HeapInuse %.1f MiB, HeapIdle %.1f MiB (released %.1f), StackInuse %.1f MiB",
		mib(ms["Sys"]>>10), mib(ms["HeapInuse"]>>10), mib(ms["HeapIdle"]>>10), mib(ms["HeapReleased"]>>10), mib(ms["Stack"]>>10))
	if g, err := getBody(ctx, base+"/debug/pprof/goroutine?debug=1"); err == nil {
		line, _, _ := strings.Cut(string(g), "\n")
		if total, ok := strings.CutPrefix(line, "goroutine profile: total "); ok {
			s += ", goroutines " + total
		}
	}
	return s
}

// heapTop returns `go tool pprof -top` of the in-use heap ("" on failure).
func heapTop(ctx context.Context, base string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25",
		"-sample_index=inuse_space", base+"/debug/pprof/heap").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(go tool pprof failed: %v)", err)
	}
	return tailLines(strings.TrimSpace(string(out)), 30)
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// printTenantTable writes the scenario's summary, one row per server and
// the ratio contrail / nats-server.
func printTenantTable(out io.Writer, results []*tenantResult, n int) {
	header := []string{"server", "accounts", "connections", "streams", "connect all", "create streams",
		"fill streams", "empty RSS MiB", "idle RSS MiB", "RSS/account KiB"}
	rows := [][]string{header}
	count := func(server, want int) string {
		switch {
		case server < 0:
			return strconv.Itoa(want) + "?"
		case server != want:
			return fmt.Sprintf("%d (want %d)", server, want)
		}
		return strconv.Itoa(server)
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s" }
	byName := map[string]*tenantResult{}
	for _, r := range results {
		byName[r.side] = r
		if r.failed != nil {
			rows = append(rows, []string{r.side, "FAILED"})
			continue
		}
		idle := strconv.FormatFloat(mib(r.idleRSS), 'f', 1, 64)
		if !r.idleStable {
			idle += "*"
		}
		rows = append(rows, []string{r.side, count(r.accounts, n), count(r.conns, r.clients), count(r.streams, n),
			secs(r.connectT), secs(r.createT), secs(r.publishT),
			strconv.FormatFloat(mib(r.emptyRSS), 'f', 1, 64), idle,
			strconv.FormatFloat(r.perAccountKiB(n), 'f', 1, 64)})
	}
	c, s := byName[sideContrail], byName[sideNatsServer]
	if c != nil && s != nil && c.failed == nil && s.failed == nil {
		ratio := func(a, b float64) string {
			if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
				return "-"
			}
			return strconv.FormatFloat(a/b, 'f', 2, 64)
		}
		rows = append(rows, []string{"ratio", "", "", "",
			ratio(c.connectT.Seconds(), s.connectT.Seconds()), ratio(c.createT.Seconds(), s.createT.Seconds()),
			ratio(c.publishT.Seconds(), s.publishT.Seconds()),
			ratio(float64(c.emptyRSS), float64(s.emptyRSS)), ratio(float64(c.idleRSS), float64(s.idleRSS)),
			ratio(c.perAccountKiB(n), s.perAccountKiB(n))})
	}
	fmt.Fprintf(out, "\n%d accounts, 1 connection, 1 file stream and %d messages each; ratio = contrail / nats-server (lower is better for contrail)\n", n, tenantMsgs)
	fmt.Fprintf(out, "accounts/connections/streams as the server's /jsz and /varz report them; RSS/account = (idle - empty) / accounts\n\n")
	writeTable(out, rows, 1)
	for _, r := range results {
		if r.failed == nil && !r.idleStable {
			fmt.Fprintf(out, "* %s: RSS did not settle within %s; the last sample is shown\n", r.side, rssBound)
		}
	}
	for _, r := range results {
		if r.failed == nil {
			fmt.Fprintf(out, "%s fetched %d account JWT(s) from the resolver\n", r.side, r.resolverFetches)
		}
	}
}
