package server

import (
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/config"
)

// The publish path with and without imports: a client's PUB routed to a
// client subscriber, the subscriber's queue drained now and then so it
// never fills. BenchmarkRoutePlain is the path every account without
// imports takes; the import benchmarks show what crossing costs.

// nullConn is a connection nothing is read from or written to.
type nullConn struct{ net.Conn }

func (nullConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// benchClient is a client of acc that is never served by goroutines.
func benchClient(s *Server, acc *Account) *client {
	c := s.newClient(nullConn{})
	c.acc = acc
	return c
}

// benchSubscribe subscribes c to filter in its account.
func benchSubscribe(tb testing.TB, c *client, filter string) {
	sub := &subscription{acc: c.acc, client: c, subject: []byte(filter), sid: []byte("1")}
	c.mu.Lock()
	c.mu.subs["1"] = sub
	c.mu.Unlock()
	if err := c.acc.subs.Insert(filter, "", sub); err != nil {
		tb.Fatal(err)
	}
}

// drain empties the client's queue as a flusher would.
func drain(c *client) {
	o := c.out
	o.mu.Lock()
	bufs := o.takeLocked(nil)
	o.mu.pending = 0
	o.mu.Unlock()
	release(bufs)
}

func benchRoute(b *testing.B, pub, sub *client, subj string) {
	payload := make([]byte, 128)
	s := []byte(subj)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		pub.route(s, nil, -1, payload)
		if i%256 == 255 {
			pub.wakePending()
			drain(sub)
		}
	}
	b.StopTimer()
	if n := sub.outMsgs.Load(); n != uint64(b.N) {
		b.Fatalf("delivered %d of %d", n, b.N)
	}
}

func BenchmarkRoutePlain(b *testing.B) {
	opts := config.Default()
	s, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	pub, sub := benchClient(s, s.global), benchClient(s, s.global)
	benchSubscribe(b, sub, "bench.core")
	benchRoute(b, pub, sub, "bench.core")
}

func BenchmarkRouteStreamImport(b *testing.B) {
	w := newLinkWorld(b)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(streamExport("bench.>")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "bench.>", LocalSubject: "in.>"})
	})
	ea, ia := mustLoad(b, exp), mustLoad(b, imp)
	pub, sub := benchClient(w.srv, ea), benchClient(w.srv, ia)
	benchSubscribe(b, sub, "in.core")
	benchRoute(b, pub, sub, "bench.core")
}

func BenchmarkRouteStreamImportUnmapped(b *testing.B) {
	w := newLinkWorld(b)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(streamExport("bench.>")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "bench.>"})
	})
	ea, ia := mustLoad(b, exp), mustLoad(b, imp)
	pub, sub := benchClient(w.srv, ea), benchClient(w.srv, ia)
	benchSubscribe(b, sub, "bench.core")
	benchRoute(b, pub, sub, "bench.core")
}

// BenchmarkServiceRequest is one request across a service import and its
// response back, through internal subscriptions.
func BenchmarkServiceRequest(b *testing.B) {
	w := newLinkWorld(b)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(serviceExport("svc")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "svc"})
	})
	ea, ia := mustLoad(b, exp), mustLoad(b, imp)
	if _, err := ea.SubscribeInternal("svc", func(_, reply, _, _ []byte) {
		ea.Publish(string(reply), "", nil, []byte("ok"))
	}); err != nil {
		b.Fatal(err)
	}
	n := 0
	if _, err := ia.SubscribeInternal("inbox", func(_, _, _, _ []byte) { n++ }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ia.Publish("svc", "inbox", nil, []byte("q"))
	}
	b.StopTimer()
	if n != b.N {
		b.Fatalf("%d responses for %d requests", n, b.N)
	}
	if open := ea.responses().open(); open != 0 {
		b.Fatalf("%d response routes left open", open)
	}
}

func mustLoad(b *testing.B, a *linkAccount) *Account {
	acc, err := a.w.srv.LookupAccount(b.Context(), a.pub)
	if err != nil {
		b.Fatal(err)
	}
	return acc
}
