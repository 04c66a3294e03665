package main

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestSlowConsumer(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{config: `
max_pending: 1MB
write_deadline: "2s"
`})
	if v := varz(t, n.MonURL); num(t, v, "max_pending") != 1<<20 {
		t.Fatalf("/varz max_pending = %v, want %d: the config file was not applied", v["max_pending"], 1<<20)
	}

	// The slow consumer: subscribes, then never reads again.
	slow := connectRaw(t, n.NatsAddr, `{"verbose":false}`)
	slow.send("SUB flood.x 1\r\nPING\r\n")
	slow.expect("PONG")

	// A healthy subscriber on another subject, and its own publisher.
	healthyConn := connect(t, n.URL)
	healthy := subscribeSync(t, healthyConn, "healthy.x")
	healthyPub := connect(t, n.URL)

	// Watch the node's memory while it is flooded.
	var maxMem atomic.Int64
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			if m, ok := memOf(n.MonURL); ok && m > maxMem.Load() {
				maxMem.Store(m)
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// ~50 MB to the slow subscriber's subject, with the healthy subscriber
	// served in between.
	const msgSize, msgs = 64 << 10, 800
	payload := make([]byte, msgSize)
	flooder := connect(t, n.URL)
	sentHealthy := 0
	for i := range msgs {
		publish(t, flooder, "flood.x", payload)
		if i%50 == 0 {
			publish(t, healthyPub, "healthy.x", []byte("during"))
			sentHealthy++
		}
	}
	flush(t, flooder)
	flush(t, healthyPub)
	for i := range sentHealthy {
		if m := nextMsg(t, healthy); string(m.Data) != "during" {
			t.Fatalf("healthy subscriber message %d during the flood: %q", i, m.Data)
		}
	}

	waitFor(t, ioTimeout, "/varz slow_consumers >= 1", func() bool {
		return num(t, varz(t, n.MonURL), "slow_consumers") >= 1
	})
	close(stopWatch)
	<-watchDone

	// Only now read the slow connection: it must end (after whatever the
	// kernel had buffered), not go on streaming the flood.
	slow.expectClosed(ioTimeout)

	if m, ok := memOf(n.MonURL); ok && m > maxMem.Load() {
		maxMem.Store(m)
	}
	const memLimit = 200 << 20
	t.Logf("node RSS peaked at %.1f MiB during a %d MiB flood", float64(maxMem.Load())/(1<<20), msgSize*msgs>>20)
	if maxMem.Load() == 0 {
		t.Error("/varz mem was never reported")
	}
	if maxMem.Load() > memLimit {
		t.Errorf("node RSS reached %d MiB, want under %d MiB: the flood was buffered", maxMem.Load()>>20, memLimit>>20)
	}

	// Everyone else is fine afterwards.
	publish(t, healthyPub, "healthy.x", []byte("after"))
	flush(t, healthyPub)
	if m := nextMsg(t, healthy); string(m.Data) != "after" {
		t.Fatalf("healthy subscriber after the flood: %q", m.Data)
	}
	roundTrip(t, flooder)
	roundTrip(t, healthyConn)
	// The three nats.go clients remain; the slow consumer is gone.
	if c := num(t, varz(t, n.MonURL), "connections"); c != 3 {
		t.Errorf("/varz connections = %v after the slow consumer was cut off, want 3", c)
	}
}

// memOf reads /varz mem without failing (for use off the test goroutine).
func memOf(monURL string) (int64, bool) {
	var v struct {
		Mem int64 `json:"mem"`
	}
	if err := fetchJSON(monURL+"/varz", &v); err != nil {
		return 0, false
	}
	return v.Mem, true
}

func TestStaleConnection(t *testing.T) {
	t.Parallel()
	const conf = `
ping_interval: "200ms"
ping_max: 2
`
	n := startNode(t, nodeOpts{config: conf})
	nc := connect(t, n.URL)
	sub := subscribeSync(t, nc, "stale.x")

	// silent connects and then never answers a PING.
	silent := func(addr string) ([]string, time.Duration) {
		start := time.Now()
		raw := connectRaw(t, addr, `{"verbose":false}`)
		lines := raw.expectClosed(ioTimeout)
		return lines, time.Since(start)
	}
	lines, took := silent(n.NatsAddr)
	t.Logf("stale connection closed after %v", took)
	want := []string{"PING", "PING", "-ERR 'Stale Connection'"}
	if !slices.Equal(lines, want) {
		t.Errorf("silent client got %q before being closed, want %q", lines, want)
	}
	if took < 3*200*time.Millisecond {
		t.Errorf("silent client closed after %v, before ping_max+1 intervals passed", took)
	}

	// nats-server does exactly the same with the same settings.
	ref := startNatsServer(t, "-c", writeFile(t, t.TempDir(), "ref.conf", conf))
	refLines, _ := silent(strings.TrimPrefix(ref.URL, "nats://"))
	if !slices.Equal(lines, refLines) {
		t.Errorf("contrail sent the silent client %q, nats-server sent %q", lines, refLines)
	}
	// Both count it in /varz.
	if got, want := num(t, varz(t, n.MonURL), "stale_connections"), num(t, varz(t, ref.MonURL), "stale_connections"); got != 1 || got != want {
		t.Errorf("/varz stale_connections = %v, nats-server says %v, want 1", got, want)
	}

	// The nats.go client, connected through all of that (more than
	// ping_max+1 intervals), answered every PING: still connected and
	// working.
	if !nc.IsConnected() {
		t.Fatalf("nats.go client disconnected (status %v, last error %v)", nc.Status(), nc.LastError())
	}
	other := connect(t, n.URL)
	publish(t, other, "stale.x", []byte("still here"))
	flush(t, other)
	if m := nextMsg(t, sub); string(m.Data) != "still here" {
		t.Fatalf("got %q", m.Data)
	}
	var cz connzDoc
	getJSON(t, n.MonURL+"/connz", &cz)
	if cz.NumConnections != 2 {
		t.Errorf("/connz lists %d connections, want the 2 nats.go clients", cz.NumConnections)
	}
}

