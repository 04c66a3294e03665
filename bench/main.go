// Command bench compares Contrail with nats-server using natscli's
// `nats bench`: it builds Contrail, makes sure natscli v0.5.0 and
// nats-server v2.15.2 are installed, starts both servers on free loopback
// ports, runs a table of workloads against each of them alternately for a
// number of rounds and prints the medians side by side. With -tenants N
// it instead measures tenant density: N accounts with JetStream, each
// connected and using a stream, and both servers' idle RSS.
//
// Run it from the repository root with `go run ./bench`; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config holds the command-line flags.
type config struct {
	rounds        int
	msgs          int64
	clients       int
	workloads     string
	contrailBin   string
	natsBin       string
	natsServerBin string
	timeout       time.Duration
	subGrace      time.Duration
	selftest      bool
	keep          bool
	verbose       bool
	tenants       int
	noisy         bool
	streams       int
	streamsRef    int
	cluster       bool
	idleStreams   int
	idleTimeout   time.Duration
	tier          bool
	tierMiB       int64
	tierReplays   int
	tierProfile   string
	tierParts     string
}

func parseFlags() config {
	var c config
	flag.IntVar(&c.rounds, "rounds", 3, "rounds per workload and server; the median is reported")
	flag.Int64Var(&c.msgs, "msgs", 1_000_000, "messages per run (slow workloads use a fraction, see README)")
	flag.IntVar(&c.clients, "clients", 1, "concurrent clients for the sync workloads (js pub sync, kv put): natscli's --clients")
	flag.StringVar(&c.workloads, "workloads", "", `comma-separated workloads to run, or "all" (default: those enabled in the table)`)
	flag.StringVar(&c.contrailBin, "contrail-bin", "", "use this prebuilt Contrail binary instead of building ./cmd/contrail")
	flag.StringVar(&c.natsBin, "nats-bin", "", "natscli binary to use (must be "+natsCLI.version+"; default: find or go install)")
	flag.StringVar(&c.natsServerBin, "nats-server-bin", "", "nats-server binary to use (must be "+natsServer.version+"; default: find or go install)")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "limit for each nats command")
	flag.DurationVar(&c.subGrace, "sub-grace", time.Second, "wait after the subscriber starts if the server has no /subsz monitor endpoint")
	flag.BoolVar(&c.selftest, "selftest", false, `run a second nats-server as the "contrail" side (validates the harness; ratios should be ~1)`)
	flag.BoolVar(&c.keep, "keep", false, "keep the temp dir (server logs, data, CSV files) and print its path")
	flag.BoolVar(&c.verbose, "v", false, "print every nats command line")
	flag.IntVar(&c.tenants, "tenants", 0, "run the tenant-density scenario with this many accounts instead of the workloads (see README)")
	flag.BoolVar(&c.noisy, "noisy", false, "run the noisy-neighbour scenario instead of the workloads (see README); with -cluster, its ingest part on three-node clusters with R3 streams")
	flag.IntVar(&c.streams, "streams", 0, "run the stream-count scenario with this many streams instead of the workloads (see README)")
	flag.IntVar(&c.streamsRef, "streams-ref", -1, "streams for nats-server in the stream-count scenario (-1: as -streams, 0: skip nats-server)")
	flag.BoolVar(&c.cluster, "cluster", false, "run the cluster scenario instead of the workloads: 3 Contrail nodes against 3-node nats-server clusters (see README)")
	flag.IntVar(&c.idleStreams, "idle-streams", 10_000, "with -cluster: idle R3 streams for the idle-cost measurement")
	flag.DurationVar(&c.idleTimeout, "idle-timeout", 5*time.Minute, "with -cluster: time allowed per side to create the idle streams; fewer are measured (and said so) if it runs out")
	flag.BoolVar(&c.tier, "tier", false, "run the tiered-storage scenario instead of the workloads: cold replay from versitygw, uploads while publishing, js pub async with tiering on and off (see README)")
	flag.Int64Var(&c.tierMiB, "tier-mib", 1024, "with -tier: MiB of messages published and replayed cold")
	flag.IntVar(&c.tierReplays, "tier-replays", 3, "with -tier: cold replays of the published data; the median is reported")
	flag.StringVar(&c.tierProfile, "tier-profile", "", "with -tier: write CPU profiles of the Contrail server during the first cold replay to this file, and during the first js pub async round with tiering on and off to this file with -pub and -pub-off appended")
	flag.StringVar(&c.tierParts, "tier-parts", "replay,nats,pub", "with -tier: comma-separated parts to run: replay (Contrail cold replay), nats (nats-server replay), pub (js pub async, tiering on vs off)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./bench [flags]\n\nworkloads:")
		for _, w := range workloads {
			mark := ""
			if w.Enabled {
				mark = " (default)"
			}
			fmt.Fprintf(flag.CommandLine.Output(), " %q%s", w.Name, mark)
		}
		fmt.Fprintf(flag.CommandLine.Output(), "\n\nflags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	return c
}

func main() {
	os.Exit(run())
}

