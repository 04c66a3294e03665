package main

// Helpers for the consumers, KV and Object Store suite (e2e_jsc_*_test.go).
// Its tests are named TestJSC<Upper>…, so `go test -run 'TestJSC[A-Z]'`
// runs exactly this suite.
//
// Most tests share one node per test function and give each subtest its
// own stream, so the suite starts few processes.

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jscEnv is a node under test with a nats.go connection.
type jscEnv struct {
	n  *node
	nc *nats.Conn
	js jetstream.JetStream
}

// jscStart starts a contrail node and connects to it.
func jscStart(t testing.TB) *jscEnv {
	t.Helper()
	n, tgt := jsNode(t, nodeOpts{})
	return &jscEnv{n: n, nc: tgt.nc, js: tgt.js}
}

// conn opens a further connection to the node (one per subtest keeps
// their traffic apart), with its jetstream API.
func (e *jscEnv) conn(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	tgt := jsConnect(t, "contrail", e.n.URL, opts...)
	return tgt.nc, tgt.js
}

// legacy is the legacy JetStreamContext on nc.
func legacy(t testing.TB, nc *nats.Conn) nats.JetStreamContext {
	t.Helper()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatalf("nc.JetStream: %v", err)
	}
	return js
}

// mkStream creates a stream capturing subjects (default "<name>.>").
func mkStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name + ".>"}
	}
	return createStream(t, js, cfg)
}

// pubN publishes n messages to subj with payloads "<prefix>1".."<prefix>n"
// and waits for every PubAck.
func pubN(t testing.TB, js jetstream.JetStream, subj, prefix string, n int) {
	t.Helper()
	pubRange(t, js, subj, prefix, 1, n)
}

// pubRange publishes "<prefix>from".."<prefix>to" to subj, in windows of
// async publishes (nats.go refuses too many outstanding ones).
func pubRange(t testing.TB, js jetstream.JetStream, subj, prefix string, from, to int) {
	t.Helper()
	const window = 500
	futs := make([]jetstream.PubAckFuture, 0, window)
	for i := from; i <= to; i++ {
		f, err := js.PublishAsync(subj, []byte(prefix+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("publish async %q: %v", subj, err)
		}
		futs = append(futs, f)
		if len(futs) == window {
			waitPubAcks(t, futs)
			futs = futs[:0]
		}
	}
	waitPubAcks(t, futs)
}

func waitPubAcks(t testing.TB, futs []jetstream.PubAckFuture) {
	t.Helper()
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish %q: %v", f.Msg().Subject, err)
		case <-time.After(ioTimeout):
			t.Fatalf("no PubAck for %q within %v", f.Msg().Subject, ioTimeout)
		}
	}
}

// mkConsumer creates a consumer, failing the test on error.
func mkConsumer(t testing.TB, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	c, err := js.CreateConsumer(ctxT(t), stream, cfg)
	if err != nil {
		t.Fatalf("create consumer on %q (%+v): %v", stream, cfg, err)
	}
	return c
}

// consumerInfo is Consumer.Info failing on error.
// It asks CONSUMER.INFO directly, so it works for pull and push consumers.
func consumerInfo(t testing.TB, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	r := apiRequest(t, js.Conn(), "$JS.API.CONSUMER.INFO."+stream+"."+name, "")
	if r.errCode() != 0 {
		t.Fatalf("consumer %s > %s info: %s", stream, name, r.raw)
	}
	var info jetstream.ConsumerInfo
	if err := json.Unmarshal(r.raw, &info); err != nil {
		t.Fatalf("consumer %s > %s info: %v: %s", stream, name, err, r.raw)
	}
	return &info
}

// waitConsumer polls consumer info until cond holds.
func waitConsumer(t testing.TB, js jetstream.JetStream, stream, name string, timeout time.Duration, what string, cond func(*jetstream.ConsumerInfo) bool) *jetstream.ConsumerInfo {
	t.Helper()
	var last *jetstream.ConsumerInfo
	deadline := time.Now().Add(timeout)
	for {
		last = consumerInfo(t, js, stream, name)
		if cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(last)
			t.Fatalf("timed out after %v waiting for %s on %s > %s; last info %s", timeout, what, stream, name, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fetch is Fetch collecting the whole batch; it returns the messages and
// the batch's error.
func fetch(t testing.TB, c jetstream.Consumer, n int, opts ...jetstream.FetchOpt) ([]jetstream.Msg, error) {
	t.Helper()
	b, err := c.Fetch(n, opts...)
	if err != nil {
		t.Fatalf("fetch %d: %v", n, err)
	}
	return drainBatch(b)
}

func drainBatch(b jetstream.MessageBatch) ([]jetstream.Msg, error) {
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	return out, b.Error()
}

// payloads lists the messages' data.
func payloads(ms []jetstream.Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Data())
	}
	return out
}

// seqRange is "<prefix>from".."<prefix>to".
func seqRange(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, prefix+strconv.Itoa(i))
	}
	return out
}

func wantStrings(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") || len(got) != len(want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// meta is Msg.Metadata failing on error.
func meta(t testing.TB, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatalf("metadata of %q (reply %q): %v", m.Subject(), m.Reply(), err)
	}
	return md
}

func ackAll(t testing.TB, ms []jetstream.Msg) {
	t.Helper()
	for _, m := range ms {
		if err := m.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}

// status renders a status message as "<code> <description>".
func status(m *nats.Msg) string {
	if m == nil {
		return "<none>"
	}
	return strings.TrimSpace(m.Header.Get("Status") + " " + m.Header.Get("Description"))
}

// collector gathers messages delivered to a callback, safely.
type collector struct {
	mu   sync.Mutex
	msgs []*nats.Msg
	ch   chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1)} }

func (c *collector) add(m *nats.Msg) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *collector) snapshot() []*nats.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*nats.Msg(nil), c.msgs...)
}

// waitCount waits until at least n messages arrived.
func (c *collector) waitCount(t testing.TB, n int, timeout time.Duration) []*nats.Msg {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if c.count() >= n {
			return c.snapshot()
		}
		select {
		case <-c.ch:
		case <-deadline.C:
			t.Fatalf("got %d messages within %v, want %d", c.count(), timeout, n)
		}
	}
}

func natsPayloads(ms []*nats.Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Data)
	}
	return out
}

// runCLI runs the nats CLI against url and returns its combined output,
// failing the test if it exits non-zero.
func runCLI(t testing.TB, url string, args ...string) string {
	t.Helper()
	out, err := tryCLI(t, url, args...)
	if err != nil {
		t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// tryCLI runs the nats CLI and returns its output and error.
func tryCLI(t testing.TB, url string, args ...string) (string, error) {
	t.Helper()
	bin := natsCLI(t)
	all := append([]string{"--server", url, "--timeout", "10s"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Env = append(childEnv(), "NATS_CONTEXT=", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("timed out: %w", ctx.Err())
	}
	return string(out), err
}

// watchCLI runs a nats CLI command that does not exit by itself (a watch)
// until ctx ends, and returns what it printed.
func watchCLI(ctx context.Context, t testing.TB, url string, args ...string) (string, error) {
	t.Helper()
	bin := natsCLI(t)
	all := append([]string{"--server", url, "--timeout", "10s"}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Env = append(childEnv(), "NATS_CONTEXT=", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}
