package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Atomic batch publish (allow_atomic), compared with nats-server: the same
// raw publishes to both, the replies and the stored messages compared.

// batchStep is one publish of a batch scenario: subject, then header
// key/value pairs.
type batchStep struct {
	subj string
	hdr  []string
	bare bool // no body (a counter increment)
}

// bare is st without a body.
func bare(st batchStep) batchStep {
	st.bare = true
	return st
}

// bmsg is a batch message: id, sequence, commit ("" for none), more headers.
func bmsg(subj, id string, seq int, commit string, kv ...string) batchStep {
	h := []string{"Nats-Batch-Id", id, "Nats-Batch-Sequence", strconv.Itoa(seq)}
	if commit != "" {
		h = append(h, "Nats-Batch-Commit", commit)
	}
	return batchStep{subj: subj, hdr: append(h, kv...)}
}

// batchReplyOf publishes step as a request and describes its reply: "empty"
// for a staged message, else the PubAck's members that are wire facts.
func batchReplyOf(t testing.TB, nc *nats.Conn, st batchStep) string {
	t.Helper()
	m := nats.NewMsg(st.subj)
	if !st.bare {
		m.Data = []byte("payload of " + st.subj)
	}
	for i := 0; i+1 < len(st.hdr); i += 2 {
		m.Header.Set(st.hdr[i], st.hdr[i+1])
	}
	resp, err := nc.RequestMsg(m, ioTimeout)
	if err != nil {
		return "no reply: " + err.Error()
	}
	if len(resp.Data) == 0 {
		return fmt.Sprintf("empty %v", resp.Header)
	}
	var doc map[string]any
	if err := json.Unmarshal(resp.Data, &doc); err != nil {
		return "not JSON: " + string(resp.Data)
	}
	return canonJSON(doc)
}

// storedMsgs lists a stream's messages: sequence, subject, data and the
// Nats-Batch-* and Nats-Msg-Id headers.
func storedMsgs(t testing.TB, js jetstream.JetStream, name string) []string {
	t.Helper()
	ctx := ctxT(t)
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{fmt.Sprintf("state msgs=%d first=%d last=%d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			out = append(out, fmt.Sprintf("%d: %v", seq, err))
			continue
		}
		var hs []string
		for k, v := range m.Header {
			if strings.HasPrefix(k, "Nats-Batch-") || k == "Nats-Msg-Id" {
				hs = append(hs, k+"="+strings.Join(v, ","))
			}
		}
		sort.Strings(hs)
		out = append(out, fmt.Sprintf("%d %s %q %v", seq, m.Subject, m.Data, hs))
	}
	return out
}

// runBatchScenario creates the scenario's streams on tg, sends steps and
// returns each reply, then each stream's messages.
func runBatchScenario(t testing.TB, tg *jsTarget, steps []batchStep) []string {
	t.Helper()
	ctx := ctxT(t)
	cfgs := []jetstream.StreamConfig{
		{Name: "B", Subjects: []string{"b.>"}, AllowAtomicPublish: true, AllowRollup: true, Duplicates: time.Minute},
		{Name: "OFF", Subjects: []string{"off.>"}},
		{Name: "DN", Subjects: []string{"dn.>"}, AllowAtomicPublish: true, Discard: jetstream.DiscardNew, MaxMsgs: 2},
		{Name: "LIM", Subjects: []string{"lim.>"}, AllowAtomicPublish: true, MaxMsgs: 3},
		{Name: "CNT", Subjects: []string{"cnt.>"}, AllowAtomicPublish: true, AllowMsgCounter: true},
		{Name: "SCH", Subjects: []string{"sch.>"}, AllowAtomicPublish: true, AllowMsgSchedules: true, AllowRollup: true},
	}
	for _, c := range cfgs {
		if _, err := tg.js.CreateStream(ctx, c); err != nil {
			t.Fatalf("%s: create %s: %v", tg.name, c.Name, err)
		}
	}
	var out []string
	for i, st := range steps {
		out = append(out, fmt.Sprintf("step %d %s %v: %s", i, st.subj, st.hdr[:min(len(st.hdr), 6)], batchReplyOf(t, tg.nc, st)))
	}
	for _, c := range cfgs {
		out = append(out, storedMsgs(t, tg.js, c.Name)...)
	}
	return out
}