func TestMaxConnections(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{config: "max_connections: 3\n"})
	conns := make([]*nats.Conn, 3)
	for i := range conns {
		conns[i] = connect(t, n.URL)
	}
	_, err := dial(t, n.URL)
	if err == nil {
		t.Fatal("a 4th connection succeeded with max_connections: 3")
	}
	if !errors.Is(err, nats.ErrMaxConnectionsExceeded) && !strings.Contains(strings.ToLower(err.Error()), "maximum connections exceeded") {
		t.Fatalf("4th connection failed with %v, want %v", err, nats.ErrMaxConnectionsExceeded)
	}
	t.Logf("4th connection: %v", err)
	if c := num(t, varz(t, n.MonURL), "connections"); c != 3 {
		t.Errorf("/varz connections = %v, want 3", c)
	}
	for _, nc := range conns {
		roundTrip(t, nc)
	}
	// A slot that frees up can be used again.
	conns[0].Close()
	waitFor(t, ioTimeout, "the node to see the close", func() bool {
		return num(t, varz(t, n.MonURL), "connections") == 2
	})
	roundTrip(t, connect(t, n.URL))
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			n := startNode(t, nodeOpts{})
			const clients = 3
			disconnected := make(chan string, clients)
			closed := make(chan string, clients)
			for i := range clients {
				name := string(rune('a' + i))
				nc := connect(t, n.URL, nats.Name(name),
					nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- name }),
					nats.ClosedHandler(func(*nats.Conn) { closed <- name }))
				subscribeSync(t, nc, "shutdown."+name)
			}
			// A raw client in the middle of a message, and one idle before
			// CONNECT: neither may hold up the exit.
			partial := connectRaw(t, n.NatsAddr, `{"verbose":false}`)
			partial.send("PUB shutdown.a 100\r\nonly part of it")
			dialRaw(t, n.NatsAddr)

			start := time.Now()
			n.signal(sig)
			code, ok := n.wait(5 * time.Second)
			if !ok {
				t.Fatalf("node still running 5s after %v", sig)
			}
			if code != 0 {
				t.Fatalf("node exited with status %d after %v, want 0", code, sig)
			}
			t.Logf("exited %v after %v", sig, time.Since(start))
			seen := map[string]bool{}
			for range clients {
				seen[recvChan(t, disconnected, "a client to see the disconnect")] = true
				recvChan(t, closed, "a client to be closed")
			}
			if len(seen) != clients {
				t.Errorf("disconnect seen by %v, want all %d clients", seen, clients)
			}
			partial.expectClosed(ioTimeout)
			if out := n.out.String(); !strings.Contains(out, "stopped") {
				t.Errorf("node log does not say it stopped:\n%s", out)
			}
		})
	}
}

// TestShutdownWithStuckClient: a client that stopped reading with data
// still owed to it must not turn a graceful stop into a failed one.
//
// With the default write_deadline (10s) the drain is still bounded by the
// server's close-flush limit (2s), so the node exits 0 well within its
// shutdown budget.
func TestShutdownWithStuckClient(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	stuck := connectRaw(t, n.NatsAddr, `{"verbose":false}`)
	stuck.send("SUB stuck.x 1\r\nPING\r\n")
	stuck.expect("PONG")
	pub := connect(t, n.URL)
	payload := make([]byte, 32<<10)
	// Well under max_pending, well over what the socket buffers hold.
	for range 400 {
		publish(t, pub, "stuck.x", payload)
	}
	flush(t, pub)
	start := time.Now()
	n.signal(syscall.SIGTERM)
	code, ok := n.wait(5 * time.Second)
	if !ok {
		t.Fatalf("node still running %v after SIGTERM with a stuck client", time.Since(start))
	}
	if code != 0 {
		t.Errorf("node exited with status %d, want 0", code)
	}
	t.Logf("exited after %v", time.Since(start))
}
