package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Helpers for the JetStream streams suite (e2e_js_*_test.go).

// jsTarget is one JetStream server under a test: a contrail node or the
// reference nats-server, with a nats.go connection to it.
type jsTarget struct {
	name string
	url  string
	nc   *nats.Conn
	js   jetstream.JetStream
}

// startRefJS starts nats-server with JetStream on a private store dir.
func startRefJS(t testing.TB) *refServer {
	t.Helper()
	return startNatsServer(t, "-js", "-sd", t.TempDir())
}

// jsConnect connects to url and opens the jetstream API on it.
func jsConnect(t testing.TB, name, url string, opts ...nats.Option) *jsTarget {
	t.Helper()
	nc := connect(t, url, opts...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("%s: jetstream.New: %v", name, err)
	}
	return &jsTarget{name: name, url: url, nc: nc, js: js}
}

// jsNode starts a contrail node and connects to it.
func jsNode(t testing.TB, o nodeOpts) (*node, *jsTarget) {
	t.Helper()
	n := startNode(t, o)
	return n, jsConnect(t, "contrail", n.URL)
}

// jsPair starts a contrail node and a reference nats-server, both with
// JetStream, and connects to each.
func jsPair(t testing.TB) (ours, ref *jsTarget) {
	t.Helper()
	n := startNode(t, nodeOpts{})
	r := startRefJS(t)
	return jsConnect(t, "contrail", n.URL), jsConnect(t, "nats-server", r.URL)
}

// ctxT is a context bounded by ioTimeout, cancelled when the test ends.
func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// apiReply is a decoded JSON reply, with its raw bytes.
type apiReply struct {
	raw []byte
	doc map[string]any
}

// errCode is the reply's error.err_code, 0 if it is not an error.
func (r apiReply) errCode() int {
	e, ok := r.doc["error"].(map[string]any)
	if !ok {
		return 0
	}
	c, _ := e["err_code"].(float64)
	return int(c)
}

// errDesc is the reply's error.description.
func (r apiReply) errDesc() string {
	e, _ := r.doc["error"].(map[string]any)
	d, _ := e["description"].(string)
	return d
}

func (r apiReply) String() string { return string(r.raw) }

// apiRequest sends a raw request (body may be "" for none) with optional
// headers (key, value pairs) and decodes the JSON reply.
func apiRequest(t testing.TB, nc *nats.Conn, subj, body string, hdr ...string) apiReply {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Data = []byte(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := nc.RequestMsg(m, ioTimeout)
	if err != nil {
		t.Fatalf("request %s %s: %v", subj, body, err)
	}
	r := apiReply{raw: resp.Data}
	if err := json.Unmarshal(resp.Data, &r.doc); err != nil {
		t.Fatalf("request %s %s: reply is not a JSON object: %v: %q (headers %v)", subj, body, err, resp.Data, resp.Header)
	}
	return r
}

// mustAPI is apiRequest failing the test on an error reply.
func mustAPI(t testing.TB, nc *nats.Conn, subj, body string, hdr ...string) apiReply {
	t.Helper()
	r := apiRequest(t, nc, subj, body, hdr...)
	if _, isErr := r.doc["error"]; isErr {
		t.Fatalf("request %s %s: error reply %s", subj, body, r.raw)
	}
	return r
}

// wantAPIError fails unless r is an error reply with err_code code (and,
// if descContains is set, a description containing it).
func wantAPIError(t testing.TB, what string, r apiReply, code int, descContains string) {
	t.Helper()
	if r.errCode() != code {
		t.Errorf("%s: got %s, want err_code %d", what, r.raw, code)
		return
	}
	if descContains != "" && !strings.Contains(r.errDesc(), descContains) {
		t.Errorf("%s: description %q lacks %q", what, r.errDesc(), descContains)
	}
}

// wantJSErr fails unless err is a JetStream API error with err_code code.
func wantJSErr(t testing.TB, what string, err error, code jetstream.ErrorCode) {
	t.Helper()
	var withAPI interface{ APIError() *jetstream.APIError }
	if !errors.As(err, &withAPI) || withAPI.APIError() == nil {
		t.Errorf("%s: got error %v (%T), want an API error with err_code %d", what, err, err, code)
		return
	}
	if apiErr := withAPI.APIError(); apiErr.ErrorCode != code {
		t.Errorf("%s: got err_code %d (%q), want %d", what, apiErr.ErrorCode, apiErr.Description, code)
	}
}

// ---------------------------------------------------------------------
// Comparing replies with nats-server's

var isoTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)

// maskReply makes a decoded reply comparable between servers: real times
// become "TIME" (the zero time stays, it is a wire fact), and the server
// version in metadata becomes "VER". maskKeys name further members whose
// values legitimately differ; they become "MASKED" wherever they appear.
func maskReply(v any, maskKeys ...string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			switch {
			case containsStr(maskKeys, k):
				out[k] = "MASKED"
			case k == "_nats.ver":
				out[k] = "VER"
			case k == "_nats.level":
				// Contrail announces the API level of the features it
				// has (2); nats-server 2.15 is at level 5.
				out[k] = "LEVEL"
			case k == "leader" || k == "server_id":
				out[k] = "SERVER"
			default:
				out[k] = maskReply(val, maskKeys...)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskReply(e, maskKeys...)
		}
		return out
	case string:
		if isoTimeRE.MatchString(x) && !strings.HasPrefix(x, "0001-01-01T00:00:00") {
			return "TIME"
		}
		return x
	}
	return v
}

