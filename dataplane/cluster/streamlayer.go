package cluster

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster/mux"
)

// On a raft connection the dialer follows the mux preface with a hello:
// one length byte and the raft server id it wants to reach.

// serverAddr is a raft server address. Contrail's raft addresses are
// the server ids themselves ("n1", or "n1#<incarnation>"): the stream
// layer finds the node's cluster address from the name part, so a node
// may change its address between runs, and it names the server it wants
// on every connection, so a node that has become a new incarnation turns
// away traffic meant for the old one (raft's messages name their sender,
// never their recipient).
type serverAddr string

func (a serverAddr) Network() string { return "contrail" }
func (a serverAddr) String() string  { return string(a) }

// helloTimeout bounds how long a dialer may take to name the server it wants.
const helloTimeout = 5 * time.Second

// streamLayer is one raft group's channel on the cluster port. It keeps
// every connection it hands out so that Close cuts them all, as a dying
// process would: raft's NetworkTransport closes neither the connections
// it accepted nor its pooled ones.
type streamLayer struct {
	ln    *mux.Listener
	group uint16
	self  raft.ServerID
	addrs func(name string) (string, bool)
	conns chan net.Conn
	done  chan struct{}
	// misdirected counts connections turned away because they asked
	// for another server id (an older incarnation of this node).
	misdirected atomic.Uint64

	mu struct {
		sync.Mutex
		conns  map[net.Conn]struct{} // guarded by mu
		closed bool                  // guarded by mu
	}
}

func newStreamLayer(ln *mux.Listener, group uint16, self raft.ServerID, addrs func(string) (string, bool)) *streamLayer {
	s := &streamLayer{ln: ln, group: group, self: self, addrs: addrs, conns: make(chan net.Conn), done: make(chan struct{})}
	s.mu.conns = map[net.Conn]struct{}{}
	go s.acceptLoop()
	return s
}

// track records c, or closes it if the layer is closed already.
func (s *streamLayer) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		c.Close()
		return nil, mux.ErrClosed
	}
	tc := &trackedConn{Conn: c, s: s}
	s.mu.conns[tc] = struct{}{}
	return tc, nil
}

func (s *streamLayer) forget(c net.Conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
}

func (s *streamLayer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.greet(c)
	}
}

// greet reads the server id the dialer wants and hands c to raft if it is
// this one.
func (s *streamLayer) greet(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		c.Close()
		return
	}
	want := make([]byte, n[0])
	if _, err := io.ReadFull(c, want); err != nil {
		c.Close()
		return
	}
	if raft.ServerID(want) != s.self {
		s.misdirected.Add(1)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	tc, err := s.track(c)
	if err != nil {
		return
	}
	select {
	case s.conns <- tc:
	case <-s.done:
		tc.Close()
	}
}

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, mux.ErrClosed
	}
}

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, ok := s.addrs(nodeName(raft.ServerID(address)))
	if !ok {
		return nil, fmt.Errorf("group %d: no cluster address for %q", s.group, address)
	}
	if len(address) > 255 {
		return nil, fmt.Errorf("group %d: server id %q too long", s.group, address)
	}
	c, err := s.ln.Dial(addr, mux.KindRaft, s.group, timeout)
	if err != nil {
		return nil, err
	}
	hello := append([]byte{byte(len(address))}, address...)
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("group %d: hello to %s: %w", s.group, address, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return s.track(c)
}

// Close stops the channel and closes every connection it handed out.
func (s *streamLayer) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	conns := s.mu.conns
	s.mu.conns = map[net.Conn]struct{}{}
	s.mu.Unlock()
	close(s.done)
	for c := range conns {
		c.(*trackedConn).Conn.Close()
	}
	return s.ln.Close()
}

func (s *streamLayer) Addr() net.Addr { return serverAddr(s.self) }

type trackedConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.s.forget(c) })
	return c.Conn.Close()
}
