package mux

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

func TestMuxSortsByPreface(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := New(ln, slog.New(slog.DiscardHandler), nil, nil)
	defer m.Close()
	routes, err := m.Listen(KindRoute, 0)
	if err != nil {
		t.Fatal(err)
	}
	g7, err := m.Listen(KindRaft, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Listen(KindRaft, 7); err == nil {
		t.Fatal("second listener on one channel accepted")
	}
	for _, tc := range []struct {
		kind Kind
		id   uint16
		l    *Listener
		msg  string
	}{{KindRaft, 7, g7, "raft"}, {KindRoute, 0, routes, "route"}} {
		c, err := m.Dial(ln.Addr().String(), tc.kind, tc.id, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(tc.msg)); err != nil {
			t.Fatal(err)
		}
		s, err := tc.l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(tc.msg))
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != tc.msg {
			t.Fatalf("channel %c/%d read %q, %v", tc.kind, tc.id, buf, err)
		}
		c.Close()
		s.Close()
	}
	// A connection for a channel nobody listens on is closed.
	c, err := m.Dial(ln.Addr().String(), KindRaft, 9, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("unclaimed channel: read err %v, want EOF", err)
	}
	c.Close()
	g7.Close()
	if _, err := g7.Accept(); err != ErrClosed {
		t.Fatalf("closed listener Accept: %v", err)
	}
}

// newSecretMux is a mux with secret on a loopback port, and its raft
// channel 1.
func newSecretMux(t *testing.T, secret string) (*Mux, *Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := New(ln, slog.New(slog.DiscardHandler), []byte(secret), nil)
	t.Cleanup(func() { m.Close() })
	l, err := m.Listen(KindRaft, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

// TestSecretAdmitsOnlyItsHolders: nodes sharing the secret connect and
// talk; a node with another secret, one with none, and a raw client
// that sends a preface and then its own bytes are refused before
// anything they send reaches the channel, and never see the listener's
// data; a recorded handshake replayed later is refused too.
func TestSecretAdmitsOnlyItsHolders(t *testing.T) {
	a, la := newSecretMux(t, "s3cret")
	b, _ := newSecretMux(t, "s3cret")
	addr := a.Addr().String()

	c, err := b.Dial(addr, KindRaft, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	s, err := la.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}

	wrong, _ := newSecretMux(t, "other")
	if _, err := wrong.Dial(addr, KindRaft, 1, time.Second); !errors.Is(err, ErrHandshake) {
		t.Fatalf("another secret: dial err %v, want %v", err, ErrHandshake)
	}
	// The listener's side holds its proof to itself too: a node with the
	// right secret dialing a port with another refuses it.
	if _, err := b.Dial(wrong.Addr().String(), KindRaft, 1, time.Second); !errors.Is(err, ErrHandshake) {
		t.Fatalf("dialing a port with another secret: err %v, want %v", err, ErrHandshake)
	}
	open, _ := newSecretMux(t, "")
	if c, err := open.Dial(addr, KindRaft, 1, time.Second); err == nil {
		// The open dialer sent only a preface; whatever it writes next is
		// taken as its handshake and refused, and the connection closes.
		_, _ = c.Write(bytes.Repeat([]byte("x"), nonceLen+32))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, _ := io.ReadAll(c)
		if len(rest) != nonceLen+32 {
			t.Fatalf("an open dialer read %d bytes, want only the listener's half of the handshake", len(rest))
		}
		c.Close()
	}

	// Replay: record a good dialer's bytes, send them again on a new
	// connection. The listener's fresh nonce makes the old proof wrong.
	rec := &recorder{}
	good, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rec.Conn = good
	_ = good.SetDeadline(time.Now().Add(5 * time.Second))
	if err := dialHandshake(rec, []byte("s3cret"), [3]byte{byte(KindRaft), 0, 1}); err != nil {
		t.Fatal(err)
	}
	good.Close()
	if s, err := la.Accept(); err == nil {
		s.Close()
	}
	replay, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if _, err := replay.Write(rec.sent.Bytes()); err != nil {
		t.Fatal(err)
	}
	_ = replay.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, _ := io.ReadAll(replay); len(rest) != nonceLen+32 {
		t.Fatalf("a replayed handshake read %d bytes", len(rest))
	}
	select {
	case c := <-la.conns:
		t.Fatalf("a refused connection reached the channel: %v", c.RemoteAddr())
	default:
	}
}

// recorder keeps what is written through it.
type recorder struct {
	net.Conn
	sent bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.sent.Write(p)
	return r.Conn.Write(p)
}
