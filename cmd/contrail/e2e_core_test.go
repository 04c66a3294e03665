package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// barrier returns once every message pub sent before it has been read by
// each subscriber connection: pub's flush means the node has routed them
// (queued them on the subscribers' connections), and each subscriber's
// flush puts a PONG behind them on its own connection.
func barrier(t testing.TB, pub *nats.Conn, subs ...*nats.Conn) {
	t.Helper()
	flush(t, pub)
	for _, nc := range subs {
		flush(t, nc)
	}
}

// drain takes every message already delivered to sub, without waiting.
func drain(t testing.TB, sub *nats.Subscription) []*nats.Msg {
	t.Helper()
	var msgs []*nats.Msg
	for {
		m, err := sub.NextMsg(0)
		if errors.Is(err, nats.ErrTimeout) {
			return msgs
		}
		if err != nil {
			t.Fatalf("reading %q: %v", sub.Subject, err)
		}
		msgs = append(msgs, m)
	}
}

func subjects(msgs []*nats.Msg) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Subject
	}
	return out
}

func TestPubSubWildcards(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	pub := connect(t, n.URL)
	subc := connect(t, n.URL)

	published := []string{
		"orders",
		"orders.eu",
		"orders.eu.created",
		"orders.eu.created.v2",
		"billing.eu.created",
		"ordersx.eu",
		"orders.us.created",
		"orders.eu.deleted",
	}
	cases := []struct {
		filter string
		want   []string
	}{
		{"orders", []string{"orders"}},
		{"orders.*", []string{"orders.eu"}},
		{"orders.>", []string{"orders.eu", "orders.eu.created", "orders.eu.created.v2", "orders.us.created", "orders.eu.deleted"}},
		{"*.eu.created", []string{"orders.eu.created", "billing.eu.created"}},
		{"orders.*.created", []string{"orders.eu.created", "orders.us.created"}},
		{"*.*", []string{"orders.eu", "ordersx.eu"}},
		{"orders.eu.created", []string{"orders.eu.created"}},
		{"orders.eu.created.>", []string{"orders.eu.created.v2"}},
		{">", published},
		{"nothing.>", nil},
	}
	subs := make([]*nats.Subscription, len(cases))
	for i, c := range cases {
		subs[i] = subscribeSync(t, subc, c.filter)
	}
	for _, s := range published {
		publish(t, pub, s, []byte(s))
	}
	barrier(t, pub, subc)
	for i, c := range cases {
		msgs := drain(t, subs[i])
		if got := subjects(msgs); !slices.Equal(got, c.want) {
			t.Errorf("filter %q received %q, want %q", c.filter, got, c.want)
		}
		for _, m := range msgs {
			if string(m.Data) != m.Subject {
				t.Errorf("filter %q: message on %q has payload %q", c.filter, m.Subject, m.Data)
			}
			if m.Sub != subs[i] {
				t.Errorf("filter %q: message delivered to the wrong subscription (%q)", c.filter, m.Sub.Subject)
			}
		}
	}
}

