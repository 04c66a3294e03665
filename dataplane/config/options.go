// Package config turns a nats-server style configuration file into the
// typed options the Contrail data plane runs with.
//
// Decoding is strict where nats-server is lenient or silent: an unknown key
// is an error naming its line (a typo should not quietly fall back to a
// default), and a nats-server feature Contrail lacks is reported as such
// rather than ignored. All problems are collected and returned together so
// one run shows everything that needs fixing.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// Defaults, matching nats-server so a file written for it behaves the same.
const (
	DefaultHost           = "0.0.0.0"
	DefaultPort           = 4222
	DefaultMaxPayload     = 1 << 20 // 1 MiB
	DefaultMaxControlLine = 4096
	DefaultMaxConnections = 64 * 1024
	DefaultMaxPending     = 64 << 20 // 64 MiB
	DefaultPingInterval   = 2 * time.Minute
	DefaultPingMax        = 2
	DefaultWriteDeadline  = 10 * time.Second
	DefaultTLSTimeout     = 2 * time.Second
	// DefaultHandshakeFirstFallback is how long a TLS-first server waits
	// for a client's handshake before sending INFO in plain text, when
	// handshake_first is "auto".
	DefaultHandshakeFirstFallback = 50 * time.Millisecond
	// DefaultMaxAccountSubs is max_account_subscriptions' default.
	DefaultMaxAccountSubs = 1 << 16
	// MaxPayloadLimit is the largest max_payload nats-server accepts.
	MaxPayloadLimit = 64 << 20
)

// Options are the data-plane settings. Build them with Default, Parse or
// ParseFile; the zero value is not usable.
type Options struct {
	Host string
	// Port is the client port; -1 asks for a random free port, as in
	// nats-server.
	Port int
	// HTTPHost is the monitoring bind address; empty means Host.
	HTTPHost string
	// HTTPPort is the monitoring port; 0 disables monitoring.
	HTTPPort int

	MaxPayload     int32
	MaxControlLine int32
	MaxConnections int
	// MaxPending is the outbound buffer per connection, in bytes, beyond
	// which the client is cut off as a slow consumer.
	MaxPending int64
	// MaxAccountSubs bounds one account's client subscriptions on this
	// node (max_account_subscriptions; not a nats-server setting): a SUB
	// past it is refused as one past a connection's limit is. Every peer
	// holds what a node's accounts subscribe, and refuses one account's
	// interest past the same bound, so one tenant's subscriptions cost
	// the others neither a route nor unbounded memory.
	MaxAccountSubs int64
	PingInterval   time.Duration
	PingMax        int
	WriteDeadline  time.Duration

	ServerName   string
	Debug, Trace bool

	// TLS is nil when the file has no tls block.
	TLS *TLSOptions
	// AllowNonTLS offers TLS without requiring it (INFO says
	// tls_available): each client chooses by what it sends first.
	AllowNonTLS bool
	// JetStream is nil when the file does not mention JetStream.
	JetStream *JetStreamOptions

	// Operator is the operator JWT, or a file holding it; set, it turns on
	// operator mode. Resolver is "URL(<base url>)" or "MEMORY" as in
	// nats-server; ResolverPreload holds account JWTs by key.
	// SystemAccount is the system account's public key (the operator
	// JWT's system_account when empty).
	Operator        string
	Resolver        string
	ResolverPreload map[string]string
	SystemAccount   string
	// DirResolver is the `resolver { type: full, dir: … }` block: account
	// JWTs live in a directory and arrive by claim updates only.
	DirResolver *DirResolver

	// Authorization is the open-mode authorization block, or nil.
	Authorization *Authorization
	// Accounts are the static accounts of the accounts block; users of
	// Authorization belong to the global account ($G) beside them.
	Accounts []*Account
	// NoAuthUser is the user a client giving no credentials connects as.
	NoAuthUser string

	// LogTime stamps log lines with the time (default true); LogTimeUTC
	// in UTC. LogFile, when set, receives the log instead of stderr.
	LogTime, LogTimeUTC bool
	LogFile             string

	// Cluster is nil when the node runs alone.
	Cluster *ClusterOptions
}

// TLSOptions is the client-facing TLS setup. File paths are relative to
// the working directory, as in nats-server.
type TLSOptions struct {
	CertFile, KeyFile, CAFile string
	// Verify requires and checks client certificates.
	Verify bool
	// VerifyAndMap also requires a client certificate and makes its
	// identity (an email or DNS SAN, or the subject DN) the user name.
	VerifyAndMap bool
	// Timeout bounds the TLS handshake.
	Timeout time.Duration
	// HandshakeFirst makes the server expect a TLS handshake before it
	// sends INFO. A non-zero HandshakeFirstFallback makes that optional:
	// after waiting that long the server falls back to INFO first.
	HandshakeFirst         bool
	HandshakeFirstFallback time.Duration
}