func run() int {
	cfg := parseFlags()
	if cfg.rounds < 1 || cfg.msgs < 1 || cfg.clients < 1 || cfg.tenants < 0 || cfg.streams < 0 || cfg.streamsRef < -1 || cfg.idleStreams < 1 || cfg.tierReplays < 1 {
		fmt.Fprintln(os.Stderr, "bench: -rounds, -msgs and -clients must be at least 1, -tenants and -streams at least 0, -streams-ref at least -1, -idle-streams and -tier-replays at least 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the harness outright
	}()
	bench := benchmark
	if cfg.tenants > 0 {
		bench = tenantBenchmark
	}
	if cfg.noisy {
		bench = noisyBenchmark
	}
	if cfg.streams > 0 {
		bench = streamsBenchmark
	}
	if cfg.cluster {
		bench = clusterBenchmark
		if cfg.noisy {
			bench = noisyClusterBenchmark
		}
	}
	if cfg.tier {
		bench = tierBenchmark
	}
	if err := bench(ctx, cfg); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "bench: interrupted; servers stopped and temp files removed")
			return 130
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// benchmark runs the whole comparison; deferred cleanup stops the servers
// and removes the temp dir also when ctx is cancelled.
func benchmark(ctx context.Context, cfg config) error {
	selected, err := selectWorkloads(cfg.workloads)
	if err != nil {
		return err
	}
	root, cleanup, err := benchDir("contrail-bench-", cfg.keep)
	if err != nil {
		return err
	}
	defer cleanup()

	natsBin, err := natsCLI.ensure(ctx, cfg.natsBin)
	if err != nil {
		return err
	}
	contrailBin, serverBin, err := serverBinaries(ctx, cfg, root)
	if err != nil {
		return err
	}
	cArgs := plainContrailArgs(cfg.selftest)

	servers := map[string]*server{}
	for _, s := range []struct {
		side, bin string
		args      serverArgs
	}{{sideContrail, contrailBin, cArgs}, {sideNatsServer, serverBin, natsServerArgs}} {
		srv, err := startServer(ctx, s.side, s.bin, s.args, root)
		if err != nil {
			return err
		}
		defer srv.stop()
		servers[s.side] = srv
	}
	runner, err := newNatsRunner(natsBin, root, cfg.timeout, cfg.subGrace, cfg.verbose)
	if err != nil {
		return err
	}

	fmt.Printf("contrail:    %s at %s\n", contrailBin, servers[sideContrail].url)
	fmt.Printf("nats-server: %s %s at %s\n", serverBin, natsServer.version, servers[sideNatsServer].url)
	fmt.Printf("nats:        %s %s\n", natsBin, natsCLI.version)
	if cfg.selftest {
		fmt.Println("SELFTEST: the contrail side is a second nats-server")
	}

	var results []*result
	failed := 0
	for _, w := range selected {
		w = w.withClients(cfg.clients)
		r := &result{w: w, msgs: w.msgs(cfg.msgs), rounds: map[string][][]float64{}, errs: map[string]error{}, clients: cfg.clients}
		results = append(results, r)
		fmt.Printf("\n%s (%s msgs x %d rounds)\n", w.Name, commas(r.msgs), cfg.rounds)
		for round := range cfg.rounds {
			if w.Sync {
				// The same filesystem as both data dirs, probed each
				// round so the figure sees the load the runs see.
				fs, idle, err := fsyncP50(root)
				if err != nil {
					return err
				}
				r.fsync = append(r.fsync, fs)
				r.fsyncIdle = append(r.fsyncIdle, idle)
				fmt.Printf("  round %d/%d  %-11s  fsync p50 (us) %.1f | after idle %.1f\n", round+1, cfg.rounds, "disk", fs, idle)
			}
			order := []string{sideContrail, sideNatsServer}
			if round%2 == 1 { // alternate who goes first: C N, N C, C N ...
				order[0], order[1] = order[1], order[0]
			}
			for _, side := range order {
				if r.errs[side] != nil {
					continue
				}
				srv := servers[side]
				tag := fmt.Sprintf("%s-%s-r%d", strings.ReplaceAll(w.Name, " ", "-"), side, round+1)
				vals, warns, err := runner.runRound(ctx, w, srv, r.msgs, tag)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					r.errs[side] = err
					reportFailure(w, srv, round, err)
					continue
				}
				r.rounds[side] = append(r.rounds[side], vals)
				fmt.Printf("  round %d/%d  %-11s  %s\n", round+1, cfg.rounds, side, formatRound(w, vals))
				for _, line := range warns {
					fmt.Printf("               nats: %s\n", line)
				}
			}
			if len(r.errs) == len(order) {
				break
			}
		}
		if len(r.errs) > 0 {
			failed++
		}
		if dead := deadServer(servers); dead != nil {
			printTable(os.Stdout, results, cfg.rounds)
			return fmt.Errorf("%s exited (%v); stopping\n%s", dead.name, dead.waitErr, dead.logTail(20))
		}
	}
	printTable(os.Stdout, results, cfg.rounds)
	if failed > 0 {
		return fmt.Errorf("%d of %d workload(s) failed", failed, len(results))
	}
	return nil
}

// reportFailure prints a failed run with the tails of the natscli output
// and of the server's log.
func reportFailure(w Workload, srv *server, round int, err error) {
	fmt.Printf("  round %d     %-11s  FAILED: %v\n", round+1, srv.name, err)
	var ce *cmdError
	if errors.As(err, &ce) && ce.output != "" {
		fmt.Printf("  --- nats output (tail) ---\n%s\n", indent(ce.output))
	}
	if !srv.alive() {
		fmt.Printf("  --- %s exited: %v ---\n", srv.name, srv.waitErr)
	}
	fmt.Printf("  --- %s log (tail) ---\n%s\n", srv.name, indent(srv.logTail(20)))
	fmt.Printf("  skipping the remaining rounds of %q on %s\n", w.Name, srv.name)
}

// deadServer returns a server whose process has exited, if any.
func deadServer(servers map[string]*server) *server {
	for _, side := range []string{sideContrail, sideNatsServer} {
		if s := servers[side]; !s.alive() {
			return s
		}
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
