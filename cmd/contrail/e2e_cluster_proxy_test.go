package main

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// linkProxy stands on one directed cluster link: node from dials node to
// through it (from's --peers names the proxy for to), and it forwards the
// bytes both ways. A test cuts the link (partition), slows it (delay) and
// heals it. Routes, raft and the control channel all share the cluster
// port, so one proxy per directed pair carries everything between two
// nodes that one of them dialed.
type linkProxy struct {
	from, to int
	target   string
	ln       net.Listener

	mu struct {
		sync.Mutex
		down          bool                  // guarded by mu
		delay, jitter time.Duration         // guarded by mu
		conns         map[net.Conn]struct{} // both halves of every live pair; guarded by mu
	}
	wg sync.WaitGroup
}

func newLinkProxy(t testing.TB, from, to int, target string) *linkProxy {
	t.Helper()
	ln := listenLoopback(t)
	p := &linkProxy{from: from, to: to, target: target, ln: ln}
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address the dialing node names for its peer.
func (p *linkProxy) Addr() string { return p.ln.Addr().String() }

// partition cuts the link: live connections are closed and new ones are
// closed as soon as they arrive, until heal. A cut connection looks to
// both nodes like a peer that went away, which is what they see of a
// partition once their timeouts fire; closing makes it immediate.
func (p *linkProxy) partition() {
	p.mu.Lock()
	p.mu.down = true
	conns := p.mu.conns
	p.mu.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// slow delays every chunk forwarded from now on by d ± jitter, in order.
func (p *linkProxy) slow(d, jitter time.Duration) {
	p.mu.Lock()
	p.mu.delay, p.mu.jitter = d, jitter
	p.mu.Unlock()
}

// heal lets new connections through again, undelayed.
func (p *linkProxy) heal() {
	p.mu.Lock()
	p.mu.down = false
	p.mu.delay, p.mu.jitter = 0, 0
	p.mu.Unlock()
}

func (p *linkProxy) close() {
	p.ln.Close()
	p.partition()
	p.wg.Wait()
}

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// track registers both halves of a pair, or reports false if the link is
// down (the caller closes them).
func (p *linkProxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.down {
		return false
	}
	p.mu.conns[a], p.mu.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *linkProxy) forget(a, b net.Conn) {
	p.mu.Lock()
	delete(p.mu.conns, a)
	delete(p.mu.conns, b)
	p.mu.Unlock()
}

func (p *linkProxy) serve(in net.Conn) {
	out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		in.Close()
		return
	}
	if !p.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(out, in) }()
	go func() { defer wg.Done(); p.pipe(in, out) }()
	wg.Wait()
	p.forget(in, out)
}

// pipe copies src to dst, each chunk held back by the link's delay at
// the time it was read; chunks keep their order (a later chunk never
// overtakes an earlier one, as on one TCP stream). Either side failing
// closes both.
func (p *linkProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range ch {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				dst.Close()
				src.Close()
				for range ch {
				}
				return
			}
		}
	}()
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d, j := p.mu.delay, p.mu.jitter
			p.mu.Unlock()
			at := time.Now()
			if d > 0 {
				at = at.Add(d - j + time.Duration(rand.Int64N(int64(2*j)+1)))
			}
			if at.Before(last) {
				at = last
			}
			last = at
			ch <- chunk{append([]byte(nil), buf[:n]...), at}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			break
		}
	}
	close(ch)
	<-done
}

// linkMesh is the proxies of an n-node cluster: links[from][to] carries
// what node from dials to node to (nil on the diagonal).
type linkMesh struct {
	links [][]*linkProxy
}

// newLinkMesh returns a mesh and the clusterOpts.dialAddr that makes each
// node dial its peers through it.
func newLinkMesh(t testing.TB, n int) (*linkMesh, func(from, to int, addr string) string) {
	m := &linkMesh{links: make([][]*linkProxy, n)}
	for i := range m.links {
		m.links[i] = make([]*linkProxy, n)
	}
	var mu sync.Mutex
	return m, func(from, to int, addr string) string {
		mu.Lock()
		defer mu.Unlock()
		p := newLinkProxy(t, from, to, addr)
		m.links[from][to] = p
		return p.Addr()
	}
}

// each calls fn for every link between a node of side a and one of side
// b, in both directions.
func (m *linkMesh) each(a, b []int, fn func(*linkProxy)) {
	for _, i := range a {
		for _, j := range b {
			if i == j {
				continue
			}
			if p := m.links[i][j]; p != nil {
				fn(p)
			}
			if p := m.links[j][i]; p != nil {
				fn(p)
			}
		}
	}
}

// split partitions the nodes of a from those of b (0-based indexes).
func (m *linkMesh) split(a, b []int) { m.each(a, b, (*linkProxy).partition) }

// isolate cuts node i off from every other node.
func (m *linkMesh) isolate(i int) { m.split([]int{i}, m.others(i)) }

// slowAll delays every link.
func (m *linkMesh) slowAll(d, jitter time.Duration) {
	for _, row := range m.links {
		for _, p := range row {
			if p != nil {
				p.slow(d, jitter)
			}
		}
	}
}

// healAll heals every link.
func (m *linkMesh) healAll() {
	for _, row := range m.links {
		for _, p := range row {
			if p != nil {
				p.heal()
			}
		}
	}
}

func (m *linkMesh) others(i int) []int {
	var out []int
	for j := range m.links {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// TestLinkProxy checks the proxy on its own: bytes pass, a partition cuts
// live connections and refuses new ones, heal lets them through again,
// and a delay holds bytes back without reordering them.
func TestLinkProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p := newLinkProxy(t, 0, 1, echo.Addr().String())
	roundTrip := func(c net.Conn, msg string) error {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			return err
		}
		if string(got) != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
		return nil
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c, "hello"); err != nil {
		t.Fatal(err)
	}
	p.partition()
	if err := roundTrip(c, "cut"); err == nil {
		t.Fatal("a partitioned connection still carries bytes")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if err := roundTrip(c2, "new"); err == nil {
			t.Fatal("a new connection passes a partition")
		}
		c2.Close()
	}
	p.heal()
	p.slow(100*time.Millisecond, 50*time.Millisecond)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	start := time.Now()
	var want []byte
	for i := range 20 {
		b := []byte{byte('a' + i)}
		want = append(want, b...)
		if _, err := c3.Write(b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	got := make([]byte, len(want))
	_ = c3.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c3, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("delayed bytes reordered: %q, want %q", got, want)
	}
	// Both directions are delayed: at least twice the lower bound.
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("round trip took %v through a 100±50 ms link", el)
	}
}
