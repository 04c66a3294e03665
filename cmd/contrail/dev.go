package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/contrail/contrail/controlplane"
	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/gcfloor"
)

// devFlags are the flags of `contrail dev`: the control plane's and the
// data plane's listen addresses, one data dir for everything, and how
// many data-plane nodes to run.
type devFlags struct {
	httpAddr, natsAddr, monitorAddr, dataDir, logLevel string
	clusterAddr                                        string
	nodes                                              int
	usageInterval                                      time.Duration
	tierSegment, tierLocal                             string
}

func parseDevFlags(args []string, stderr io.Writer) (*devFlags, error) {
	f := &devFlags{}
	fs := flag.NewFlagSet("contrail dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "REST API and account resolver listen address (host:port)")
	fs.StringVar(&f.natsAddr, "nats-addr", "127.0.0.1:4222", "NATS client listen address (host:port)")
	fs.StringVar(&f.monitorAddr, "monitor-addr", "127.0.0.1:8222", "data-plane monitoring HTTP address; empty disables it")
	fs.StringVar(&f.dataDir, "data-dir", "./data", "directory for all state: control plane, keys, streams")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.IntVar(&f.nodes, "nodes", 1, "data-plane nodes: 1, or 3 to 5 for a local cluster (then --nats-addr, --monitor-addr and --cluster-addr are the first node's, the others take the next ports, or give one address per node, comma-separated)")
	fs.DurationVar(&f.usageInterval, "usage-interval", time.Minute, "how often each account's usage is sampled for the console's charts (a day of samples is kept at 1m)")
	fs.StringVar(&f.clusterAddr, "cluster-addr", "127.0.0.1:6222", "with --nodes > 1: the first node's cluster port (host:port)")
	fs.StringVar(&f.tierSegment, "tier-segment-bytes", "", "target size of a tiered segment (the node tiers to <data-dir>/tier), e.g. 64MiB")
	fs.StringVar(&f.tierLocal, "tier-local-bytes", "", "the node's budget for local message bytes before tiering (default: none)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkUsageInterval(f.usageInterval); err != nil {
		fmt.Fprintf(stderr, "contrail dev: %v\n", err)
		return nil, err
	}
	if err := checkDevNodes(f.nodes); err != nil {
		fmt.Fprintf(stderr, "contrail dev: %v\n", err)
		return nil, err
	}
	return f, nil
}

// checkUsageInterval refuses a sampling interval under a second: the
// samples are keyed by the second, and a day's ring is 1440 of them at
// the default minute.
func checkUsageInterval(d time.Duration) error {
	if d < time.Second {
		return fmt.Errorf("--usage-interval %v: must be at least 1s", d)
	}
	return nil
}

// nodeOptions are the in-process node's options: the data plane's
// defaults, the addresses, and operator mode trusting cp.
func (f *devFlags) nodeOptions(cp *controlplane.ControlPlane) (*config.Options, error) {
	opts := config.Default()
	host, port, err := splitHostPort(f.natsAddr)
	if err != nil {
		return nil, fmt.Errorf("--nats-addr: %w", err)
	}
	opts.Host, opts.Port = host, port
	if f.monitorAddr == "" {
		opts.HTTPPort = 0
	} else {
		mh, mp, err := splitHostPort(f.monitorAddr)
		if err != nil {
			return nil, fmt.Errorf("--monitor-addr: %w", err)
		}
		if mp == 0 {
			mp = -1 // a free port, as nats-server spells it
		}
		opts.HTTPHost, opts.HTTPPort = mh, mp
	}
	opts.Operator = cp.OperatorPath()
	opts.Resolver = "URL(" + cp.ResolverURL() + ")"
	opts.SystemAccount = cp.Keys.SystemPub
	// Tiered storage to a directory of the data dir: the embedded
	// default needs nothing else running.
	tierDir, err := filepath.Abs(filepath.Join(f.dataDir, "tier"))
	if err != nil {
		return nil, err
	}
	to := &config.TierOptions{URL: "file://" + tierDir}
	for _, sz := range []struct {
		name, v string
		dst     *int64
	}{{"tier-segment-bytes", f.tierSegment, &to.SegmentBytes}, {"tier-local-bytes", f.tierLocal, &to.LocalBytes}} {
		if sz.v == "" {
			continue
		}
		if *sz.dst, err = config.ParseSize(sz.v); err != nil {
			return nil, fmt.Errorf("--%s: %w", sz.name, err)
		}
	}
	opts.JetStream = &config.JetStreamOptions{Enabled: true, Tier: to}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return opts, nil
}

func runDev(args []string, stdout, stderr io.Writer) int {
	f, err := parseDevFlags(args, stderr)
	if err != nil {
		return flagExit(err)
	}
	log, err := newLogger(f.logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "contrail dev: %v\n", err)
		return 2
	}
	natsURL := "nats://" + f.natsAddr
	var nodes []*devNode
	if f.nodes > 1 {
		if nodes, err = devNodes(f, stderr, log.With("plane", "data")); err != nil {
			fmt.Fprintf(stderr, "contrail dev: %v\n", err)
			return 2
		}
		natsURL = natsURLs(nodes)
	}
	cp, err := controlplane.Open(controlplane.Options{
		HTTPAddr: f.httpAddr, DataDir: f.dataDir,
		Cells:         []provision.Cell{{Name: "dev", NatsURL: natsURL}},
		UsageInterval: f.usageInterval,
		Log:           log.With("plane", "control"),
	})
	if err != nil {
		fmt.Fprintf(stderr, "contrail dev: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if nodes != nil {
		return runDevCluster(ctx, f, cp, nodes, stdout, log)
	}
	opts, err := f.nodeOptions(cp)
	if err != nil {
		fmt.Fprintf(stderr, "contrail dev: %v\n", err)
		return 2
	}
	defer gcfloor.Start(gcfloor.DefaultFloor).Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var cpErr, dpErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		cpErr = cp.Serve(ctx)
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		dpErr = serveDataplane(ctx, opts, filepath.Join(f.dataDir, "node"), log.With("plane", "data"))
	}()
	if err := waitReady(ctx, cp, f.natsAddr); err == nil {
		dev, err := cp.EnsureDevOrg(ctx)
		if err != nil {
			log.Error("creating the dev organization", "err", err)
			cancel()
		} else {
			fmt.Fprintf(stdout, "Contrail dev is running (data in %s)\n", f.dataDir)
			fmt.Fprintf(stdout, "  console: http://%s/   (open it in a browser and sign up)\n", cp.Addr())
			fmt.Fprintf(stdout, "  API:    http://%s/v1   (contract: http://%s/openapi.yaml)\n", cp.Addr(), cp.Addr())
			fmt.Fprintf(stdout, "  NATS:   %s\n", natsURL)
			fmt.Fprintf(stdout, "  creds:  %s   (try: nats --server %s --creds %s pub x y)\n", dev.CredsPath, natsURL, dev.CredsPath)
			fmt.Fprintf(stdout, "  token:  %s   (an API token of the dev organization)\n", dev.TokenPath)
			fmt.Fprintln(stdout, "Contrail dev is ready")
		}
	}
	wg.Wait()
	code := 0
	for _, e := range []struct {
		what string
		err  error
	}{{"control plane", cpErr}, {"data plane", dpErr}} {
		if e.err != nil {
			log.Error(e.what+" stopped", "err", e.err)
			code = 1
		}
	}
	return code
}

// waitReady waits until the node accepts clients and the control plane
// is connected to it, so what dev prints works at once.
func waitReady(ctx context.Context, cp *controlplane.ControlPlane, natsAddr string) error {
	if err := waitListening(ctx, natsAddr); err != nil {
		return err
	}
	return cp.WaitCells(ctx)
}

// waitListening waits until addr accepts TCP connections or ctx ends.
func waitListening(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