// batchCompareSteps is the scenario both servers get.
func batchCompareSteps() []batchStep {
	steps := []batchStep{
		{subj: "b.plain", hdr: []string{"Nats-Msg-Id", "m0"}},
		// A batch of three, committed.
		bmsg("b.a", "one", 1, ""), bmsg("b.b", "one", 2, "", "Nats-Msg-Id", "m1"), bmsg("b.a", "one", 3, "1"),
		// The same id again, ended by an end-of-batch marker.
		bmsg("b.c", "one", 1, ""), bmsg("b.c", "one", 2, ""), bmsg("b.c", "one", 3, "eob"),
		// A gap abandons the batch; its commit is then refused.
		bmsg("b.g", "gap", 1, ""), bmsg("b.g", "gap", 3, ""), bmsg("b.g", "gap", 4, "1"),
		// Not started at 1; an eob on its own.
		bmsg("b.n", "late", 2, "1"), bmsg("b.n", "eob", 1, "eob"),
		// Header checks at the commit: all or nothing.
		bmsg("b.d", "dup", 1, "", "Nats-Msg-Id", "d1"), bmsg("b.d", "dup", 2, "1", "Nats-Msg-Id", "d1"),
		bmsg("b.d", "dup2", 1, "", "Nats-Msg-Id", "m0"), bmsg("b.d", "dup2", 2, "1"),
		bmsg("b.e", "els", 1, "", "Nats-Expected-Last-Sequence", "7"), bmsg("b.e", "els", 2, "1"),
		bmsg("b.e", "els2", 1, "", "Nats-Expected-Last-Sequence", "1"), bmsg("b.e", "els2", 2, "1"),
		bmsg("b.e", "els3", 1, ""), bmsg("b.e", "els3", 2, "1", "Nats-Expected-Last-Sequence", "10"),
		bmsg("b.s", "elss", 1, "", "Nats-Expected-Last-Subject-Sequence", "0"), bmsg("b.s", "elss", 2, "1", "Nats-Expected-Last-Subject-Sequence", "0"),
		bmsg("b.s", "elss2", 1, "", "Nats-Expected-Last-Subject-Sequence", "0", "Nats-Expected-Last-Subject-Sequence-Subject", "b.zzz"),
		bmsg("b.s", "elss2", 2, "1", "Nats-Expected-Last-Subject-Sequence", "0", "Nats-Expected-Last-Subject-Sequence-Subject", "b.zzz"),
		bmsg("b.m", "elmi", 1, "1", "Nats-Expected-Last-Msg-Id", "m1"),
		bmsg("b.x", "exs", 1, "", "Nats-Expected-Stream", "OTHER"), bmsg("b.x", "exs", 2, "1"),
		bmsg("b.r", "roll", 1, ""), bmsg("b.r", "roll", 2, "1", "Nats-Rollup", "all"),
		bmsg("b.r", "roll2", 1, ""), bmsg("b.r", "roll2", 2, "1", "Nats-Rollup", "sub"),
		bmsg("b.r2", "roll3", 1, ""), bmsg("b.r3", "roll3", 2, "1", "Nats-Rollup", "sub"),
		bmsg("b.t", "ttl", 1, "1", "Nats-TTL", "1m"),
		// Malformed batch headers.
		{subj: "b.h", hdr: []string{"Nats-Batch-Id", "noseq"}},
		bmsg("b.h", strings.Repeat("x", 65), 1, "1"),
		bmsg("b.h", "badc", 1, ""), bmsg("b.h", "badc", 2, "yes"),
		bmsg("b.h", "big", 1001, "1"),
		// A stream without allow_atomic.
		bmsg("off.a", "off", 1, "1"),
		// Discard new: the batch is refused whole.
		bmsg("dn.a", "dn", 1, ""), bmsg("dn.a", "dn", 2, ""), bmsg("dn.a", "dn", 3, "1"),
		bmsg("dn.a", "dn2", 1, ""), bmsg("dn.a", "dn2", 2, "1"),
		// Discard old evicts inside the batch.
		bmsg("lim.a", "lim", 1, ""), bmsg("lim.b", "lim", 2, ""), bmsg("lim.a", "lim", 3, ""),
		bmsg("lim.b", "lim", 4, ""), bmsg("lim.a", "lim", 5, "1"),
		// Counters in a batch: each increment lands on the total the
		// batch's earlier ones left; one without Nats-Incr, or with a
		// body, refuses the batch.
		bare(batchStep{subj: "cnt.a", hdr: []string{"Nats-Incr", "5"}}),
		bare(bmsg("cnt.a", "c1", 1, "", "Nats-Incr", "1")), bare(bmsg("cnt.b", "c1", 2, "", "Nats-Incr", "10")),
		bare(bmsg("cnt.a", "c1", 3, "1", "Nats-Incr", "-2")),
		bare(bmsg("cnt.a", "c2", 1, "", "Nats-Incr", "1")), bare(bmsg("cnt.a", "c2", 2, "1")),
		bare(bmsg("cnt.a", "c3", 1, "", "Nats-Incr", "1")), bmsg("cnt.a", "c3", 2, "1", "Nats-Incr", "1"),
		bare(bmsg("cnt.a", "c4", 1, "1", "Nats-Incr", "x")),
		// Schedules in a batch are checked as single ones are.
		bmsg("sch.s", "s1", 1, "", "Nats-Schedule", "@every 1h", "Nats-Schedule-Target", "sch.t"), bmsg("sch.u", "s1", 2, "1"),
		bmsg("sch.s", "s2", 1, "", "Nats-Schedule", "@every 1h"), bmsg("sch.u", "s2", 2, "1"),
		bmsg("off.s", "s3", 1, "1", "Nats-Schedule", "@every 1h", "Nats-Schedule-Target", "off.t"),
	}
	// Open batches per stream are bounded (50 by default).
	for i := range 51 {
		steps = append(steps, bmsg("b.o", fmt.Sprintf("open%d", i), 1, ""))
	}
	return steps
}