func containsStr(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// canonJSON renders v with sorted keys, one stable string for comparing.
func canonJSON(v any) string {
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}

// jsonDiff lists the paths where a and b differ.
func jsonDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				out = append(out, fmt.Sprintf("%s.%s: missing (nats-server: %s)", path, k, canonJSON(bv)))
			case !bin:
				out = append(out, fmt.Sprintf("%s.%s: %s (nats-server has no such member)", path, k, canonJSON(av)))
			default:
				out = append(out, jsonDiff(path+"."+k, av, bv)...)
			}
		}
		return out
	}
	if canonJSON(a) != canonJSON(b) {
		return []string{fmt.Sprintf("%s: %s (nats-server: %s)", path, canonJSON(a), canonJSON(b))}
	}
	return nil
}

// sameReply fails the test if the two masked replies differ.
func sameReply(t testing.TB, what string, ours, ref apiReply, maskKeys ...string) {
	t.Helper()
	a, b := maskReply(ours.doc, maskKeys...), maskReply(ref.doc, maskKeys...)
	if d := jsonDiff("", a, b); len(d) > 0 {
		t.Errorf("%s: contrail and nats-server differ:\n  %s\ncontrail:    %s\nnats-server: %s",
			what, strings.Join(d, "\n  "), ours.raw, ref.raw)
	}
}

// ---------------------------------------------------------------------
// Messages

// getRaw fetches a stream message with STREAM.MSG.GET and returns it.
func getRaw(t testing.TB, s jetstream.Stream, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	m, err := s.GetMsg(ctxT(t), seq)
	if err != nil {
		t.Fatalf("get seq %d: %v", seq, err)
	}
	return m
}

// streamInfo is Stream.Info failing the test on error.
func streamInfo(t testing.TB, js jetstream.JetStream, name string, opts ...jetstream.StreamInfoOpt) *jetstream.StreamInfo {
	t.Helper()
	s, err := js.Stream(ctxT(t), name)
	if err != nil {
		t.Fatalf("stream %q: %v", name, err)
	}
	info, err := s.Info(ctxT(t), opts...)
	if err != nil {
		t.Fatalf("stream %q info: %v", name, err)
	}
	return info
}

// createStream is CreateStream failing the test on error.
func createStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("create stream %q: %v", cfg.Name, err)
	}
	return s
}

// jsPublish publishes and returns the PubAck, failing on error.
func jsPublish(t testing.TB, js jetstream.JetStream, subj, data string, opts ...jetstream.PublishOpt) *jetstream.PubAck {
	t.Helper()
	ack, err := js.Publish(ctxT(t), subj, []byte(data), opts...)
	if err != nil {
		t.Fatalf("publish %q: %v", subj, err)
	}
	return ack
}

// waitState polls a stream's state until cond holds or timeout passes.
func waitState(t testing.TB, js jetstream.JetStream, name string, timeout time.Duration, what string, cond func(jetstream.StreamState) bool) jetstream.StreamState {
	t.Helper()
	var last jetstream.StreamState
	waitFor(t, timeout, what+" on stream "+name, func() bool {
		last = streamInfo(t, js, name).State
		return cond(last)
	})
	return last
}

// ---------------------------------------------------------------------
// Restarts

// restartNode stops n with sig and starts a node on the same directory
// (and so the same data), with the same options. SIGTERM is a clean
// shutdown, which must exit 0; SIGKILL is a crash.
func restartNode(t testing.TB, n *node, o nodeOpts, sig syscall.Signal) *node {
	t.Helper()
	n.signal(sig)
	code, ok := n.wait(stopTimeout)
	if !ok {
		t.Fatalf("node still running %v after %v", sig, stopTimeout)
	}
	if sig == syscall.SIGTERM && code != 0 {
		t.Fatalf("node exited %d after SIGTERM, want 0:\n%s", code, tail(n.out.String(), 8<<10))
	}
	if strings.Contains(n.out.String(), "WARNING: DATA RACE") {
		t.Errorf("node reported a data race:\n%s", n.out.String())
	}
	o.dir = n.Dir
	return startNode(t, o)
}

// sameLines reports, line by line, where Contrail's transcript differs
// from nats-server's (a line one side lacks compares as empty).
func sameLines(t testing.TB, what string, ours, ref []string) {
	t.Helper()
	for i := range max(len(ours), len(ref)) {
		var o, r string
		if i < len(ours) {
			o = ours[i]
		}
		if i < len(ref) {
			r = ref[i]
		}
		if o != r {
			t.Errorf("%s at line %d:\n  contrail:    %s\n  nats-server: %s", what, i, o, r)
		}
	}
}
