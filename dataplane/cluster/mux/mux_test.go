package mux

import (
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
	m := New(ln, slog.New(slog.DiscardHandler))
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
		c, err := Dial(ln.Addr().String(), tc.kind, tc.id, time.Second)
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
	c, err := Dial(ln.Addr().String(), KindRaft, 9, time.Second)
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
