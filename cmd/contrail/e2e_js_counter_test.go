package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// counterSteps is one session against a counter stream and a plain one:
// increments (big, negative, deduplicated), every refusal nats-server
// gives a publish to a counter stream or an increment to another stream,
// and the stored totals read back.
func counterSteps(storage string, replicas int) []apiStep {
	big := "123456789012345678901234567890" // past 64 bits
	cfg := fmt.Sprintf(`{"name":"CNT","subjects":["cnt.>"],"storage":%q,"num_replicas":%d,"allow_msg_counter":true}`, storage, replicas)
	plain := fmt.Sprintf(`{"name":"PLAIN","subjects":["plain.>"],"storage":%q,"num_replicas":%d}`, storage, replicas)
	incr := func(v string, kv ...string) []string { return append([]string{"Nats-Incr", v}, kv...) }
	steps := []apiStep{
		{name: "create counter stream", subj: "$JS.API.STREAM.CREATE.CNT", body: cfg, mask: counterMask},
		{name: "create plain stream", subj: "$JS.API.STREAM.CREATE.PLAIN", body: plain, mask: counterMask},
		{name: "incr 1", subj: "cnt.a", hdr: incr("1")},
		{name: "incr 41", subj: "cnt.a", hdr: incr("41")},
		{name: "incr other subject", subj: "cnt.b", hdr: incr("-7")},
		{name: "incr negative", subj: "cnt.a", hdr: incr("-50")},
		{name: "incr plus sign", subj: "cnt.a", hdr: incr("+8")},
		{name: "incr zero", subj: "cnt.a", hdr: incr("0")},
		{name: "incr big", subj: "cnt.b", hdr: incr(big)},
		{name: "incr big again", subj: "cnt.b", hdr: incr(big)},
		{name: "incr with msg id", subj: "cnt.c", hdr: incr("5", "Nats-Msg-Id", "m1")},
		{name: "incr duplicate", subj: "cnt.c", hdr: incr("5", "Nats-Msg-Id", "m1")},
		{name: "publish without incr", subj: "cnt.a", body: "x"},
		{name: "publish empty without incr", subj: "cnt.a"},
		{name: "publish other header without incr", subj: "cnt.a", hdr: []string{"X-Any", "1"}},
		{name: "incr not a number", subj: "cnt.a", hdr: incr("one")},
		{name: "incr decimal", subj: "cnt.a", hdr: incr("1.5")},
		{name: "incr hex", subj: "cnt.a", hdr: incr("0x10")},
		{name: "incr with body", subj: "cnt.a", body: "x", hdr: incr("1")},
		{name: "incr with rollup", subj: "cnt.a", hdr: incr("1", "Nats-Rollup", "sub")},
		{name: "incr with expected stream", subj: "cnt.a", hdr: incr("1", "Nats-Expected-Stream", "CNT")},
		{name: "incr with expected last seq", subj: "cnt.a", hdr: incr("1", "Nats-Expected-Last-Sequence", "9")},
		{name: "incr with expected subject seq", subj: "cnt.a", hdr: incr("1", "Nats-Expected-Last-Subject-Sequence", "6")},
		{name: "incr with expected msg id", subj: "cnt.a", hdr: incr("1", "Nats-Expected-Last-Msg-Id", "m1")},
		{name: "incr with ttl", subj: "cnt.a", hdr: incr("1", "Nats-TTL", "5s")},
		{name: "incr to plain stream", subj: "plain.a", hdr: incr("1")},
		{name: "incr to plain stream with body", subj: "plain.a", body: "x", hdr: incr("1")},
		{name: "invalid incr to plain stream", subj: "plain.a", hdr: incr("one")},
		{name: "get total a", subj: "$JS.API.STREAM.MSG.GET.CNT", body: `{"last_by_subj":"cnt.a"}`},
		{name: "get total b", subj: "$JS.API.STREAM.MSG.GET.CNT", body: `{"last_by_subj":"cnt.b"}`},
		{name: "get first", subj: "$JS.API.STREAM.MSG.GET.CNT", body: `{"seq":1}`},
		{name: "delete the last total", subj: "$JS.API.STREAM.MSG.DELETE.CNT", body: `{"seq":9}`},
		{name: "incr after delete", subj: "cnt.b", hdr: incr("1")},
		{name: "purge subject", subj: "$JS.API.STREAM.PURGE.CNT", body: `{"filter":"cnt.a"}`},
		{name: "incr after purge", subj: "cnt.a", hdr: incr("3")},
		{name: "info", subj: "$JS.API.STREAM.INFO.CNT", mask: counterMask},
		{name: "info plain", subj: "$JS.API.STREAM.INFO.PLAIN", mask: counterMask},
	}
	if storage == "file" {
		for i := range steps {
			// Each store counts a message's overhead its own way.
			steps[i].mask = append(steps[i].mask, "bytes")
		}
	}
	return steps
}

