package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// DefaultClusterName is the cluster name when none is given.
const DefaultClusterName = "contrail"

// ClusterOptions are the settings of a node that is one of several: the
// cluster port (routes and raft share it) and the initial members.
type ClusterOptions struct {
	// Name is the cluster's name; a node refuses routes from another.
	Name string
	// Host and Port are the cluster port's bind address (--cluster-addr,
	// or the block's listen/host/port). Port 0 picks a free port.
	Host string
	Port int
	// Peers are the initial members (--peers, or the block's routes).
	// With --peers each has an ID and this node is one of them; a route
	// given only as a URL has an empty ID until its INFO names it.
	Peers []Peer
	// RaftMultiplier scales the raft groups' timeouts (--raft-multiplier;
	// 0 means 1).
	RaftMultiplier int
	// DigestInterval is how often replicas compare their copies
	// (--digest-interval; 0 never).
	DigestInterval time.Duration
	// Secret is the cluster secret every node proves it holds before the
	// cluster port lets it in (CONTRAIL_CLUSTER_SECRET, or the block's
	// authorization user and password); empty leaves the port open to
	// whoever can reach it. Never logged.
	Secret string
	// TLS encrypts the cluster port (the block's tls): every connection
	// is mutual TLS, each node presenting its certificate and checking
	// its peer's against ca_file, as nats-server's routes do. Nil: the
	// port speaks plain TCP.
	TLS *TLSOptions
}

// LogValue keeps the secret out of any log line that prints the options.
func (c ClusterOptions) LogValue() slog.Value {
	c.Secret = redact(c.Secret)
	c.Peers = slices.Clone(c.Peers)
	for i := range c.Peers {
		c.Peers[i].creds = redact(c.Peers[i].creds)
	}
	type plain ClusterOptions // no LogValue: no recursion
	return slog.AnyValue(plain(c))
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// routeAuth is what the block's authorization and its routes' URLs
// said, checked against each other once the block is read.
type routeAuth struct {
	user, password string
	set            bool
}

// DefaultDigestInterval is how often replicas compare their copies
// unless told otherwise: hashing a partition reads all of it, so the
// check is rare; divergence is a bug or rot, not an everyday event.
const DefaultDigestInterval = 5 * time.Minute

// Peer is one member of the cluster: its node id (the server name) and
// its cluster port address.
type Peer struct {
	ID   string
	Addr string

	// creds are a config file's route URL credentials (user:password):
	// they must be the cluster block's authorization (checked in
	// validate).
	creds    string
	hasCreds bool
}

// Addr is the cluster port's host:port.
func (c *ClusterOptions) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// NodeID is the node's id in the cluster: the server name.
func (o *Options) NodeID() string { return o.ServerName }

// ParsePeers reads the --peers form `n1=host:port,n2=host:port`.
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want NAME=HOST:PORT", item)
		}
		if err := checkHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %w", id, err)
		}
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	if len(peers) == 0 {
		return nil, errors.New("no peers given")
	}
	return peers, nil
}

// ParseRoute reads one route of the config file: a nats-server URL
// (`nats-route://host:port`, also nats:// or a bare host:port), optionally
// named as `NAME=URL`.
func ParseRoute(s string) (Peer, error) {
	var p Peer
	if id, rest, ok := strings.Cut(s, "="); ok && !strings.Contains(id, "/") {
		p.ID, s = id, rest
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return Peer{}, fmt.Errorf("route %q: %w", s, err)
		}
		switch u.Scheme {
		case "nats-route", "nats", "route":
		default:
			return Peer{}, fmt.Errorf("route %q: scheme %q: want nats-route", s, u.Scheme)
		}
		if u.User != nil {
			pw, _ := u.User.Password()
			p.creds, p.hasCreds = u.User.Username()+":"+pw, true
		}
		s = u.Host
	}
	if err := checkHostPort(s); err != nil {
		return Peer{}, fmt.Errorf("route %q: %w", s, err)
	}
	p.Addr = s
	return p, nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%q: bad port %q", addr, port)
	}
	return nil
}

// clusterFields are the keys of nats-server's cluster block Contrail
// understands.
var clusterFields = map[string]field[ClusterOptions]{
	"name": stringField(func(c *ClusterOptions) *string { return &c.Name }),
	"host": stringField(func(c *ClusterOptions) *string { return &c.Host }),
	"net":  stringField(func(c *ClusterOptions) *string { return &c.Host }),
	"port": intField(func(c *ClusterOptions) *int { return &c.Port }),
	"listen": func(d *decoder, c *ClusterOptions, path string, v *conf.Value) {
		if host, port, ok := d.hostPort(path, v); ok {
			if host == "" {
				host = DefaultHost
			}
			c.Host, c.Port = host, port
		}
	},
	"routes": routesField,
	"tls": blockField(clusterTLSFields, clusterTLSUnsupported,
		func() *TLSOptions { return &TLSOptions{Timeout: DefaultTLSTimeout} },
		func(c *ClusterOptions, t *TLSOptions) { c.TLS = t }),
	"authorization": func(d *decoder, c *ClusterOptions, path string, v *conf.Value) {
		var a routeAuth
		blockField(clusterAuthFields, setOf("token", "users", "timeout"),
			func() *routeAuth { return &routeAuth{set: true} },
			func(_ *ClusterOptions, b *routeAuth) { a = *b })(d, c, path, v)
		if !a.set {
			return
		}
		if a.user == "" || a.password == "" {
			d.fail(v.Pos, nil, "%s: needs user and password (every node of the cluster holds the same pair)", path)
			return
		}
		c.Secret = a.user + ":" + a.password
	},
}

