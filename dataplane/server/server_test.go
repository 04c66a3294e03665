package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/contrail/contrail/dataplane/config"
)

// startServer runs an in-process node on a free loopback port.
func startServer(tb testing.TB, tweak func(*config.Options)) *Server {
	tb.Helper()
	opts := config.Default()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	if tweak != nil {
		tweak(opts)
	}
	s, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		tb.Fatal(err)
	}
	go s.Serve()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func connect(tb testing.TB, s *Server, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect("nats://"+s.Addr().String(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func TestShutdownClosesClients(t *testing.T) {
	s := startServer(t, nil)
	closed := make(chan struct{})
	nc := connect(t, s, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Subscriptions; got != 1 {
		t.Fatalf("subscriptions = %d", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("client not closed by shutdown")
	}
	_ = sub
	if s.NumClients() != 0 || s.Stats().Subscriptions != 0 {
		t.Fatalf("state left after shutdown: clients %d subs %d", s.NumClients(), s.Stats().Subscriptions)
	}
}

func TestCloseRemovesSubscriptions(t *testing.T) {
	s := startServer(t, nil)
	nc := connect(t, s)
	for _, subj := range []string{"a", "a.*", "a.>", "b"} {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.QueueSubscribeSync("a", "q"); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if got := s.Stats().Subscriptions; got != 5 {
		t.Fatalf("subscriptions = %d, want 5", got)
	}
	nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Subscriptions != 0 || s.NumClients() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("subscriptions %d clients %d after close", s.Stats().Subscriptions, s.NumClients())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkPubSub measures one publisher to one subscriber through the
// server, 128-byte messages, as the core bench workload does.
func BenchmarkPubSub(b *testing.B) {
	s := startServer(b, nil)
	pub := connect(b, s)
	sub := connect(b, s)
	done := make(chan struct{})
	n := 0
	sub.Subscribe("bench", func(*nats.Msg) {
		n++
		if n == b.N {
			close(done)
		}
	})
	sub.Flush()
	msg := make([]byte, 128)
	b.SetBytes(128)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pub.Publish("bench", msg)
	}
	pub.Flush()
	<-done
}

func TestInternalSubscribeAndPublish(t *testing.T) {
	s := startServer(t, nil)
	acc := s.GlobalAccount()
	type got struct{ subj, reply, hdr, msg string }
	ch := make(chan got, 4)
	unsub, err := acc.SubscribeInternal("svc.>", func(subj, reply, hdr, msg []byte) {
		ch <- got{string(subj), string(reply), string(hdr), string(msg)}
	})
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, s)
	m := nats.NewMsg("svc.a")
	m.Reply = "r.1"
	m.Header.Set("K", "v")
	m.Data = []byte("body")
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	g := <-ch
	if g.subj != "svc.a" || g.reply != "r.1" || g.msg != "body" || g.hdr != "NATS/1.0\r\nK: v\r\n\r\n" {
		t.Fatalf("got %+v", g)
	}

	// An internal publish reaches client subscribers, headers included.
	sub, err := nc.SubscribeSync("out")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	acc.Publish("out", "", []byte("NATS/1.0\r\nX: 1\r\n\r\n"), []byte("hi"))
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "hi" || msg.Header.Get("X") != "1" {
		t.Fatalf("got %q %v", msg.Data, msg.Header)
	}

	unsub()
	unsub() // idempotent
	if err := nc.Publish("svc.b", nil); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	select {
	case g := <-ch:
		t.Fatalf("delivered after unsubscribe: %+v", g)
	default:
	}
}

func TestReadBufferResize(t *testing.T) {
	buf := make([]byte, minReadBuf)
	small := 0
	// Full reads double it up to readBufSize.
	for len(buf) < readBufSize {
		before := len(buf)
		buf, small = resize(buf, 0, true, false, small)
		if len(buf) != 2*before {
			t.Fatalf("a full read grew %d to %d", before, len(buf))
		}
	}
	if b, _ := resize(buf, 0, true, false, 0); len(b) != readBufSize {
		t.Fatalf("grew past readBufSize on a full read: %d", len(b))
	}
	// A run of small reads halves it, keeping unparsed bytes.
	copy(buf, "PUB")
	for i := range smallReads - 1 {
		if buf, small = resize(buf, 3, false, true, small); len(buf) != readBufSize {
			t.Fatalf("shrank after %d small reads", i+1)
		}
	}
	buf, small = resize(buf, 3, false, true, small)
	if len(buf) != readBufSize/2 || string(buf[:3]) != "PUB" || small != 0 {
		t.Fatalf("after %d small reads: len %d, kept %q", smallReads, len(buf), buf[:3])
	}
	// A big read in between resets the run.
	_, small = resize(buf, 0, false, true, smallReads-2)
	if _, small = resize(buf, 0, false, false, small); small != 0 {
		t.Fatal("a large read did not reset the small-read run")
	}
}