// counterMask hides what legitimately differs in stream replies: the
// cluster block and the replica count (one node against a cluster of
// three in TestClusterCounters) and times. The metadata's versions are
// masked by maskReply; its _nats.req.level is compared.
var counterMask = []string{"cluster", "created", "ts", "num_replicas"}

// TestJSCompareCounters runs one session of counter increments and
// refusals against Contrail and nats-server, for both storage types.
func TestJSCompareCounters(t *testing.T) {
	t.Parallel()
	for _, storage := range []string{"memory", "file"} {
		t.Run(storage, func(t *testing.T) {
			t.Parallel()
			ours, ref := jsPair(t)
			compareSession(t, ours.nc, ref.nc, counterSteps(storage, 1))
		})
	}
}

// TestClusterCounters runs the same session on an R3 stream of a three
// node Contrail cluster against one nats-server, then increments one
// counter from clients of every node at once and checks no increment is
// lost, and that the total carries on after the stream's leader dies.
func TestClusterCounters(t *testing.T) {
	ref := startRefJS(t)
	refNC := connect(t, ref.URL)
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	nc, js := clusterJS(t, clusterURLs(nodes))
	// The cluster takes create requests once its meta group has formed.
	createR3(t, js, jetstream.StreamConfig{Name: "WARM", Subjects: []string{"warm"}, Replicas: 3})
	mustAPI(t, refNC, "$JS.API.STREAM.CREATE.WARM", `{"name":"WARM","subjects":["warm"]}`)
	// A lone nats-server has no R3 streams: it runs the session on R1
	// ones, and the replies are compared step by step.
	refSteps := counterSteps("file", 1)
	for i, st := range counterSteps("file", 3) {
		a, b := exchange(t, nc, st), exchange(t, refNC, refSteps[i])
		delete(a.doc, "cluster") // R3 members against a lone server's
		delete(b.doc, "cluster")
		sameReply(t, st.name, a, b, st.mask...)
	}

	createR3(t, js, jetstream.StreamConfig{Name: "HITS", Subjects: []string{"hits"}, Replicas: 3, AllowMsgCounter: true})
	var conns []*nats.Conn
	for _, cn := range nodes {
		c := connect(t, cn.URL)
		t.Cleanup(c.Close)
		conns = append(conns, c)
	}
	const each = 30
	var wg sync.WaitGroup
	totals := make(chan string, len(conns)*each)
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c *nats.Conn) {
			defer wg.Done()
			for n := range each {
				totals <- incrOnce(c, "hits", fmt.Sprintf("c%d-%d", i, n))
			}
		}(i, c)
	}
	wg.Wait()
	close(totals)
	seen := map[string]bool{}
	for v := range totals {
		if seen[v] {
			t.Fatalf("total %q acknowledged twice", v)
		}
		seen[v] = true
	}
	if want := len(conns) * each; len(seen) != want || !seen[fmt.Sprint(want)] {
		t.Fatalf("%d distinct totals, want 1..%d", len(seen), want)
	}
	leader, _ := streamLeader(t, js, nodes, "HITS")
	leader.kill(t)
	if got := incrOnce(nc, "hits", "after-kill"); got != fmt.Sprint(len(conns)*each+1) {
		t.Fatalf("total after the leader died: %s", got)
	}
}