// TestJSBatchCompare: every batch scenario answers and stores as on
// nats-server.
func TestJSBatchCompare(t *testing.T) {
	steps := batchCompareSteps()
	ours, ref := both(t, func(t testing.TB, tg *jsTarget) []string { return runBatchScenario(t, tg, steps) })
	if testing.Verbose() {
		t.Logf("nats-server:\n%s", strings.Join(ref, "\n"))
	}
	if len(ours) != len(ref) {
		t.Errorf("Contrail gave %d lines, nats-server %d", len(ours), len(ref))
	}
	sameLines(t, "differs", ours, ref)
}

// TestJSBatchTimeoutCompare: a batch left open for nats-server's timeout
// (10 s) is abandoned with an advisory, and its commit refused, on both.
func TestJSBatchTimeoutCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s batch timeout")
	}
	ours, ref := jsPair(t)
	type seen struct{ adv, commit string }
	results := make(chan seen, 2)
	for _, tg := range []*jsTarget{ours, ref} {
		go func() {
			var s seen
			defer func() { results <- s }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := tg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, AllowAtomicPublish: true}); err != nil {
				s.adv = "create: " + err.Error()
				return
			}
			sub, err := tg.nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.T")
			if err != nil {
				s.adv = err.Error()
				return
			}
			if err := tg.nc.Flush(); err != nil {
				s.adv = err.Error()
				return
			}
			m := nats.NewMsg("t.a")
			m.Header.Set("Nats-Batch-Id", "idle")
			m.Header.Set("Nats-Batch-Sequence", "1")
			if err := tg.nc.PublishMsg(m); err != nil {
				s.adv = err.Error()
				return
			}
			am, err := sub.NextMsg(20 * time.Second)
			if err != nil {
				s.adv = "no advisory: " + err.Error()
				return
			}
			var doc map[string]any
			_ = json.Unmarshal(am.Data, &doc)
			s.adv = fmt.Sprintf("type=%v stream=%v batch=%v reason=%v", doc["type"], doc["stream"], doc["batch"], doc["reason"])
			s.commit = batchReplyOf(t, tg.nc, bmsg("t.a", "idle", 2, "1"))
		}()
	}
	a, b := <-results, <-results
	if a != b {
		t.Fatalf("differ:\n  %+v\n  %+v", a, b)
	}
	if !strings.Contains(a.adv, "reason=timeout") || !strings.Contains(a.commit, "10176") {
		t.Fatalf("unexpected: %+v", a)
	}
	t.Logf("both: %+v", a)
}

