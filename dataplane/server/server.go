// Package server is a data-plane node's client side: it accepts NATS client
// connections, speaks the client protocol, and routes messages through each
// account's subject index.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config"
)

// Version is the nats-server version announced in INFO. Clients switch
// behaviour on it, so it names the release whose client-visible features
// Contrail implements: 2.12 brought counters, atomic batch publish and
// message schedules (API level 2). 2.14's fast batches, flow-control ack
// policy, consumer reset and sourcing through a durable consumer are here
// too, but not the way its mirrors and sources read an interest or
// work-queue origin (through a durable flow_control consumer the origin
// makes of their own), so 2.14 (level 4) is not announced.
const Version = "2.12.0"

// ErrServerClosed is returned by Start after Shutdown.
var ErrServerClosed = errors.New("server closed")

// Server is one data-plane node's client listener and router.
type Server struct {
	opts   *config.Options
	log    *slog.Logger
	tls    *tls.Config
	id     string
	name   string
	start  time.Time
	global *Account

	// authRequired: clients must authenticate (operator mode, or nkey
	// users in open mode); set before Serve and read-only after.
	authRequired bool
	// static is the users of the config file (staticauth.go), or nil.
	static *staticAuth

	// Operator mode; all set before Serve and read-only after.
	op    *OperatorMode
	sys   *Account
	hooks AccountHooks
	accts accounts
	// sysSeq numbers system replies and events.
	sysSeq atomic.Uint64
	// sysst is the state of the system account's services (sysstate.go).
	sysst *sysState

	nextCID atomic.Uint64
	// cluster is the route layer (cluster*.go); nil when the node runs
	// alone. Set in New, read-only after.
	cluster *cluster
	// jetstream holds the domain once JetStream serves; INFO announces it.
	jetstream atomic.Pointer[string]
	stats     counters

	mu struct {
		sync.Mutex
		listener net.Listener       // guarded by mu
		clients  map[uint64]*client // guarded by mu
		closing  bool               // guarded by mu
	}
	done chan struct{} // closed by Shutdown
	wg   sync.WaitGroup
}

// counters are the server-wide message and connection totals.
type counters struct {
	inMsgs, outMsgs, inBytes, outBytes atomic.Uint64
	slowConsumers, totalConns          atomic.Uint64
	staleConns                         atomic.Uint64
	slowRoutes                         atomic.Uint64
}

// New checks opts and builds a server; Start makes it listen.
func New(opts *config.Options, log *slog.Logger) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateServer()
	if err != nil {
		return nil, fmt.Errorf("server identity: %w", err)
	}
	id, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("server identity: %w", err)
	}
	s := &Server{
		opts:  opts,
		log:   log,
		id:    id,
		name:  opts.ServerName,
		start: time.Now(),
		done:  make(chan struct{}),
	}
	s.global = newAccount(s, "$G")
	s.sysst = newSysState(s)
	if s.name == "" {
		s.name = id
	}
	if opts.TLS != nil {
		if s.tls, err = opts.TLSConfig(); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
	}
	s.mu.clients = make(map[uint64]*client)
	if opts.Cluster != nil {
		s.cluster = newCluster(s, opts.Cluster)
	}
	if err := s.loadStaticAuth(opts); err != nil {
		return nil, err
	}
	return s, nil
}

// ID is the server's public identity, as announced in INFO.
func (s *Server) ID() string { return s.id }

// Name is the configured server name, or the ID.
func (s *Server) Name() string { return s.name }

// Options returns the options the server runs with; callers must not
// modify them.
func (s *Server) Options() *config.Options { return s.opts }

// Listen binds the client port. It is separate from Serve so callers learn
// the bound address (port 0 picks a free one) before serving.
func (s *Server) Listen() error {
	addr := net.JoinHostPort(s.opts.Host, strconv.Itoa(max(s.opts.Port, 0))) // -1: any free port
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		ln.Close()
		return ErrServerClosed
	}
	s.mu.listener = ln
	return nil
}

// Addr is the bound client address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.listener == nil {
		return nil
	}
	return s.mu.listener.Addr()
}

// Serve accepts clients until Shutdown; it returns ErrServerClosed then.
func (s *Server) Serve() error {
	s.mu.Lock()
	ln := s.mu.listener
	s.mu.Unlock()
	if ln == nil {
		return errors.New("serve: not listening")
	}
	s.log.Info("listening for client connections", "addr", ln.Addr().String(),
		"server_id", s.id, "version", Version, "tls", s.tls != nil)
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return ErrServerClosed
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed, backing off", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(conn)
		}()
	}
}

// Shutdown stops accepting, flushes and closes every client, and waits for
// their goroutines, or until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		return nil
	}
	s.mu.closing = true
	close(s.done)
	ln := s.mu.listener
	clients := make([]*client, 0, len(s.mu.clients))
	for _, c := range s.mu.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	if s.cluster != nil {
		s.cluster.close()
	}
	for _, c := range clients {
		c.close(reasonServerShutdown, true)
	}
	waited := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown: %w", ctx.Err())
	}
}

// register adds c to the client table unless the server is closing or
// full; it reports the -ERR text to send when refused.
func (s *Server) register(c *client) (refusal string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		return "", false
	}
	if len(s.mu.clients) >= s.opts.MaxConnections {
		return protocolErrMaxConns, false
	}
	s.mu.clients[c.cid] = c
	s.stats.totalConns.Add(1)
	return "", true
}

func (s *Server) unregister(c *client) {
	s.mu.Lock()
	delete(s.mu.clients, c.cid)
	s.mu.Unlock()
}

// NumClients is the number of open client connections.
func (s *Server) NumClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.clients)
}

func (s *Server) clientList() []*client {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*client, 0, len(s.mu.clients))
	for _, c := range s.mu.clients {
		list = append(list, c)
	}
	return list
}

// EnableJetStream makes INFO announce JetStream (in domain, if not empty):
// clients check it before using the JetStream API.
func (s *Server) EnableJetStream(domain string) { s.jetstream.Store(&domain) }