// incrOnce increments subj by one, with a message id so that a publish
// sent again after a failover counts once, and returns the total; a
// deduplicated retry answers with no total, so it reads the stored one.
func incrOnce(nc *nats.Conn, subj, id string) string {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m := nats.NewMsg(subj)
		m.Header.Set("Nats-Incr", "1")
		m.Header.Set("Nats-Msg-Id", id)
		resp, err := nc.RequestMsg(m, 2*time.Second)
		if err != nil {
			continue
		}
		var ack struct {
			Seq   uint64          `json:"seq"`
			Val   string          `json:"val"`
			Dup   bool            `json:"duplicate"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(resp.Data, &ack) != nil || ack.Error != nil {
			continue
		}
		if !ack.Dup {
			return ack.Val
		}
		return storedTotal(nc, ack.Seq)
	}
	return "never acknowledged"
}

// storedTotal reads the counter body stored at seq of stream HITS.
func storedTotal(nc *nats.Conn, seq uint64) string {
	js, err := jetstream.New(nc)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "HITS")
	if err != nil {
		return err.Error()
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return err.Error()
	}
	var v struct {
		Val string `json:"val"`
	}
	_ = json.Unmarshal(m.Data, &v)
	return v.Val
}

// counterSourcesScenario aggregates two counter streams into a third
// through sources whose transforms map both onto the same subjects, and
// sources one of them into a plain stream, which keeps the totals as
// they came.
func counterSourcesScenario(t *testing.T, tg *jsTarget) []string {
	nc, js := tg.nc, tg.js
	var out []string
	incr := func(subj, v string) {
		t.Helper()
		m := nats.NewMsg(subj)
		m.Header.Set("Nats-Incr", v)
		resp, err := nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: incr %s: %v", tg.name, subj, err)
		}
		out = append(out, fmt.Sprintf("incr %s %s: %s", subj, v, resp.Data))
	}
	createStream(t, js, jetstream.StreamConfig{Name: "CA", Subjects: []string{"ca.>"}, AllowMsgCounter: true})
	createStream(t, js, jetstream.StreamConfig{Name: "CB", Subjects: []string{"cb.>"}, AllowMsgCounter: true})
	incr("ca.x", "1")
	incr("ca.x", "2")
	incr("cb.x", "10")
	incr("ca.y", "-5")
	createStream(t, js, jetstream.StreamConfig{Name: "AGG", AllowMsgCounter: true, Sources: []*jetstream.StreamSource{
		{Name: "CA", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "ca.>", Destination: "agg.>"}}},
		{Name: "CB", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "cb.>", Destination: "agg.>"}}},
	}})
	createStream(t, js, jetstream.StreamConfig{Name: "RAW", Sources: []*jetstream.StreamSource{{Name: "CA"}}})
	waitSourced(t, js, "AGG", 4)
	waitSourced(t, js, "RAW", 3)
	// The two sources interleave differently on each server, so only
	// what follows from all of them is compared: the totals, and the
	// increment of a message sourced once both are caught up.
	incr("ca.x", "4")
	info := waitSourced(t, js, "AGG", 5)
	out = append(out, fmt.Sprintf("AGG msgs=%d", info.State.Msgs))
	s, err := js.Stream(ctxT(t), "AGG")
	if err != nil {
		t.Fatalf("%s: stream AGG: %v", tg.name, err)
	}
	for _, subj := range []string{"agg.x", "agg.y"} {
		m, err := s.GetLastMsgForSubject(ctxT(t), subj)
		if err != nil {
			t.Fatalf("%s: last %s: %v", tg.name, subj, err)
		}
		out = append(out, fmt.Sprintf("AGG %s %s sources=%s", subj, m.Data, m.Header.Get("Nats-Counter-Sources")))
		if subj == "agg.x" {
			out = append(out, fmt.Sprintf("AGG %s incr=%s", subj, m.Header.Get("Nats-Incr")))
		}
	}
	waitSourced(t, js, "RAW", 4)
	out = append(out, storedLines(t, js, "RAW", false, "Nats-Incr", "Nats-Counter-Sources")...)
	return out
}

// TestJSCounterSourcesCompare: counters aggregated through sources, as
// nats-server aggregates them.
func TestJSCounterSourcesCompare(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	sameLines(t, "counter sources", counterSourcesScenario(t, ours), counterSourcesScenario(t, ref))
}
