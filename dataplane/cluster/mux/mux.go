// Package mux shares a node's one cluster port between everything nodes
// say to each other: routes (client interest and messages) and the
// traffic of every raft group. The dialer opens each connection with a
// three-byte preface, a kind and a 16-bit channel (the raft group; 0 for
// routes), which the listener reads before handing the connection to
// whoever listens on that channel.
//
// With a cluster secret, both ends prove after the preface that they
// hold it (see handshake.go) before anything else is read or written:
// the port then admits only the cluster's own nodes.
//
// With TLS, every connection is mutual TLS before its first byte: the
// preface, the handshake and everything after travel encrypted, and a
// peer without a certificate the configuration trusts never gets as far
// as the preface.
package mux

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Kind says what a connection on the cluster port carries.
type Kind byte

// The kinds of connection. The values are on the wire: never renumber.
const (
	KindRoute Kind = 'R'
	KindRaft  Kind = 'F'
)

const KindControl Kind = 'C' // KindControl carries a node's questions to its peers (state, join, transfer).

// prefaceTimeout bounds how long an accepted connection may take to send
// its preface: the cluster port is reachable by whoever can reach the
// node, and a silent connection must not hold an accept slot.
const prefaceTimeout = 5 * time.Second

// TLS is the cluster port's TLS.
type TLS struct {
	// Config serves both ends: accepting, and (cloned, with the dialed
	// host as ServerName) dialing.
	Config *tls.Config
	// Timeout bounds an accepted connection's handshake; 0 leaves it to
	// the preface timeout.
	Timeout time.Duration
}

// ErrClosed is what Accept returns once the mux or the channel is closed.
var ErrClosed = errors.New("mux: closed")

// channel identifies one listener on the port.
type channel struct {
	kind Kind
	id   uint16
}

// Mux accepts connections on the cluster port and sorts them by preface.
type Mux struct {
	ln     net.Listener
	log    *slog.Logger
	secret []byte    // empty: the port is open to whoever reaches it
	tls    *TLS      // nil: plain TCP
	warn   warnLimit // refused handshakes, logged a few at a time
	mu     struct {
		sync.Mutex
		chans  map[channel]*Listener // guarded by mu
		closed bool                  // guarded by mu
	}
	done chan struct{}
}

// New starts sorting the connections ln accepts. Connections for a
// channel nobody listens on are closed. With a non-empty secret, only
// connections that prove they hold it are sorted, and Dial proves it.
// With t, accepted connections must complete a TLS handshake that
// satisfies t.Config (its ClientAuth decides whether the peer needs a
// certificate) and Dial speaks TLS with it, checking the peer's
// certificate for the dialed host.
func New(ln net.Listener, log *slog.Logger, secret []byte, t *TLS) *Mux {
	m := &Mux{ln: ln, log: log, secret: secret, tls: t, done: make(chan struct{})}
	m.mu.chans = map[channel]*Listener{}
	go m.acceptLoop()
	return m
}

// Addr is the cluster port's address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Listen returns the listener for kind and id (id is the raft group;
// routes use 0). Listening twice on one channel is an error.
func (m *Mux) Listen(kind Kind, id uint16) (*Listener, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	ch := channel{kind, id}
	if _, ok := m.mu.chans[ch]; ok {
		return nil, fmt.Errorf("mux: channel %c/%d already has a listener", kind, id)
	}
	l := &Listener{m: m, ch: ch, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.mu.chans[ch] = l
	return l, nil
}

// Close stops accepting and closes every channel's listener.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	chans := m.mu.chans
	m.mu.chans = nil
	m.mu.Unlock()
	for _, l := range chans {
		l.closeOnce.Do(func() { close(l.closed) })
	}
	err := m.ln.Close()
	<-m.done
	return err
}

func (m *Mux) acceptLoop() {
	defer close(m.done)
	for {
		c, err := m.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go m.sort(c)
	}
}

// sort reads c's preface and hands c to its channel's listener.
func (m *Mux) sort(c net.Conn) {
	var p [3]byte
	_ = c.SetDeadline(time.Now().Add(prefaceTimeout))
	if m.tls != nil {
		if m.tls.Timeout > 0 {
			_ = c.SetDeadline(time.Now().Add(m.tls.Timeout))
		}
		tc := tls.Server(c, m.tls.Config)
		if err := tc.Handshake(); err != nil {
			m.warn.log(m.log, "cluster port: refused a connection that failed the TLS handshake",
				"remote", c.RemoteAddr().String(), "err", err)
			c.Close()
			return
		}
		c = tc
		_ = c.SetDeadline(time.Now().Add(prefaceTimeout))
	}
	if _, err := io.ReadFull(c, p[:]); err != nil {
		c.Close()
		return
	}
	if len(m.secret) > 0 {
		if err := acceptHandshake(c, m.secret, p); err != nil {
			m.warn.log(m.log, "cluster port: refused a connection that does not hold the cluster secret",
				"remote", c.RemoteAddr().String(), "err", err)
			c.Close()
			return
		}
	}
	_ = c.SetDeadline(time.Time{})
	ch := channel{Kind(p[0]), binary.BigEndian.Uint16(p[1:])}
	m.mu.Lock()
	l := m.mu.chans[ch]
	m.mu.Unlock()
	if l == nil {
		m.log.Debug("cluster port: connection for no listener", "kind", string(rune(p[0])), "id", ch.id, "remote", c.RemoteAddr().String())
		c.Close()
		return
	}
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

// Listener is one channel of the cluster port: a net.Listener whose
// connections have had their preface read.
type Listener struct {
	m         *Mux
	ch        channel
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// Accept waits for the channel's next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, ErrClosed
	}
}

// Close stops the channel; connections for it are closed from then on.
func (l *Listener) Close() error {
	l.m.mu.Lock()
	if l.m.mu.chans[l.ch] == l {
		delete(l.m.mu.chans, l.ch)
	}
	l.m.mu.Unlock()
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// Addr is the cluster port's address: every channel shares it.
func (l *Listener) Addr() net.Addr { return l.m.ln.Addr() }

// Dial connects to the cluster port at addr and opens channel kind/id,
// proving the mux's secret if it has one.
func (m *Mux) Dial(addr string, kind Kind, id uint16, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	p := [3]byte{byte(kind)}
	binary.BigEndian.PutUint16(p[1:], id)
	_ = c.SetDeadline(time.Now().Add(timeout))
	if m.tls != nil {
		cfg := m.tls.Config.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster port %s: TLS: %w", addr, err)
		}
		c = tc
	}
	if len(m.secret) > 0 {
		err = dialHandshake(c, m.secret, p)
	} else {
		_, err = c.Write(p[:])
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cluster port %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// Dial is the mux's Dial, for whoever holds only a channel.
func (l *Listener) Dial(addr string, kind Kind, id uint16, timeout time.Duration) (net.Conn, error) {
	return l.m.Dial(addr, kind, id, timeout)
}