// TestJSFastBatchDisabledCompare: a fast batch publish (the reply subject
// ends in .$FI) to a stream without allow_batched is refused 10205 and not
// stored, on both servers.
func TestJSFastBatchDisabledCompare(t *testing.T) {
	ours, ref := both(t, func(t testing.TB, tg *jsTarget) []string {
		ctx := ctxT(t)
		if _, err := tg.js.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f.>"}}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, reply := range []string{"fast.reply.abc.10.fail.1.0.$FI", "fast.reply.bad.$FI"} {
			sub, err := tg.nc.SubscribeSync(reply)
			if err != nil {
				t.Fatal(err)
			}
			if err := tg.nc.PublishMsg(&nats.Msg{Subject: "f.a", Reply: reply, Data: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			m, err := sub.NextMsg(ioTimeout)
			if err != nil {
				out = append(out, reply+": no reply")
				continue
			}
			out = append(out, reply+": "+string(m.Data))
			_ = sub.Unsubscribe()
		}
		return append(out, storedMsgs(t, tg.js, "F")...)
	})
	if strings.Join(ours, "\n") != strings.Join(ref, "\n") {
		t.Fatalf("Contrail:\n%s\nnats-server:\n%s", strings.Join(ours, "\n"), strings.Join(ref, "\n"))
	}
	t.Logf("both:\n%s", strings.Join(ours, "\n"))
}

// TestJSBatchLimitsConfigCompare starts both servers with the same
// jetstream { limits { batch { … } } } block and runs batches against
// its bounds: one message too many, one open batch too many, and one left
// open past the timeout, which is abandoned with an advisory.
func TestJSBatchLimitsConfigCompare(t *testing.T) {
	conf := `jetstream { limits { batch { max_msgs: 3, max_inflight_per_stream: 1, max_inflight_total: 10, timeout: "1s" } } }`
	n := startNode(t, nodeOpts{config: conf})
	ref := startNatsServer(t, "-c", writeFile(t, t.TempDir(), "ref.conf", conf), "-sd", t.TempDir())
	steps := []batchStep{
		bmsg("b.a", "big", 1, ""), bmsg("b.a", "big", 2, ""), bmsg("b.a", "big", 3, ""),
		bmsg("b.a", "big", 4, "1"),
		bmsg("b.a", "first", 1, ""),
		bmsg("b.a", "second", 1, ""),
	}
	scenario := func(tg *jsTarget) []string {
		if _, err := tg.js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: "B", Subjects: []string{"b.>"}, AllowAtomicPublish: true}); err != nil {
			t.Fatalf("%s: create: %v", tg.name, err)
		}
		sub, err := tg.nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.B")
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, st := range steps {
			out = append(out, fmt.Sprintf("step %d %v: %s", i, st.hdr[:4], batchReplyOf(t, tg.nc, st)))
		}
		// "first" is still open: the 1 s timeout abandons it.
		for {
			am, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("%s: no advisory for the open batch: %v", tg.name, err)
			}
			var doc map[string]any
			_ = json.Unmarshal(am.Data, &doc)
			out = append(out, fmt.Sprintf("abandoned batch=%v reason=%v", doc["batch"], doc["reason"]))
			if doc["batch"] == "first" {
				break
			}
		}
		out = append(out, "after timeout: "+batchReplyOf(t, tg.nc, bmsg("b.a", "first", 2, "1")))
		return append(out, storedMsgs(t, tg.js, "B")...)
	}
	ref1 := scenario(jsConnect(t, "nats-server", ref.URL))
	sameLines(t, "batch limits from the config", scenario(jsConnect(t, "contrail", n.URL)), ref1)
}
