package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Noisy-neighbour scenario (-noisy): tenant B's STREAM.INFO latency on
// its empty stream, alone and while tenant A floods the JetStream API of
// the same server.
const (
	noisyBigMsgs      = 300_000 // messages in A's stream, one subject each
	noisyHeavyLoops   = 8       // A's STREAM.INFO loops on that stream
	noisyFloodConns   = 4       // A's connections keeping requests outstanding...
	noisyFloodPer     = 1_500   // ...this many each (6,000 in all)
	noisyAlone        = 3 * time.Second
	noisyFlooded      = 5 * time.Second
	noisyReqTimeout   = 5 * time.Second
	noisyDrainTimeout = 15 * time.Second
)

// noisyJSLimits give both tenants room for A's large stream.
var noisyJSLimits = jwt.JetStreamLimits{MemoryStorage: 64 << 20, DiskStorage: 4 << 30, Streams: -1, Consumer: -1}

// latencies are one phase of B's requests.
type latencies struct {
	lat                         []time.Duration // answered requests
	overloaded, timeouts, other int
}

func (l *latencies) pct(p float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// noisyResult is what one server did in the scenario.
type noisyResult struct {
	sideOutcome
	alone, flooded latencies
	aOK, aRefused  int64 // A's flood requests answered, and refused with 10023
	aLost          int64 // A's flood requests never answered
	aHeavy         int64 // A's heavy STREAM.INFOs answered
	fillT          time.Duration
}

// noisyBenchmark runs the scenario on Contrail, then on nats-server, and
// prints the table.
func noisyBenchmark(ctx context.Context, cfg config) error {
	env, err := startNoisyEnv(ctx, cfg, "contrail-bench-noisy-")
	if err != nil {
		return err
	}
	defer env.close()
	root, contrailBin, serverBin, world := env.root, env.contrailBin, env.serverBin, env.world
	sides := []tenantSide{world.contrailSide(contrailBin)}
	if cfg.selftest {
		if sides[0], err = world.natsServerSide(root, sideContrail, serverBin); err != nil {
			return err
		}
		fmt.Println("SELFTEST: the contrail side is a second nats-server")
	}
	natsSide, err := world.natsServerSide(root, sideNatsServer, serverBin)
	if err != nil {
		return err
	}
	sides = append(sides, natsSide)
	fmt.Printf("tenant A: %s messages in a file stream (one subject each), then %d STREAM.INFO loops on it and %d connections keeping %s STREAM.INFO requests outstanding\n",
		commas(noisyBigMsgs), noisyHeavyLoops, noisyFloodConns, commas(noisyFloodConns*noisyFloodPer))
	fmt.Printf("tenant B: STREAM.INFO of its empty stream, one at a time, for %s alone and %s during A's flood\n", noisyAlone, noisyFlooded)

	results, err := runSides(ctx, sides, func(s tenantSide) *noisyResult {
		fmt.Printf("\n%s: %s\n", s.name, s.bin)
		return runNoisySide(ctx, s, root, world)
	})
	if err != nil {
		return err
	}
	printNoisyTable(os.Stdout, results)

	fmt.Printf("\ningest: tenant A floods %d streams capped at %d messages, one connection each; tenant B publishes async (%d in flight) to its own stream for %s alone and %s during the flood\n",
		ingestFloodStreams, ingestFloodMaxMsgs, ingestWindow, ingestAlone, ingestFlooded)
	ingest, err := runSides(ctx, sides, func(s tenantSide) *noisyIngest {
		fmt.Printf("\n%s: %s\n", s.name, s.bin)
		return runIngestSide(ctx, s, root, world)
	})
	if err != nil {
		return err
	}
	printIngestTable(os.Stdout, ingest, 1)
	return errors.Join(sidesError(results), sidesError(ingest))
}

// noisyEnv is what both forms of the noisy-neighbour scenario run in: a
// temp dir, the two server binaries, and tenants A and B.
type noisyEnv struct {
	root, contrailBin, serverBin string
	world                        *tenantWorld
	cleanup                      func()
}

// startNoisyEnv makes the temp dir (named by prefix), finds or builds the
// binaries, and starts the tenants' resolver.
func startNoisyEnv(ctx context.Context, cfg config, prefix string) (*noisyEnv, error) {
	root, cleanup, err := benchDir(prefix, cfg.keep)
	if err != nil {
		return nil, err
	}
	env := &noisyEnv{root: root, cleanup: cleanup}
	if env.contrailBin, env.serverBin, err = serverBinaries(ctx, cfg, root); err != nil {
		cleanup()
		return nil, err
	}
	if env.world, err = startTenantWorld(2, noisyJSLimits, root); err != nil {
		cleanup()
		return nil, err
	}
	return env, nil
}

// close stops the resolver and removes the temp dir (unless kept).
func (e *noisyEnv) close() {
	e.world.close()
	e.cleanup()
}

// runNoisySide starts one server, fills A's stream, measures B alone and
// during A's flood, and stops the server.
func runNoisySide(ctx context.Context, s tenantSide, root string, world *tenantWorld) *noisyResult {
	r := &noisyResult{sideOutcome: sideOutcome{side: s.name}}
	r.failed = onServer(ctx, s.name, s.bin, s.args, root, func(srv *server) error { return r.measure(ctx, srv, world) })
	return r
}

// measure takes the side's figures on srv.
func (r *noisyResult) measure(ctx context.Context, srv *server, world *tenantWorld) error {
	conns := tenantConns{srv: srv}
	defer conns.close()
	dial := conns.dial
	tA, tB := world.tenants[0], world.tenants[1]
	ncA, err := dial(tA)
	if err != nil {
		return err
	}
	ncB, err := dial(tB)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := fillBig(ctx, ncA); err != nil {
		return err
	}
	r.fillT = time.Since(start)
	fmt.Printf("  A's stream filled: %s messages in %s\n", commas(noisyBigMsgs), r.fillT.Round(time.Millisecond))
	jsB, _ := jetstream.New(ncB)
	cctx, cancel := context.WithTimeout(ctx, tenantOpTimeout)
	_, err = jsB.CreateStream(cctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, Storage: jetstream.FileStorage})
	cancel()
	if err != nil {
		return fmt.Errorf("stream SMALL of tenant B: %w", err)
	}

	r.alone = probeLoop(ctx, ncB, noisyAlone)
	fmt.Printf("  B alone:   %s\n", r.alone.describe())

	stop := make(chan struct{})
	var heavy sync.WaitGroup
	var heavyOK atomic.Int64
	heavyConn, err := dial(tA)
	if err != nil {
		return err
	}
	for range noisyHeavyLoops {
		heavy.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := heavyConn.Request("$JS.API.STREAM.INFO.BIG", nil, noisyReqTimeout); err == nil {
					heavyOK.Add(1)
				}
			}
		})
	}
	var floods []*noisyFlood
	for range noisyFloodConns {
		nc, err := dial(tA)
		if err != nil {
			close(stop)
			heavy.Wait()
			return err
		}
		f, err := startNoisyFlood(nc, "$JS.API.STREAM.INFO.BIG", noisyFloodPer)
		if err != nil {
			close(stop)
			heavy.Wait()
			return err
		}
		floods = append(floods, f)
	}
	r.flooded = probeLoop(ctx, ncB, noisyFlooded)
	close(stop)
	for _, f := range floods {
		f.stopped.Store(true)
	}
	heavy.Wait()
	deadline := time.Now().Add(noisyDrainTimeout)
	for _, f := range floods {
		for !f.answered() && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		r.aOK += f.ok.Load()
		r.aRefused += f.refused.Load()
		r.aLost += f.sent.Load() - f.ok.Load() - f.refused.Load()
	}
	r.aHeavy = heavyOK.Load()
	fmt.Printf("  B flooded: %s\n", r.flooded.describe())
	fmt.Printf("  A: %s flood requests answered, %s refused (10023), %s unanswered after %s; %s heavy infos answered\n",
		commas(r.aOK), commas(r.aRefused), commas(r.aLost), noisyDrainTimeout, commas(r.aHeavy))
	if !srv.alive() {
		return fmt.Errorf("server exited: %v", srv.waitErr)
	}
	return nil
}

