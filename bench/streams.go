package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream-count scenario (-streams N): N file streams of one message each
// in one account, created through the JetStream API as fast as the server
// takes them, then the server's RSS, disk use and restart time.
const (
	streamsWorkers   = 16     // concurrent create+publish loops
	streamsBlock     = 10_000 // the create rate is reported per this many streams
	streamsOpTimeout = 30 * time.Second
	streamsRestart   = 5 * time.Minute // nats-server took a minute for 20,000 streams
	// Contrail's targets, from the issue that added the scenario.
	streamsTargetPer100k = 2 * time.Minute
	streamsTargetRSS     = 1 << 20 // KiB
	streamsTargetRestart = 2 * time.Second
)

// streamsResult is one server's figures.
type streamsResult struct {
	sideOutcome
	n        int
	blocks   []time.Duration // time to create each block of streamsBlock (the last may be short)
	total    time.Duration
	rss, hwm int64 // KiB, once idle after creating, and the peak
	disk     int64 // bytes in the data dir after the restart's shutdown
	restart  time.Duration
	restartN int   // streams the restarted server reports
	rssAfter int64 // KiB, right after the restart
}

// streamsBenchmark runs the stream-count scenario on Contrail with
// cfg.streams streams and on nats-server with cfg.streamsRef (0 skips
// it), one server after the other, and prints the table.
func streamsBenchmark(ctx context.Context, cfg config) error {
	root, cleanup, err := benchDir("contrail-bench-streams-", cfg.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	refN := cfg.streamsRef
	if refN < 0 {
		refN = cfg.streams
	}
	// nats-server keeps files open per stream; Contrail does not.
	limit, err := raiseOpenFileLimit(uint64(2*refN + 1024))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: warning: open-file limit: %v\n", err)
	}
	contrailBin, serverBin, err := serverBinaries(ctx, cfg, root)
	if err != nil {
		return err
	}
	cArgs := plainContrailArgs(cfg.selftest)
	fmt.Printf("streams: file storage, one subject and one message each, %d concurrent clients; open-file limit %d\n", streamsWorkers, limit)

	type side struct {
		name, bin string
		args      serverArgs
		n         int
	}
	var sides []side
	for _, s := range []side{{sideContrail, contrailBin, cArgs, cfg.streams}, {sideNatsServer, serverBin, natsServerArgs, refN}} {
		if s.n != 0 {
			sides = append(sides, s)
		}
	}
	results, err := runSides(ctx, sides, func(s side) *streamsResult {
		fmt.Printf("\n%s: %s, %s streams\n", s.name, s.bin, commas(int64(s.n)))
		return runStreamsSide(ctx, s.name, s.bin, s.args, root, s.n)
	})
	if err != nil {
		return err
	}
	printStreamsTable(os.Stdout, results)
	return sidesError(results)
}

// runStreamsSide starts one server on a fresh data dir, creates n
// streams with a message each, takes the figures, restarts it on the
// same data and times it to healthy, then stops it.
func runStreamsSide(ctx context.Context, side, bin string, args serverArgs, root string, n int) *streamsResult {
	r := &streamsResult{sideOutcome: sideOutcome{side: side}, n: n}
	r.failed = onServer(ctx, side, bin, args, root, func(srv *server) error { return r.measure(ctx, srv, root) })
	return r
}

// measure takes the side's figures on srv, which it stops and restarts.
func (r *streamsResult) measure(ctx context.Context, srv *server, root string) error {
	if err := createStreams(ctx, srv.url, r.n, r); err != nil {
		return err
	}
	res, err := waitStableRSS(ctx, srv.pid())
	if err != nil {
		return err
	}
	r.rss, r.hwm = res.last.total, res.last.peak
	fmt.Printf("  created in %s; %s\n", r.total.Round(time.Millisecond), res.describe())

	// Restart on the same data: a clean stop, then the time from exec to
	// healthy (INFO on the client port and 200 from /healthz) and to every
	// stream being reported.
	srv.stop()
	if r.disk, err = dirSize(serverDataDir(root, r.side)); err != nil {
		return err
	}
	start := time.Now()
	again, err := restartServer(ctx, srv, streamsRestart)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer again.stop()
	r.restart = time.Since(start)
	after, _ := readRSS(again.pid()) // 0 if unavailable
	r.rssAfter = after.total
	if r.restartN, err = countStreams(ctx, again.url); err != nil {
		return fmt.Errorf("after restart: %w", err)
	}
	fmt.Printf("  restarted to healthy in %s, %s streams reported\n", r.restart.Round(time.Millisecond), commas(int64(r.restartN)))
	if r.restartN != r.n {
		return fmt.Errorf("after restart %d streams, want %d", r.restartN, r.n)
	}
	return nil
}

