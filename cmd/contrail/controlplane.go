package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/contrail/contrail/controlplane"
	"github.com/contrail/contrail/controlplane/provision"
)

// defaultCell is the cell `contrail controlplane` serves without --config.
var defaultCell = provision.Cell{Name: "default", NatsURL: "nats://127.0.0.1:4222"}

// controlplaneFlags are the flags of `contrail controlplane`; their names
// are part of the product's contract.
type controlplaneFlags struct {
	httpAddr, dataDir, configFile, logLevel string
	trustedProxies                          []string
	usageInterval                           time.Duration
}

func parseControlplaneFlags(args []string, stderr io.Writer) (*controlplaneFlags, error) {
	f := &controlplaneFlags{}
	fs := flag.NewFlagSet("contrail controlplane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "REST API and account resolver listen address (host:port)")
	fs.StringVar(&f.dataDir, "data-dir", "./data", "directory for the control plane's state and keys")
	fs.StringVar(&f.configFile, "config", "", "YAML or JSON file listing the cells: {cells: [{name, nats_url}]}")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.DurationVar(&f.usageInterval, "usage-interval", time.Minute, "how often each account's usage is sampled for the console's charts (a day of samples is kept at 1m)")
	fs.Func("trusted-proxy", "CIDR of a reverse proxy whose X-Forwarded-For names the client (repeatable, or comma separated); without it the connection's address is used", func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				f.trustedProxies = append(f.trustedProxies, c)
			}
		}
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkUsageInterval(f.usageInterval); err != nil {
		fmt.Fprintf(stderr, "contrail controlplane: %v\n", err)
		return nil, err
	}
	return f, nil
}

// readCells reads the cells file (YAML, so JSON too); unknown keys,
// missing names or URLs and duplicate names are errors.
func readCells(path string) ([]provision.Cell, error) {
	if path == "" {
		return []provision.Cell{defaultCell}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var cfg struct {
		Cells []struct {
			Name    string `yaml:"name"`
			NatsURL string `yaml:"nats_url"`
			// NatsURLs lists a clustered cell's nodes (nats_url may
			// also list them, comma-separated).
			NatsURLs []string `yaml:"nats_urls"`
		} `yaml:"cells"`
	}
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	seen := map[string]bool{}
	var cells []provision.Cell
	for i, c := range cfg.Cells {
		urls, err := cellURLs(c.NatsURL, c.NatsURLs)
		if err != nil {
			return nil, fmt.Errorf("--config %s: cells[%d]: %w", path, i, err)
		}
		c.NatsURL = urls
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("--config %s: cells[%d].name is required", path, i)
		case c.NatsURL == "":
			return nil, fmt.Errorf("--config %s: cells[%d].nats_url (or nats_urls) is required", path, i)
		case seen[c.Name]:
			return nil, fmt.Errorf("--config %s: cells[%d].name %q is used twice", path, i, c.Name)
		}
		seen[c.Name] = true
		cells = append(cells, provision.Cell{Name: c.Name, NatsURL: c.NatsURL})
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("--config %s: no cells", path)
	}
	return cells, nil
}

// cellURLs joins a cell's node URLs (nats_url, possibly comma-separated,
// and nats_urls) into the comma-separated list NATS clients take; each
// must be a nats:// or tls:// URL with a host and port, and none may
// repeat.
func cellURLs(one string, many []string) (string, error) {
	var all []string
	for _, u := range append(strings.Split(one, ","), many...) {
		if u = strings.TrimSpace(u); u != "" {
			all = append(all, u)
		}
	}
	seen := map[string]bool{}
	for _, u := range all {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "nats" && p.Scheme != "tls") || p.Hostname() == "" || p.Port() == "" {
			return "", fmt.Errorf("nats url %q: want nats://host:port or tls://host:port", u)
		}
		if seen[u] {
			return "", fmt.Errorf("nats url %q is listed twice", u)
		}
		seen[u] = true
	}
	return strings.Join(all, ","), nil
}

func runControlplane(args []string, stdout, stderr io.Writer) int {
	f, err := parseControlplaneFlags(args, stderr)
	if err != nil {
		return flagExit(err)
	}
	log, err := newLogger(f.logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "contrail controlplane: %v\n", err)
		return 2
	}
	cells, err := readCells(f.configFile)
	if err != nil {
		fmt.Fprintf(stderr, "contrail controlplane: %v\n", err)
		return 2
	}
	cp, err := controlplane.Open(controlplane.Options{HTTPAddr: f.httpAddr, DataDir: f.dataDir, Cells: cells,
		TrustedProxies: f.trustedProxies, UsageInterval: f.usageInterval, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "contrail controlplane: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Contrail control plane: http://%s/v1 (contract: http://%s/openapi.yaml)\n", cp.Addr(), cp.Addr())
	fmt.Fprintf(stdout, "Console: http://%s/\n", cp.Addr())
	fmt.Fprintf(stdout, "Start data-plane nodes that trust it with:\n  contrail dataplane --operator %s --system-account %s --resolver %s\n",
		cp.OperatorPath(), cp.Keys.SystemPub, cp.ResolverURL())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := cp.Serve(ctx); err != nil {
		log.Error("control plane stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