// tenantConns dials tenants' connections to one server and closes them
// all when the measurement ends.
type tenantConns struct {
	srv   *server
	conns []*nats.Conn
}

// dial connects as t's user, without reconnecting: a measurement whose
// server went away fails rather than waits.
func (c *tenantConns) dial(t tenant) (*nats.Conn, error) {
	nc, err := nats.Connect(c.srv.url, nats.UserJWTAndSeed(t.userJWT, t.userSeed), nats.Name(t.name),
		nats.NoReconnect(), nats.Timeout(tenantOpTimeout))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	c.conns = append(c.conns, nc)
	return nc, nil
}

func (c *tenantConns) close() {
	for _, nc := range c.conns {
		nc.Close()
	}
}

// fillBig creates A's stream BIG and publishes noisyBigMsgs messages into
// it, one subject each, asynchronously.
func fillBig(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, tenantOpTimeout)
	defer cancel()
	if _, err := js.CreateStream(cctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("stream BIG of tenant A: %w", err)
	}
	payload := []byte("0123456789abcdef")
	// In windows of acknowledged batches: a client that outruns the
	// server's acks stalls and fails instead of waiting.
	const window = 4096
	for i := 0; i < noisyBigMsgs; i++ {
		if _, err := js.PublishAsync("big."+strconv.Itoa(i), payload); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		if (i+1)%window != 0 && i+1 != noisyBigMsgs {
			continue
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			return fmt.Errorf("%d publishes not acknowledged after a minute", js.PublishAsyncPending())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// noisyFlood is one connection keeping requests outstanding: a batch at
// first and, until stopped, a new one for every request answered.
type noisyFlood struct {
	sent, ok, refused atomic.Int64
	stopped           atomic.Bool
}

func (f *noisyFlood) answered() bool { return f.ok.Load()+f.refused.Load() >= f.sent.Load() }

func startNoisyFlood(nc *nats.Conn, subject string, outstanding int) (*noisyFlood, error) {
	f := &noisyFlood{}
	inbox := nats.NewInbox()
	fire := func() {
		if nc.PublishRequest(subject, inbox, nil) == nil {
			f.sent.Add(1)
		}
	}
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		if apiErrCode(m.Data) == 10023 {
			f.refused.Add(1)
			return
		}
		f.ok.Add(1)
		if !f.stopped.Load() {
			fire()
		}
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	for range outstanding {
		fire()
	}
	return f, nc.Flush()
}

// apiErrCode is a JetStream API reply's err_code, 0 if none.
func apiErrCode(data []byte) int {
	var r struct {
		Error *struct {
			Code int `json:"err_code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &r) != nil || r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// probeLoop is B: STREAM.INFO of its empty stream, one at a time, for d.
func probeLoop(ctx context.Context, nc *nats.Conn, d time.Duration) latencies {
	var l latencies
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
		start := time.Now()
		m, err := nc.Request("$JS.API.STREAM.INFO.SMALL", nil, noisyReqTimeout)
		took := time.Since(start)
		switch {
		case errors.Is(err, nats.ErrTimeout):
			l.timeouts++
		case err != nil:
			l.other++
		case apiErrCode(m.Data) == 10023:
			l.overloaded++
		case apiErrCode(m.Data) != 0:
			l.other++
		default:
			l.lat = append(l.lat, took)
		}
	}
	return l
}

func (l *latencies) describe() string {
	return fmt.Sprintf("%s answered, p50 %s, p99 %s, max %s; %d refused (10023), %d timed out, %d other errors",
		commas(int64(len(l.lat))), fmtLatency(l.pct(0.5)), fmtLatency(l.pct(0.99)), fmtLatency(l.pct(1)),
		l.overloaded, l.timeouts, l.other)
}

// fmtLatency prints d with a unit that keeps three or so digits.
func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// printNoisyTable writes one row per server: B alone, B flooded, B's
// failures while flooded, and what A's flood got.
func printNoisyTable(out io.Writer, results []*noisyResult) {
	header := []string{"server", "B alone p50", "p99", "B flooded p50", "p99", "max",
		"B answered", "B 10023", "B timeouts", "A 10023", "A unanswered"}
	rows := [][]string{header}
	for _, r := range results {
		if r.failed != nil {
			rows = append(rows, []string{r.side, "FAILED"})
			continue
		}
		f := r.flooded
		rows = append(rows, []string{r.side,
			fmtLatency(r.alone.pct(0.5)), fmtLatency(r.alone.pct(0.99)),
			fmtLatency(f.pct(0.5)), fmtLatency(f.pct(0.99)), fmtLatency(f.pct(1)),
			commas(int64(len(f.lat))), strconv.Itoa(f.overloaded), strconv.Itoa(f.timeouts),
			commas(r.aRefused), commas(r.aLost)})
	}
	fmt.Fprintf(out, "\nB's STREAM.INFO on an empty stream, alone and while A floods (latency of answered requests; B's failures while flooded; A's refused and unanswered flood requests)\n\n")
	writeTable(out, rows, 1)
}