// clusterAuthFields are the keys of the cluster block's authorization.
// Contrail's cluster port admits a node that proves it holds the pair,
// without the pair crossing the wire; a single shared pair is what that
// needs, so nats-server's token, users list and timeout there are not
// supported.
var clusterAuthFields = map[string]field[routeAuth]{
	"user":     stringField(func(a *routeAuth) *string { return &a.user }),
	"password": stringField(func(a *routeAuth) *string { return &a.password }),
}

// clusterUnsupported are the cluster block's nats-server keys Contrail
// does not implement.
var clusterUnsupported = setOf(
	"advertise", "cluster_advertise", "no_advertise",
	"connect_retries", "connect_backoff", "pool_size", "accounts", "compression",
	"ping_interval", "ping_max", "pinned_accounts",
)

// clusterTLSUnsupported are the tls keys the cluster port does not take:
// the client listener's unsupported ones, and those that only mean
// something to clients (the port always verifies both ends).
var clusterTLSUnsupported = func() map[string]bool {
	s := setOf("verify_and_map", "handshake_first", "first", "immediate")
	for k := range tlsUnsupported {
		s[k] = true
	}
	return s
}()

// clusterTLSFields are the tls keys the cluster port takes.
var clusterTLSFields = func() map[string]field[TLSOptions] {
	f := map[string]field[TLSOptions]{}
	for k, v := range tlsFields {
		if !clusterTLSUnsupported[k] {
			f[k] = v
		}
	}
	return f
}()

func clusterField(d *decoder, o *Options, path string, v *conf.Value) {
	blockField(clusterFields, clusterUnsupported,
		func() *ClusterOptions { return &ClusterOptions{Name: DefaultClusterName, Host: DefaultHost} },
		func(o *Options, c *ClusterOptions) { o.Cluster = c })(d, o, path, v)
}

func routesField(d *decoder, c *ClusterOptions, path string, v *conf.Value) {
	vals := []*conf.Value{v}
	if v.Kind == conf.KindArray {
		vals = v.Array
	}
	for _, e := range vals {
		if e.Kind != conf.KindString {
			d.typeErr(path, e, "route URL")
			continue
		}
		for _, s := range strings.Split(e.Str, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			p, err := ParseRoute(s)
			if err != nil {
				var sentinel error
				if errors.Is(err, ErrUnsupported) {
					sentinel = ErrUnsupported
				}
				d.fail(e.Pos, sentinel, "%s: %v", path, err)
				continue
			}
			c.Peers = append(c.Peers, p)
		}
	}
}

// validate checks the cluster block as a whole; name is the server name.
func (c *ClusterOptions) validate(name string) []error {
	if c == nil {
		return nil
	}
	errs := c.TLS.validate("cluster.tls")
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Name == "" || strings.ContainsAny(c.Name, " \t\r\n") {
		add("cluster name: %q must be non-empty without white space", c.Name)
	}
	if c.Port < 0 || c.Port > 65535 {
		add("cluster port: %d is out of range [0, 65535]", c.Port)
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	named, self := 0, false
	for _, p := range c.Peers {
		if p.ID != "" {
			named++
			if ids[p.ID] {
				add("peers: node id %q appears twice", p.ID)
			}
			ids[p.ID] = true
			if strings.ContainsAny(p.ID, " \t\r\n") {
				add("peers: node id %q cannot contain white space", p.ID)
			}
			self = self || p.ID == name
		}
		if addrs[p.Addr] {
			add("peers: address %q appears twice", p.Addr)
		}
		if p.hasCreds && p.creds != c.Secret {
			add("route %s: its user and password must be the cluster block's authorization user and password (every node proves the one shared pair)", p.Addr)
		}
		addrs[p.Addr] = true
	}
	// Named peers are the initial members, this node among them; routes
	// given partly as bare URLs name only the others.
	if named > 0 && named == len(c.Peers) {
		switch {
		case name == "":
			add("peers name the nodes, so this node needs a name (--node-id or server_name)")
		case !self:
			add("peers: this node %q is not among them", name)
		}
	}
	return errs
}
