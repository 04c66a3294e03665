package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
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
			return Peer{}, fmt.Errorf("route %q: %w: route credentials", s, ErrUnsupported)
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
}

// clusterUnsupported are the cluster block's nats-server keys Contrail
// does not implement.
var clusterUnsupported = setOf(
	"authorization", "tls", "advertise", "cluster_advertise", "no_advertise",
	"connect_retries", "connect_backoff", "pool_size", "accounts", "compression",
	"ping_interval", "ping_max", "pinned_accounts",
)

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
	var errs []error
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