// connByName finds one connection in /connz?subs=1 by its client name.
func connByName(t testing.TB, n *node, name string) connzConn {
	t.Helper()
	var cz connzDoc
	getJSON(t, n.MonURL+"/connz?subs=1", &cz)
	for _, c := range cz.Connections {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no connection named %q in /connz", name)
	return connzConn{}
}

type connzDoc struct {
	NumConnections int         `json:"num_connections"`
	Total          int         `json:"total"`
	Connections    []connzConn `json:"connections"`
}

type connzConn struct {
	Cid      uint64   `json:"cid"`
	IP       string   `json:"ip"`
	Port     int      `json:"port"`
	Name     string   `json:"name"`
	Lang     string   `json:"lang"`
	Version  string   `json:"version"`
	InMsgs   int64    `json:"in_msgs"`
	OutMsgs  int64    `json:"out_msgs"`
	NumSubs  int      `json:"subscriptions"`
	Subs     []string `json:"subscriptions_list"`
	TLSVer   string   `json:"tls_version"`
	Pending  int      `json:"pending_bytes"`
	Start    string   `json:"start"`
	Uptime   string   `json:"uptime"`
	LastSeen string   `json:"last_activity"`
}

func TestUnsubscribe(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	pub := connect(t, n.URL)
	subc := connect(t, n.URL, nats.Name("subscriber"))

	sub := subscribeSync(t, subc, "unsub.a")
	keep := subscribeSync(t, subc, "unsub.b")
	publish(t, pub, "unsub.a", []byte("1"))
	if m := nextMsg(t, sub); string(m.Data) != "1" {
		t.Fatalf("got %q before unsubscribing, want %q", m.Data, "1")
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	flush(t, subc)
	for i := range 10 {
		publish(t, pub, "unsub.a", []byte(strconv.Itoa(i)))
	}
	publish(t, pub, "unsub.b", []byte("marker"))
	barrier(t, pub, subc)
	if got := len(drain(t, keep)); got != 1 {
		t.Fatalf("other subscription got %d messages, want 1", got)
	}
	// nats.go would drop messages for a subscription it no longer has, so
	// ask the node what it sent: the first message and the marker only.
	c := connByName(t, n, "subscriber")
	if c.OutMsgs != 2 {
		t.Errorf("node sent the subscriber %d messages, want 2 (nothing after UNSUB)", c.OutMsgs)
	}
	if !slices.Equal(c.Subs, []string{"unsub.b"}) {
		t.Errorf("subscriber's subscriptions on the node are %q, want [unsub.b]", c.Subs)
	}
}

func TestAutoUnsubscribe(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	pub := connect(t, n.URL)
	subc := connect(t, n.URL, nats.Name("subscriber"))

	const max = 5
	sub := subscribeSync(t, subc, "auto.x")
	if err := sub.AutoUnsubscribe(max); err != nil {
		t.Fatal(err)
	}
	marker := subscribeSync(t, subc, "auto.marker")
	for i := range 3 * max {
		publish(t, pub, "auto.x", []byte(strconv.Itoa(i)))
	}
	publish(t, pub, "auto.marker", nil)
	barrier(t, pub, subc)
	if got := len(drain(t, marker)); got != 1 {
		t.Fatalf("marker subscription got %d messages, want 1", got)
	}
	for i := range max {
		m := nextMsg(t, sub)
		if string(m.Data) != strconv.Itoa(i) {
			t.Errorf("message %d is %q, want %q", i, m.Data, strconv.Itoa(i))
		}
	}
	if _, err := sub.NextMsg(0); err == nil {
		t.Errorf("a message past the auto-unsubscribe limit of %d was delivered", max)
	}
	// The node itself must have stopped at max, and dropped the interest.
	c := connByName(t, n, "subscriber")
	if c.OutMsgs != max+1 {
		t.Errorf("node sent %d messages, want %d (limit) + 1 (marker)", c.OutMsgs, max+1)
	}
	if !slices.Equal(c.Subs, []string{"auto.marker"}) {
		t.Errorf("subscriptions left on the node are %q, want [auto.marker]", c.Subs)
	}
}

func TestQueueGroups(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	pub := connect(t, n.URL)

	const total = 1000
	conns := make([]*nats.Conn, 3)
	members := make([]*nats.Subscription, 3)
	for i := range members {
		conns[i] = connect(t, n.URL)
		sub, err := conns[i].QueueSubscribeSync("work.items", "workers")
		if err != nil {
			t.Fatal(err)
		}
		members[i] = sub
		flush(t, conns[i])
	}
	plainConn := connect(t, n.URL)
	plain := subscribeSync(t, plainConn, "work.items")
	// A member of another group on a wildcard: it gets every message too.
	otherConn := connect(t, n.URL)
	other, err := otherConn.QueueSubscribeSync("work.*", "auditors")
	if err != nil {
		t.Fatal(err)
	}
	flush(t, otherConn)

	for i := range total {
		publish(t, pub, "work.items", []byte(strconv.Itoa(i)))
	}
	barrier(t, pub, append(conns, plainConn, otherConn)...)

	seen := make(map[string]int)
	for i, sub := range members {
		msgs := drain(t, sub)
		if len(msgs) == 0 {
			t.Errorf("queue member %d got no messages", i)
		}
		t.Logf("queue member %d got %d messages", i, len(msgs))
		for _, m := range msgs {
			seen[string(m.Data)]++
		}
	}
	for i := range total {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("message %d delivered %d times across the group, want exactly once", i, c)
		}
	}
	if len(seen) != total {
		t.Errorf("group received %d distinct messages, want %d", len(seen), total)
	}
	if got := len(drain(t, plain)); got != total {
		t.Errorf("plain subscriber got %d messages, want %d", got, total)
	}
	if got := len(drain(t, other)); got != total {
		t.Errorf("single-member group on a wildcard got %d messages, want %d", got, total)
	}
}

func TestRequestReplyHeaders(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	responder := connect(t, n.URL)
	requester := connect(t, n.URL)

	_, err := responder.Subscribe("svc.echo", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		reply.Data = append([]byte("echo: "), m.Data...)
		reply.Header.Set("X-Request-Id", m.Header.Get("X-Request-Id"))
		for _, v := range m.Header.Values("X-Multi") {
			reply.Header.Add("X-Multi-Echo", v)
		}
		reply.Header.Set("X-Responder", "contrail-e2e")
		m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	flush(t, responder)

	req := nats.NewMsg("svc.echo")
	req.Data = []byte("hello")
	req.Header.Set("X-Request-Id", "42")
	req.Header.Add("X-Multi", "one")
	req.Header.Add("X-Multi", "two")
	resp, err := requester.RequestMsg(req, ioTimeout)
	if err != nil {
		t.Fatalf("request with headers: %v", err)
	}
	if string(resp.Data) != "echo: hello" {
		t.Errorf("reply payload %q, want %q", resp.Data, "echo: hello")
	}
	if got := resp.Header.Get("X-Request-Id"); got != "42" {
		t.Errorf("reply X-Request-Id %q, want 42", got)
	}
	if got := resp.Header.Values("X-Multi-Echo"); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("reply X-Multi-Echo %q, want [one two]", got)
	}
	if got := resp.Header.Get("X-Responder"); got != "contrail-e2e" {
		t.Errorf("reply X-Responder %q", got)
	}

	// Plain request without headers, many in flight on one connection.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			want := fmt.Sprintf("echo: req-%d", i)
			m, err := requester.Request("svc.echo", []byte(fmt.Sprintf("req-%d", i)), ioTimeout)
			switch {
			case err != nil:
				errs <- fmt.Errorf("request %d: %w", i, err)
			case string(m.Data) != want:
				errs <- fmt.Errorf("request %d: reply %q, want %q", i, m.Data, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNoResponders(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	nc := connect(t, n.URL)

	start := time.Now()
	_, err := nc.Request("nobody.home", []byte("anyone?"), ioTimeout)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request without a subscriber: err %v, want %v", err, nats.ErrNoResponders)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("no-responders took %v, want it to fail fast", d)
	}
	// Once someone listens, the same request works.
	responder := connect(t, n.URL)
	responder.Subscribe("nobody.home", func(m *nats.Msg) { m.Respond([]byte("here")) })
	flush(t, responder)
	m, err := nc.Request("nobody.home", nil, ioTimeout)
	if err != nil || string(m.Data) != "here" {
		t.Fatalf("request with a responder: %v, %v", m, err)
	}
}

func TestNoEcho(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	quiet := connect(t, n.URL, nats.NoEcho())
	loud := connect(t, n.URL)
	other := connect(t, n.URL)

	qsub := subscribeSync(t, quiet, "echo.x")
	lsub := subscribeSync(t, loud, "echo.x")
	osub := subscribeSync(t, other, "echo.x")

	publish(t, quiet, "echo.x", []byte("from quiet"))
	publish(t, loud, "echo.x", []byte("from loud"))
	barrier(t, quiet, loud, other)
	barrier(t, loud, quiet, other)

	payloads := func(sub *nats.Subscription) []string {
		var out []string
		for _, m := range drain(t, sub) {
			out = append(out, string(m.Data))
		}
		slices.Sort(out)
		return out
	}
	if got := payloads(qsub); !slices.Equal(got, []string{"from loud"}) {
		t.Errorf("no-echo connection got %q, want only the other client's message", got)
	}
	if got := payloads(lsub); !slices.Equal(got, []string{"from loud", "from quiet"}) {
		t.Errorf("echo connection got %q, want both, its own included", got)
	}
	if got := payloads(osub); !slices.Equal(got, []string{"from loud", "from quiet"}) {
		t.Errorf("third connection got %q, want both", got)
	}
}

func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})

	const clients, perClient = 50, 200
	conns := make([]*nats.Conn, clients)
	own := make([]*nats.Subscription, clients)
	bcast := make([]*nats.Subscription, clients)
	for i := range conns {
		conns[i] = connect(t, n.URL)
		own[i] = subscribeSync(t, conns[i], fmt.Sprintf("conc.%d", i))
		bcast[i] = subscribeSync(t, conns[i], "conc.all")
	}

	// Every client at once: perClient messages to its neighbour, one to
	// everybody, then it checks what it received.
	start := make(chan struct{})
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i, nc := range conns {
		wg.Go(func() {
			<-start
			to := fmt.Sprintf("conc.%d", (i+1)%clients)
			for j := range perClient {
				if err := nc.Publish(to, []byte(strconv.Itoa(j))); err != nil {
					errs <- fmt.Errorf("client %d publish: %w", i, err)
					return
				}
			}
			if err := nc.Publish("conc.all", []byte(strconv.Itoa(i))); err != nil {
				errs <- fmt.Errorf("client %d publish: %w", i, err)
				return
			}
			// From its neighbour, in order.
			for j := range perClient {
				m, err := own[i].NextMsg(ioTimeout)
				if err != nil {
					errs <- fmt.Errorf("client %d: message %d from its neighbour: %w", i, j, err)
					return
				}
				if string(m.Data) != strconv.Itoa(j) {
					errs <- fmt.Errorf("client %d: message %d is %q (out of order or lost)", i, j, m.Data)
					return
				}
			}
			// One broadcast from every client, itself included.
			got := make(map[string]bool)
			for range clients {
				m, err := bcast[i].NextMsg(ioTimeout)
				if err != nil {
					errs <- fmt.Errorf("client %d: broadcast %d of %d: %w", i, len(got), clients, err)
					return
				}
				got[string(m.Data)] = true
			}
			if len(got) != clients {
				errs <- fmt.Errorf("client %d: %d distinct broadcasts, want %d", i, len(got), clients)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var v map[string]any
	getJSON(t, n.MonURL+"/varz", &v)
	if got, want := num(t, v, "in_msgs"), float64(clients*(perClient+1)); got != want {
		t.Errorf("/varz in_msgs %v, want %v", got, want)
	}
	if got, want := num(t, v, "out_msgs"), float64(clients*perClient+clients*clients); got != want {
		t.Errorf("/varz out_msgs %v, want %v", got, want)
	}
}
