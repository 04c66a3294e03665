package main

import (
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// jsonKind names a decoded JSON value's kind, for comparing documents.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "?"
}

// compareKeys checks that every key of ours is one nats-server also uses,
// with the same JSON kind, and that every key in required is in both.
func compareKeys(t *testing.T, what string, ours, ref map[string]any, required []string) {
	t.Helper()
	for _, k := range required {
		if _, ok := ref[k]; !ok {
			t.Errorf("%s: nats-server has no %q: the reference list is wrong", what, k)
		}
		if _, ok := ours[k]; !ok {
			t.Errorf("%s: %q is missing", what, k)
		}
	}
	for k, v := range ours {
		rv, ok := ref[k]
		if !ok {
			t.Errorf("%s: %q is not a nats-server field", what, k)
			continue
		}
		if jsonKind(v) != jsonKind(rv) {
			t.Errorf("%s: %q is a %s, nats-server's is a %s", what, k, jsonKind(v), jsonKind(rv))
		}
	}
	var missing []string
	for k := range ref {
		if _, ok := ours[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	t.Logf("%s: nats-server fields Contrail does not report: %v", what, missing)
}

func TestMonitorHealthz(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	resp, err := http.Get(n.MonURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("/healthz Content-Type %q, want application/json", ct)
	}
	var got map[string]any
	getJSON(t, n.MonURL+"/healthz", &got)
	if len(got) != 1 || got["status"] != "ok" {
		t.Errorf("/healthz = %s, want {\"status\":\"ok\"}", body)
	}
}

func TestMonitorVarz(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	ref := startNatsServer(t)

	ours, theirs := varz(t, n.MonURL), varz(t, ref.MonURL)
	core := []string{
		"server_id", "server_name", "version", "proto", "go", "host", "port",
		"max_connections", "ping_interval", "ping_max", "http_host", "http_port",
		"max_control_line", "max_payload", "max_pending", "write_deadline",
		"start", "now", "uptime", "mem", "cores", "gomaxprocs", "cpu",
		"connections", "total_connections", "routes", "remotes", "leafnodes",
		"in_msgs", "in_bytes", "out_msgs", "out_bytes", "slow_consumers",
		"subscriptions", "http_req_stats", "config_load_time", "slow_consumer_stats",
	}
	compareKeys(t, "/varz", ours, theirs, core)

	// Limits default as in nats-server.
	for _, k := range []string{"proto", "max_payload", "max_control_line", "max_pending",
		"ping_interval", "ping_max", "write_deadline", "max_connections", "http_base_path", "https_port"} {
		if ours[k] != theirs[k] {
			t.Errorf("/varz %s = %v, nats-server's default is %v", k, ours[k], theirs[k])
		}
	}
	host, port := hostPort(t, n.NatsAddr)
	mhost, mport := hostPort(t, n.MonAddr)
	if ours["host"] != host || num(t, ours, "port") != float64(port) {
		t.Errorf("/varz host:port = %v:%v, want %s", ours["host"], ours["port"], n.NatsAddr)
	}
	if ours["http_host"] != mhost || num(t, ours, "http_port") != float64(mport) {
		t.Errorf("/varz http_host:http_port = %v:%v, want %s", ours["http_host"], ours["http_port"], n.MonAddr)
	}
	start, err1 := time.Parse(time.RFC3339Nano, ours["start"].(string))
	now, err2 := time.Parse(time.RFC3339Nano, ours["now"].(string))
	if err1 != nil || err2 != nil || now.Before(start) || time.Since(start) > time.Minute {
		t.Errorf("/varz start %v now %v: not sensible times (%v, %v)", ours["start"], ours["now"], err1, err2)
	}
	if !strings.HasPrefix(ours["version"].(string), "2.") {
		t.Errorf("/varz version %v, want a nats-server 2.x version", ours["version"])
	}
	if num(t, ours, "mem") <= 0 || num(t, ours, "cores") <= 0 {
		t.Errorf("/varz mem %v cores %v, want positive", ours["mem"], ours["cores"])
	}
	if ours["server_id"] == "" || ours["uptime"] == "" {
		t.Errorf("/varz server_id %q uptime %q", ours["server_id"], ours["uptime"])
	}

	// Counters follow traffic.
	pub := connect(t, n.URL)
	subc := connect(t, n.URL)
	subscribeSync(t, subc, "varz.a")
	subscribeSync(t, subc, "varz.*")
	subscribeSync(t, subc, "other")
	for range 10 {
		publish(t, pub, "varz.a", []byte("0123456789"))
	}
	publish(t, pub, "nobody", []byte("12345"))
	barrier(t, pub, subc)
	v := varz(t, n.MonURL)
	want := map[string]float64{
		"connections": 2, "subscriptions": 3,
		"in_msgs": 11, "in_bytes": 105, "out_msgs": 20, "out_bytes": 200,
		"in_client_msgs": 11, "out_client_msgs": 20, "slow_consumers": 0,
	}
	for k, w := range want {
		if got := num(t, v, k); got != w {
			t.Errorf("/varz %s = %v, want %v", k, got, w)
		}
	}
	if got := num(t, v, "total_connections"); got < 2 {
		t.Errorf("/varz total_connections = %v, want >= 2", got)
	}
	if stats, ok := v["http_req_stats"].(map[string]any); !ok || stats["/varz"] == nil || num(t, stats, "/varz") < 2 {
		t.Errorf("/varz http_req_stats = %v, want /varz counted", v["http_req_stats"])
	}
}

func TestMonitorConnz(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	ref := startNatsServer(t)

	clients := map[string]*nats.Conn{}
	for name, url := range map[string]string{"contrail": n.URL, "nats-server": ref.URL} {
		nc := connect(t, url, nats.Name("monitored"))
		subscribeSync(t, nc, "connz.a")
		if _, err := nc.QueueSubscribeSync("connz.>", "q"); err != nil {
			t.Fatal(err)
		}
		publish(t, nc, "connz.a", []byte("hello"))
		flush(t, nc)
		clients[name] = nc
	}
	idle := connect(t, n.URL, nats.Name("idle"))
	flush(t, idle)

	var cz connzDoc
	getJSON(t, n.MonURL+"/connz", &cz)
	if cz.NumConnections != 2 || cz.Total != 2 || len(cz.Connections) != 2 {
		t.Fatalf("/connz num_connections %d total %d len %d, want 2", cz.NumConnections, cz.Total, len(cz.Connections))
	}
	c := cz.Connections[0]
	if c.Name != "monitored" || c.Lang != "go" || c.Version != nats.Version {
		t.Errorf("/connz name/lang/version = %q/%q/%q, want monitored/go/%s", c.Name, c.Lang, c.Version, nats.Version)
	}
	if c.IP != "127.0.0.1" || c.Port == 0 || c.Cid == 0 {
		t.Errorf("/connz ip %q port %d cid %d", c.IP, c.Port, c.Cid)
	}
	if c.NumSubs != 2 || c.Subs != nil {
		t.Errorf("/connz subscriptions %d list %q, want 2 and no list without subs=1", c.NumSubs, c.Subs)
	}
	if c.InMsgs != 1 || c.OutMsgs != 2 {
		t.Errorf("/connz in_msgs %d out_msgs %d, want 1 and 2 (itself, twice)", c.InMsgs, c.OutMsgs)
	}
	if cz.Connections[1].Name != "idle" {
		t.Errorf("/connz second connection is %q, want idle (sorted by cid)", cz.Connections[1].Name)
	}

	getJSON(t, n.MonURL+"/connz?subs=1", &cz)
	subs := slices.Clone(cz.Connections[0].Subs)
	slices.Sort(subs)
	if !slices.Equal(subs, []string{"connz.>", "connz.a"}) {
		t.Errorf("/connz?subs=1 subscriptions_list %q, want [connz.> connz.a]", subs)
	}

	var detail struct {
		Connections []struct {
			Name string `json:"name"`
			Subs []struct {
				Subject string `json:"subject"`
				Queue   string `json:"qgroup"`
				Sid     string `json:"sid"`
				Msgs    int64  `json:"msgs"`
			} `json:"subscriptions_list_detail"`
		} `json:"connections"`
	}
	getJSON(t, n.MonURL+"/connz?subs=detail&limit=1", &detail)
	if len(detail.Connections) != 1 || len(detail.Connections[0].Subs) != 2 {
		t.Fatalf("/connz?subs=detail&limit=1: %+v", detail)
	}
	for _, s := range detail.Connections[0].Subs {
		if s.Sid == "" || s.Msgs != 1 || (s.Subject == "connz.>") != (s.Queue == "q") {
			t.Errorf("/connz subscription detail %+v", s)
		}
	}

	// Every field we report for a connection is nats-server's, same kind.
	var ours, theirs struct {
		Connections []map[string]any `json:"connections"`
	}
	getJSON(t, n.MonURL+"/connz?subs=1&limit=1", &ours)
	getJSON(t, ref.MonURL+"/connz?subs=1", &theirs)
	if len(theirs.Connections) != 1 {
		t.Fatalf("nats-server /connz lists %d connections", len(theirs.Connections))
	}
	compareKeys(t, "/connz connection", ours.Connections[0], theirs.Connections[0],
		[]string{"cid", "ip", "port", "start", "last_activity", "uptime", "idle", "pending_bytes",
			"in_msgs", "out_msgs", "in_bytes", "out_bytes", "subscriptions", "name", "lang", "version",
			"subscriptions_list"})
}

func TestMonitorSubsz(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	nc := connect(t, n.URL)
	subscribeSync(t, nc, "subsz.a")
	subscribeSync(t, nc, "subsz.*")
	gone := subscribeSync(t, nc, "subsz.b.>")

	type subszDoc struct {
		NumSubs int `json:"num_subscriptions"`
		Total   int `json:"total"`
		Subs    []struct {
			Subject string `json:"subject"`
		} `json:"subscriptions_list"`
	}
	var sz subszDoc
	getJSON(t, n.MonURL+"/subsz", &sz)
	if sz.NumSubs != 3 {
		t.Errorf("/subsz num_subscriptions %d, want 3", sz.NumSubs)
	}
	if err := gone.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	flush(t, nc)
	getJSON(t, n.MonURL+"/subsz", &sz)
	if sz.NumSubs != 2 {
		t.Errorf("/subsz num_subscriptions %d after unsubscribe, want 2", sz.NumSubs)
	}
	getJSON(t, n.MonURL+"/subsz?subs=1&test=subsz.a", &sz)
	var got []string
	for _, s := range sz.Subs {
		got = append(got, s.Subject)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"subsz.*", "subsz.a"}) || sz.Total != 2 {
		t.Errorf("/subsz?subs=1&test=subsz.a lists %q (total %d), want [subsz.* subsz.a]", got, sz.Total)
	}
	// The aliases nats-server serves answer too.
	var alias subszDoc
	getJSON(t, n.MonURL+"/subscriptionsz", &alias)
	if alias.NumSubs != 2 {
		t.Errorf("/subscriptionsz num_subscriptions %d, want 2", alias.NumSubs)
	}
}