// createStreams creates streams S0000000… with subject streams.<i> and
// publishes one message to each, on streamsWorkers connections, and
// records how long each block of streamsBlock took.
func createStreams(ctx context.Context, url string, n int, r *streamsResult) error {
	conns := make([]jetstream.JetStream, streamsWorkers)
	for i := range conns {
		nc, err := nats.Connect(url, nats.Timeout(streamsOpTimeout), nats.MaxReconnects(-1))
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer nc.Close()
		if conns[i], err = jetstream.New(nc); err != nil {
			return err
		}
	}
	var done atomic.Int64
	marks := make(chan time.Duration, n/streamsBlock+2)
	start := time.Now()
	var worker atomic.Int64
	err := parallel(ctx, n, streamsWorkers, func(i int) error {
		js := conns[int(worker.Add(1))%streamsWorkers]
		octx, cancel := context.WithTimeout(ctx, streamsOpTimeout)
		defer cancel()
		name, subj := fmt.Sprintf("S%07d", i), "streams."+strconv.Itoa(i)
		if _, err := js.CreateStream(octx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}, Storage: jetstream.FileStorage}); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		if _, err := js.Publish(octx, subj, []byte("one message")); err != nil {
			return fmt.Errorf("publish to %s: %w", name, err)
		}
		if d := done.Add(1); d%streamsBlock == 0 || d == int64(n) {
			marks <- time.Since(start)
			fmt.Printf("  %9s streams  %s\n", commas(d), time.Since(start).Round(time.Millisecond))
		}
		return nil
	})
	r.total = time.Since(start)
	close(marks)
	var at []time.Duration
	for m := range marks {
		at = append(at, m)
	}
	slices.Sort(at) // workers may send two close marks out of order
	var prev time.Duration
	for _, m := range at {
		r.blocks = append(r.blocks, m-prev)
		prev = m
	}
	return err
}

// countStreams asks the server's JetStream how many streams the account
// has.
func countStreams(ctx context.Context, url string) (int, error) {
	nc, err := nats.Connect(url, nats.Timeout(streamsOpTimeout))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	octx, cancel := context.WithTimeout(ctx, streamsOpTimeout)
	defer cancel()
	info, err := js.AccountInfo(octx)
	if err != nil {
		return 0, err
	}
	return info.Streams, nil
}

// restartServer starts a stopped server again with the same command line
// (ports and data dir) and waits until it is ready.
func restartServer(ctx context.Context, old *server, timeout time.Duration) (*server, error) {
	s := &server{name: old.name, url: old.url, monitor: old.monitor, logPath: old.logPath, done: make(chan struct{})}
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	if err := s.launch(ctx, logf, old.cmd.Path, old.cmd.Args[1:], timeout); err != nil {
		return nil, fmt.Errorf("starting again: %w", err)
	}
	return s, nil
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// printStreamsTable prints the figures of each side, the create rate per
// block (flat means creation does not slow down with the stream count),
// and Contrail's figures against its targets.
func printStreamsTable(out io.Writer, results []*streamsResult) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tstreams\tcreate s\tstreams/s\tslowest/fastest block\tRSS MiB\tpeak MiB\tdisk KiB/stream\trestart s\tRSS after restart MiB\t")
	for _, r := range results {
		if r.failed != nil {
			fmt.Fprintf(tw, "%s\tFAILED\t\t\t\t\t\t\t\t\t\n", r.side)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.0f\t%.2f\t%.0f\t%.0f\t%.1f\t%.2f\t%.0f\t\n", r.side, commas(int64(r.n)),
			r.total.Seconds(), float64(r.n)/r.total.Seconds(), r.spread(), mib(r.rss), mib(r.hwm),
			float64(r.disk)/1024/float64(r.n), r.restart.Seconds(), mib(r.rssAfter))
	}
	tw.Flush()
	for _, r := range results {
		if r.failed != nil || len(r.blocks) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s streams/s per %s streams:", r.side, commas(streamsBlock))
		for i, b := range r.blocks {
			size := streamsBlock
			if i == len(r.blocks)-1 && r.n%streamsBlock != 0 {
				size = r.n % streamsBlock
			}
			fmt.Fprintf(out, " %.0f", float64(size)/b.Seconds())
		}
		fmt.Fprintln(out)
	}
	if len(results) > 0 && results[0].side == sideContrail && results[0].failed == nil {
		c := results[0]
		budget := time.Duration(float64(streamsTargetPer100k) * float64(c.n) / 100_000)
		fmt.Fprintf(out, "\n%s targets: create %s in ≤ %s: %s; RSS ≤ %d MiB: %s; restart ≤ %s: %s\n", sideContrail,
			commas(int64(c.n)), budget, verdict(c.total <= budget), streamsTargetRSS>>10,
			verdict(c.hwm <= streamsTargetRSS), streamsTargetRestart, verdict(c.restart <= streamsTargetRestart))
	}
}

// spread is the slowest full block's time over the fastest's: about 1
// when the create rate is flat.
func (r *streamsResult) spread() float64 {
	full := r.blocks
	if r.n%streamsBlock != 0 && len(full) > 1 {
		full = full[:len(full)-1]
	}
	lo, hi := full[0], full[0]
	for _, b := range full {
		lo, hi = min(lo, b), max(hi, b)
	}
	return hi.Seconds() / lo.Seconds()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