// JetStreamOptions configures persistence.
type JetStreamOptions struct {
	Enabled  bool
	StoreDir string
	// MaxMemory and MaxStore are byte limits; 0 lets the server size them
	// from the machine, as nats-server does.
	MaxMemory, MaxStore int64
	// SyncInterval > 0 opts into lazy fsync (acknowledged writes within
	// the interval can be lost to a power failure). Zero, the default,
	// fsyncs before every acknowledgement, sharing fsyncs between
	// concurrent publishes.
	SyncInterval time.Duration
	// SyncAlways flushes every write (`sync_interval: always`).
	SyncAlways bool
	Domain     string
	// MaxBufferedMsgs and MaxBufferedSize bound what publishes to one
	// stream may hold while they wait for the apply path
	// (`max_buffered_msgs`, `max_buffered_size`, as in nats-server);
	// NodeMaxBufferedMsgs and NodeMaxBufferedSize bound it for all the
	// node's streams (`node_max_buffered_msgs`, `node_max_buffered_size`).
	// 0 takes the defaults.
	MaxBufferedMsgs, MaxBufferedSize         int64
	NodeMaxBufferedMsgs, NodeMaxBufferedSize int64
	// StoreCompression is how the file store compresses its tables
	// (`store_compression`, Contrail only): "none" (or empty, the
	// default, as nats-server keeps messages as sent) or "snappy", which
	// trades CPU on every write and compaction for disk.
	StoreCompression string
	// Tier is tiered storage (`tier { ... }`); nil when not configured.
	Tier *TierOptions
	// Batch bounds atomic batch publishes, as nats-server's `limits {
	// batch { max_inflight_per_stream, max_inflight_total, max_msgs,
	// timeout } }`; zero fields take nats-server's defaults.
	Batch BatchLimits
}

// BatchLimits are the atomic batch bounds of the jetstream block.
type BatchLimits struct {
	MaxInflightPerStream, MaxInflightTotal, MaxMsgs int64
	Timeout                                         time.Duration
}

// TierOptions configure tiered storage of file streams, as the
// --tier-* flags do (see `contrail dataplane -h`).
type TierOptions struct {
	// URL is s3://bucket/prefix or file:///dir; Endpoint an
	// S3-compatible server's URL (path-style addressing).
	URL, Endpoint string
	// SegmentBytes is the target segment size; LocalBytes the node's
	// budget for local message bytes; CacheBytes the cold read cache.
	SegmentBytes, LocalBytes, CacheBytes int64
	// ReadRate caps cold reads in bytes per second (0: no cap);
	// ReadTimeout bounds one cold read.
	ReadRate    int64
	ReadTimeout time.Duration
}

var (
	// ErrUnknownKey marks a key that neither Contrail nor nats-server
	// knows, usually a typo.
	ErrUnknownKey = errors.New("unknown configuration key")
	// ErrUnsupported marks a nats-server option Contrail does not
	// implement, so callers can tell "fix your file" from "not yet".
	ErrUnsupported = errors.New("option not supported by Contrail")
)

// FieldError is one problem in a configuration file. Error renders it as
// `line 7: unknown key "lsiten"`, naming the file too when the line is in
// an included file.
type FieldError struct {
	// File is set only when the problem is in an included file.
	File string
	Line int
	Msg  string
	// Err is ErrUnknownKey, ErrUnsupported or nil.
	Err error
}

// Error renders the problem with its line.
func (e *FieldError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s: line %d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Unwrap lets errors.Is find ErrUnknownKey and ErrUnsupported.
func (e *FieldError) Unwrap() error { return e.Err }

// Default returns nats-server's defaults, the base a file is applied on.
func Default() *Options {
	return &Options{
		Host:           DefaultHost,
		Port:           DefaultPort,
		MaxPayload:     DefaultMaxPayload,
		MaxControlLine: DefaultMaxControlLine,
		MaxConnections: DefaultMaxConnections,
		MaxPending:     DefaultMaxPending,
		MaxAccountSubs: DefaultMaxAccountSubs,
		PingInterval:   DefaultPingInterval,
		PingMax:        DefaultPingMax,
		WriteDeadline:  DefaultWriteDeadline,
		LogTime:        true,
	}
}

// ParseFile reads a configuration file and applies it over Default. It does
// not call Validate, so command-line overrides can be applied first.
func ParseFile(path string) (*Options, error) {
	m, err := conf.ParseFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return decode(m, path)
}

// Parse is ParseFile for configuration text already in memory; name is used
// in error positions and to resolve relative includes.
func Parse(data []byte, name string) (*Options, error) {
	return parseWith(&conf.Parser{}, data, name)
}

func parseWith(p *conf.Parser, data []byte, name string) (*Options, error) {
	m, err := p.Parse(data, name)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return decode(m, name)
}

func decode(m *conf.Map, file string) (*Options, error) {
	d := &decoder{file: file}
	o := Default()
	decodeMap(d, o, "", m, topFields, topUnsupported)
	d.checkAuth(o)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return o, nil
}

// DirResolver is nats-server's full directory resolver: the node keeps
// every account JWT pushed to it in Dir and fetches from nowhere else.
type DirResolver struct {
	Type string
	Dir  string
	// AllowDelete lets operator-signed $SYS.REQ.CLAIMS.DELETE requests
	// remove accounts; HardDelete removes their files rather than
	// renaming them.
	AllowDelete, HardDelete bool
	// Limit bounds how many account JWTs the directory holds (0: no bound).
	Limit    int64
	Interval time.Duration
	Timeout  time.Duration
}
