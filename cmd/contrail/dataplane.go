package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/contrail/contrail/dataplane/cluster/mux"
	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/gcfloor"
	"github.com/contrail/contrail/dataplane/jetstream"
	"github.com/contrail/contrail/dataplane/monitor"
	"github.com/contrail/contrail/dataplane/resolver"
	"github.com/contrail/contrail/dataplane/server"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/tier"
)

func serverVersion() string { return server.Version }

// dataplaneFlags are the flags of `contrail dataplane`; their names are
// part of the product's contract.
type dataplaneFlags struct {
	natsAddr, monitorAddr, dataDir, configFile string
	tlsCert, tlsKey                            string
	logLevel                                   string
	pprofAddr                                  string
	operator, resolver, systemAccount          string
	nodeID, clusterAddr, peers, clusterName    string
	raftMultiplier                             int
	digestInterval                             time.Duration
	tierURL, tierEndpoint                      string
	tierSegment, tierLocal, tierCache          string
	set                                        map[string]bool
}

func parseDataplaneFlags(args []string, stderr io.Writer) (*dataplaneFlags, error) {
	f := &dataplaneFlags{set: map[string]bool{}}
	fs := flag.NewFlagSet("contrail dataplane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.natsAddr, "nats-addr", "127.0.0.1:4222", "client listen address (host:port)")
	fs.StringVar(&f.monitorAddr, "monitor-addr", "127.0.0.1:8222", "monitoring HTTP address (host:port); empty disables it")
	fs.StringVar(&f.dataDir, "data-dir", "./data", "directory for the node's state")
	fs.StringVar(&f.configFile, "config", "", "nats-server style configuration file")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM); requires --tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "serve Go profiling (net/http/pprof) on this address; off by default")
	fs.StringVar(&f.operator, "operator", "", "operator JWT file: turns on operator mode (accounts and users from JWTs)")
	fs.StringVar(&f.resolver, "resolver", "", "account resolver base URL; the account key is appended (URL(...) and MEMORY also accepted)")
	fs.StringVar(&f.systemAccount, "system-account", "", "system account public key (default: the operator JWT's)")
	fs.StringVar(&f.nodeID, "node-id", "", "this node's name in the cluster (the server_name clients see)")
	fs.StringVar(&f.clusterAddr, "cluster-addr", "", "cluster port (host:port) for routes and replication between nodes; empty runs alone")
	fs.StringVar(&f.peers, "peers", "", "initial cluster members, this node included: n1=host:port,n2=host:port,...")
	fs.StringVar(&f.clusterName, "cluster-name", config.DefaultClusterName, "cluster name; nodes of another cluster are refused")
	fs.IntVar(&f.raftMultiplier, "raft-multiplier", 1, "scales raft's heartbeat, election and lease timeouts (1: 250 ms, for a LAN; 3-5 for slow or shared machines): failover takes about this many times longer, spurious elections under load get rarer")
	fs.DurationVar(&f.digestInterval, "digest-interval", config.DefaultDigestInterval, "how often the replicas of each partition compare digests of what they hold, a divergent copy being replaced from the others; 0 never")
	fs.StringVar(&f.tierURL, "tier-url", "", "tiered storage: move cold stream segments to s3://bucket/prefix or file:///dir")
	fs.StringVar(&f.tierEndpoint, "tier-endpoint", "", "S3-compatible endpoint URL for --tier-url (path-style addressing); credentials come from the standard AWS environment and config")
	fs.StringVar(&f.tierSegment, "tier-segment-bytes", "", "target size of a tiered segment, e.g. 64MiB (default 64MiB)")
	fs.StringVar(&f.tierLocal, "tier-local-bytes", "", "node-wide budget for local message bytes: tiering starts near it (default: none, each stream keeps about two segments local)")
	fs.StringVar(&f.tierCache, "tier-cache-bytes", "", "read cache for cold blocks (default: a tenth of --tier-local-bytes, at least 8MiB)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// options merges defaults, the config file, and flags, in that order.
func (f *dataplaneFlags) options() (*config.Options, error) {
	opts := config.Default()
	if f.configFile != "" {
		var err error
		if opts, err = config.ParseFile(f.configFile); err != nil {
			return nil, err
		}
	}
	if f.set["nats-addr"] || f.configFile == "" {
		host, port, err := splitHostPort(f.natsAddr)
		if err != nil {
			return nil, fmt.Errorf("--nats-addr: %w", err)
		}
		opts.Host, opts.Port = host, port
	}
	if f.set["monitor-addr"] || f.configFile == "" {
		if f.monitorAddr == "" {
			opts.HTTPPort = 0
		} else {
			host, port, err := splitHostPort(f.monitorAddr)
			if err != nil {
				return nil, fmt.Errorf("--monitor-addr: %w", err)
			}
			if port == 0 {
				port = -1 // a free port, as nats-server spells it
			}
			opts.HTTPHost, opts.HTTPPort = host, port
		}
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		if opts.TLS == nil {
			opts.TLS = &config.TLSOptions{Timeout: config.DefaultTLSTimeout}
		}
		opts.TLS.CertFile, opts.TLS.KeyFile = f.tlsCert, f.tlsKey
	}
	if f.operator != "" {
		opts.Operator = f.operator
	}
	if f.resolver != "" {
		opts.Resolver = f.resolver
	}
	if f.systemAccount != "" {
		opts.SystemAccount = f.systemAccount
	}
	if err := f.clusterOptions(opts); err != nil {
		return nil, err
	}
	if err := f.tierOptions(opts); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Operator == "" && (opts.Resolver != "" || opts.DirResolver != nil || (opts.SystemAccount != "" && len(opts.Accounts) == 0) || len(opts.ResolverPreload) > 0) {
		// Starting in open mode when the file asks for operator mode would
		// serve every client without authentication.
		return nil, errors.New("resolver and system_account need an operator (--operator or `operator` in the config) or, for system_account, an accounts block")
	}
	return opts, nil
}

// tierOptions applies the --tier-* flags over the config file's
// jetstream { tier { ... } } block.
func (f *dataplaneFlags) tierOptions(opts *config.Options) error {
	given := false
	for _, n := range []string{"tier-url", "tier-endpoint", "tier-segment-bytes", "tier-local-bytes", "tier-cache-bytes"} {
		given = given || f.set[n]
	}
	if !given {
		return nil
	}
	if opts.JetStream == nil {
		opts.JetStream = &config.JetStreamOptions{Enabled: true}
	}
	t := opts.JetStream.Tier
	if t == nil {
		t = &config.TierOptions{}
		opts.JetStream.Tier = t
	}
	if f.set["tier-url"] {
		t.URL = f.tierURL
	}
	if f.set["tier-endpoint"] {
		t.Endpoint = f.tierEndpoint
	}
	for _, sz := range []struct {
		name, v string
		dst     *int64
	}{{"tier-segment-bytes", f.tierSegment, &t.SegmentBytes}, {"tier-local-bytes", f.tierLocal, &t.LocalBytes}, {"tier-cache-bytes", f.tierCache, &t.CacheBytes}} {
		if !f.set[sz.name] {
			continue
		}
		n, err := config.ParseSize(sz.v)
		if err != nil {
			return fmt.Errorf("--%s: %w", sz.name, err)
		}
		*sz.dst = n
	}
	return nil
}

// tierNodeName is the name a node without a server_name gives its
// objects: made once and kept in its store directory, since the server
// id it would otherwise use changes at every start, and a node judges
// only the objects under its own name (the orphan scan).
func tierNodeName(dir string) (string, error) {
	path := filepath.Join(dir, "tier-node")
	if b, err := os.ReadFile(path); err == nil {
		if name := strings.TrimSpace(string(b)); name != "" {
			return name, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("tier node name: %w", err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	name := "node-" + hex.EncodeToString(id[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tier node name: %w", err)
	}
	if err := os.WriteFile(path, []byte(name+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("tier node name: %w", err)
	}
	return name, nil
}

// openTier opens the object store the tier options name, for the engine.
func openTier(t *config.TierOptions, node string, log *slog.Logger) (jetstream.TierOptions, error) {
	if t == nil {
		return jetstream.TierOptions{}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obj, err := tier.Open(ctx, t.URL, t.Endpoint, nil)
	if err != nil {
		return jetstream.TierOptions{}, err
	}
	log.Info("tiered storage on", "store", obj.String(), "segment_bytes", t.SegmentBytes, "local_bytes", t.LocalBytes,
		"cache_bytes", t.CacheBytes)
	return jetstream.TierOptions{Store: obj, URL: obj.String(), SegmentBytes: t.SegmentBytes, LocalBytes: t.LocalBytes,
		CacheBytes: t.CacheBytes, ReadRate: t.ReadRate, ReadTimeout: t.ReadTimeout, Node: node}, nil
}

// listenClusterPort binds the cluster port. It is bound before anything
// that uses it starts, so routes and raft groups all share the one mux;
// connections for a channel nobody listens on yet are closed, and the
// peer redials.
func listenClusterPort(co *config.ClusterOptions, log *slog.Logger) (*mux.Mux, error) {
	ln, err := net.Listen("tcp", co.Addr())
	if err != nil {
		return nil, fmt.Errorf("cluster listen %s: %w", co.Addr(), err)
	}
	tlsConf, err := co.TLSConfig()
	if err != nil {
		ln.Close()
		return nil, err
	}
	var t *mux.TLS
	if tlsConf != nil {
		t = &mux.TLS{Config: tlsConf, Timeout: co.TLS.Timeout}
		log.Info("cluster port speaks mutual TLS", "addr", co.Addr())
	} else if co.Secret == "" {
		log.Warn("the cluster port admits any peer that reaches it: give every node the same " + clusterSecretEnv +
			" (or cluster { authorization { user, password } } or cluster { tls { … } })")
	}
	return mux.New(ln, log, []byte(co.Secret), t), nil
}

// clusterOptions applies --node-id, --cluster-addr, --peers and
// --cluster-name over the config file's server_name and cluster block.
func (f *dataplaneFlags) clusterOptions(opts *config.Options) error {
	if f.nodeID != "" {
		opts.ServerName = f.nodeID
	}
	if f.clusterAddr == "" && (f.set["peers"] || f.set["cluster-name"]) && opts.Cluster == nil {
		return errors.New("--peers and --cluster-name need --cluster-addr")
	}
	if f.clusterAddr != "" || f.set["peers"] || f.set["cluster-name"] {
		if opts.Cluster == nil {
			opts.Cluster = &config.ClusterOptions{Name: config.DefaultClusterName}
		}
	}
	if f.clusterAddr != "" {
		host, port, err := splitHostPort(f.clusterAddr)
		if err != nil {
			return fmt.Errorf("--cluster-addr: %w", err)
		}
		opts.Cluster.Host, opts.Cluster.Port = host, port
	}
	if f.set["peers"] {
		peers, err := config.ParsePeers(f.peers)
		if err != nil {
			return fmt.Errorf("--peers: %w", err)
		}
		opts.Cluster.Peers = peers
	}
	if f.raftMultiplier < 1 || f.raftMultiplier > 10 {
		return fmt.Errorf("--raft-multiplier: %d is not between 1 and 10", f.raftMultiplier)
	}
	if f.digestInterval != 0 && f.digestInterval < time.Second {
		return fmt.Errorf("--digest-interval: %v is under a second (0 turns the check off)", f.digestInterval)
	}
	if opts.Cluster != nil {
		opts.Cluster.RaftMultiplier = f.raftMultiplier
		opts.Cluster.DigestInterval = f.digestInterval
	}
	if f.set["cluster-name"] {
		opts.Cluster.Name = f.clusterName
	}
	if v := os.Getenv(clusterSecretEnv); v != "" && opts.Cluster != nil {
		opts.Cluster.Secret = v
	}
	return nil
}

// clusterSecretEnv names the environment variable holding the cluster
// secret (an environment variable, not a flag: flags show in ps).
const clusterSecretEnv = "CONTRAIL_CLUSTER_SECRET"

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// flagExit is the exit code for a flag parsing error: 0 for -h, which
// printed the usage, 2 otherwise (the flag package printed why).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// newLogger is a command's structured logger at --log-level.
func newLogger(level string, stderr io.Writer) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})), nil
}

func parseLevel(s string) (slog.Level, error) {
	if s == "trace" {
		return server.LevelTrace, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: %w", err)
	}
	return l, nil
}

func runDataplane(args []string, stdout, stderr io.Writer) int {
	f, err := parseDataplaneFlags(args, stderr)
	if err != nil {
		return flagExit(err)
	}
	opts, err := f.options()
	if err != nil {
		fmt.Fprintf(stderr, "contrail dataplane: %v\n", err)
		return 2
	}
	log, logFile, err := dataplaneLogger(f.logLevel, f.set["log-level"], opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "contrail dataplane: %v\n", err)
		return 2
	}
	defer logFile.Close()
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		fmt.Fprintf(stderr, "contrail dataplane: data dir: %v\n", err)
		return 1
	}
	if f.pprofAddr != "" {
		if err := servePprof(f.pprofAddr, log); err != nil {
			fmt.Fprintf(stderr, "contrail dataplane: --pprof-addr: %v\n", err)
			return 1
		}
	}
	defer gcfloor.Start(gcfloor.DefaultFloor).Stop()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serveDataplane(ctx, opts, f.dataDir, log); err != nil {
		log.Error("data plane stopped", "err", err)
		return 1
	}
	return 0
}

// serveDataplane runs a node until ctx ends, then shuts it down gracefully.
func serveDataplane(ctx context.Context, opts *config.Options, dataDir string, log *slog.Logger) error {
	srv, err := server.New(opts, log)
	if err != nil {
		return err
	}
	var res *resolver.Resolver
	if opts.Operator != "" {
		if res, err = enableOperatorMode(srv, opts, dataDir, log); err != nil {
			return err
		}
	}
	var cport *mux.Mux
	if opts.Cluster != nil {
		if cport, err = listenClusterPort(opts.Cluster, log); err != nil {
			return err
		}
		defer cport.Close()
	}
	js, err := startJetStream(opts, dataDir, srv, log)
	if err != nil {
		return err
	}
	defer js.close()
	if js.engine != nil && clustered(opts) {
		node, err := startRaft(opts, cport, js.file, js.engine, log)
		if err != nil {
			return err
		}
		// Before the engine closes (deferred above, so run first): the
		// node hands its leaderships away while the engine still serves.
		defer stopRaft(node, log)
		if sys := srv.SystemAccount(); sys != nil {
			stopSys, err := js.engine.ServeSystem(sys)
			if err != nil {
				return err
			}
			defer stopSys()
		}
	}
	mon, err := startSystemServices(srv, js, log)
	if err != nil {
		return err
	}
	if res != nil {
		go loadStoredAccounts(srv, res, log)
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	if cport != nil {
		// After Listen: the route INFO carries the client URL.
		if err := srv.StartCluster(cport); err != nil {
			srv.Shutdown(context.Background())
			return err
		}
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve() }()
	if opts.HTTPPort != 0 {
		host := opts.HTTPHost
		if host == "" {
			host = opts.Host
		}
		addr := net.JoinHostPort(host, strconv.Itoa(max(opts.HTTPPort, 0)))
		if err := mon.Listen(addr); err != nil {
			srv.Shutdown(context.Background())
			return err
		}
		go func() { errc <- mon.Serve() }()
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-errc:
		if !errors.Is(err, server.ErrServerClosed) && !errors.Is(err, monitor.ErrClosed) {
			log.Error("serve failed", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mon.Close()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// jetStream is a node's JetStream with the stores it owns.
type jetStream struct {
	engine    *jetstream.Engine
	file, mem *store.Store
	log       *slog.Logger
}

// startJetStream opens the stores and enables JetStream for the global
// account, unless the config turns JetStream off. The file store lives
// under the data dir (or jetstream.store_dir).
func startJetStream(opts *config.Options, dataDir string, srv *server.Server, log *slog.Logger) (*jetStream, error) {
	js := &jetStream{log: log}
	var loadAcc func(string)
	if srv.InOperatorMode() && clustered(opts) {
		loadAcc = loadAccount(srv, log)
	}
	jsOpts := opts.JetStream
	if jsOpts != nil && !jsOpts.Enabled {
		log.Info("jetstream disabled by configuration")
		return js, nil
	}
	if jsOpts == nil {
		jsOpts = &config.JetStreamOptions{Enabled: true}
	}
	dir := filepath.Join(dataDir, "jetstream")
	if jsOpts.StoreDir != "" {
		dir = jsOpts.StoreDir
	}
	so := store.Options{Dir: dir, Logger: log.With("component", "store"), Compress: jsOpts.StoreCompression == "snappy"}
	if clustered(opts) {
		// A clustered node writes each replicated message twice, as its
		// raft log entry and as the state the entry applies. Memtables
		// twice the size last as long as a single node's, so most log
		// entries meet the range deletion that truncates the log (after a
		// snapshot) in L0 instead of after being compacted into the
		// levels below: on three nodes, two thirds less compaction.
		so.MemTableSize = 2 * store.DefaultMemTableSize
	}
	if t := jsOpts.Tier; t != nil && t.LocalBytes > 0 {
		// Bodies tiering replaced stay in the WAL until their memtable
		// flushes: memtables sized to the local budget keep the data
		// directory near it (below 4 MiB, flushes would stall writes).
		so.MemTableSize = uint64(min(max(t.LocalBytes, 4<<20), store.DefaultMemTableSize))
		// Old WALs kept for reuse would hold up to three memtables' worth
		// of nothing: more than a small budget.
		so.NoWALRecycling = true
	}
	file, err := store.Open(so)
	if err != nil {
		return nil, fmt.Errorf("jetstream store %s: %w", dir, err)
	}
	js.file, js.mem = file, store.NewMem()
	maxMem, maxStore := jsOpts.MaxMemory, jsOpts.MaxStore
	if maxMem <= 0 {
		maxMem = defaultMaxMemory()
	}
	if maxStore <= 0 {
		maxStore = defaultMaxStore(dir)
	}
	node := srv.Options().ServerName
	if jsOpts.Tier != nil && node == "" {
		node, err = tierNodeName(dir)
	}
	var tierOpts jetstream.TierOptions
	if err == nil {
		tierOpts, err = openTier(jsOpts.Tier, node, log.With("component", "tier"))
	}
	if err != nil {
		js.close()
		return nil, fmt.Errorf("jetstream tier: %w", err)
	}
	start := time.Now()
	var sync time.Duration
	if !jsOpts.SyncAlways {
		sync = jsOpts.SyncInterval
	}
	js.engine, err = jetstream.New(jetstream.Options{
		Store: file, Memory: js.mem, SyncInterval: sync, StoreDir: dir,
		MaxFileStore: maxStore, MaxMemoryStore: maxMem,
		MaxBufferedMsgs: jsOpts.MaxBufferedMsgs, MaxBufferedSize: jsOpts.MaxBufferedSize,
		NodeMaxBufferedMsgs: jsOpts.NodeMaxBufferedMsgs, NodeMaxBufferedSize: jsOpts.NodeMaxBufferedSize,
		Domain: jsOpts.Domain, ServerVersion: server.Version, ServerName: srv.Name(),
		Log: log.With("component", "jetstream"), Clustered: clustered(opts), LoadAccount: loadAcc,
		DigestInterval: digestInterval(opts),
		Tier:           tierOpts,
		Batch: jetstream.BatchLimits{MaxInflightPerStream: int(jsOpts.Batch.MaxInflightPerStream),
			MaxInflightTotal: int(jsOpts.Batch.MaxInflightTotal), MaxMsgs: int(jsOpts.Batch.MaxMsgs),
			Timeout: jsOpts.Batch.Timeout},
	})
	if err != nil {
		js.close()
		return nil, err
	}
	if srv.HasAccounts() { // operator mode, or the accounts block
		hooks := &accountHooks{js: js.engine, log: log}
		if srv.InOperatorMode() && clustered(opts) && srv.SystemAccount() != nil {
			if hooks.spread, err = startAccountSpread(srv, hooks, log.With("component", "accounts")); err != nil {
				js.close()
				return nil, err
			}
		}
		srv.SetAccountHooks(hooks)
	} else if err := js.engine.EnableAccount(srv.GlobalAccount()); err != nil {
		js.close()
		return nil, err
	}
	srv.EnableJetStream(jsOpts.Domain)
	log.Info("jetstream ready", "store_dir", dir, "recovered_in", time.Since(start).Round(time.Millisecond),
		"sync_interval", sync)
	return js, nil
}

func (js *jetStream) close() {
	if js.engine != nil {
		js.engine.Close()
	}
	for _, st := range []*store.Store{js.file, js.mem} {
		if st != nil {
			if err := st.Close(); err != nil {
				js.log.Error("closing jetstream store", "err", err)
			}
		}
	}
}

// digestInterval is the digest check's period on a cluster; 0 alone.
func digestInterval(opts *config.Options) time.Duration {
	if !clustered(opts) {
		return 0
	}
	return opts.Cluster.DigestInterval
}
