package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The consumer API and pull request statuses, side by side with
// nats-server: the same requests must get the same replies (JSON, or
// status messages with the same headers) once times are masked.

func TestJSCCompareConsumerAPI(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	create := func(name, subj, body string, mask ...string) apiStep {
		return apiStep{name: name, subj: "$JS.API." + subj, body: body, mask: mask}
	}
	// An ephemeral gets a random name; everything else must match.
	eph := []string{"name"}
	steps := []apiStep{
		{name: "stream", subj: "$JS.API.STREAM.CREATE.C", body: `{"name":"C","subjects":["c.>"],"storage":"memory"}`},
		{name: "wq stream", subj: "$JS.API.STREAM.CREATE.W", body: `{"name":"W","subjects":["w.>"],"storage":"memory","retention":"workqueue"}`},
		{name: "pub 1", subj: "c.a", body: "1"},
		{name: "pub 2", subj: "c.b", body: "2"},
		{name: "pub 3", subj: "c.a", body: "3"},

		create("create durable pull", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"}}`),
		create("create same again", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"}}`),
		create("create action create, same config", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit"},"action":"create"}`),
		create("create action create, other config", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit","max_deliver":3},"action":"create"}`),
		create("update existing", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit","max_deliver":3,"description":"upd"},"action":"update"}`),
		create("update missing", "CONSUMER.CREATE.C.NOPE", `{"stream_name":"C","config":{"durable_name":"NOPE","ack_policy":"explicit"},"action":"update"}`),
		create("update changes ack policy", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"all"}}`),
		create("update changes deliver policy", "CONSUMER.CREATE.C.D1", `{"stream_name":"C","config":{"durable_name":"D1","ack_policy":"explicit","deliver_policy":"new"}}`),
		create("create with filter in subject", "CONSUMER.CREATE.C.F1.c.a", `{"stream_name":"C","config":{"name":"F1","filter_subject":"c.a","ack_policy":"explicit"}}`),
		create("create filter mismatch", "CONSUMER.CREATE.C.F2.c.a", `{"stream_name":"C","config":{"name":"F2","filter_subject":"c.b","ack_policy":"explicit"}}`),
		create("create multi filter", "CONSUMER.CREATE.C.F3", `{"stream_name":"C","config":{"name":"F3","filter_subjects":["c.a","c.b"],"ack_policy":"explicit"}}`),
		create("create overlapping filters", "CONSUMER.CREATE.C.F4", `{"stream_name":"C","config":{"name":"F4","filter_subjects":["c.*","c.b"],"ack_policy":"explicit"}}`),
		create("create filter and filters", "CONSUMER.CREATE.C.F5", `{"stream_name":"C","config":{"name":"F5","filter_subject":"c.a","filter_subjects":["c.b"],"ack_policy":"explicit"}}`),
		create("create name mismatch", "CONSUMER.CREATE.C.X", `{"stream_name":"C","config":{"name":"Y","ack_policy":"explicit"}}`),
		create("create stream mismatch", "CONSUMER.CREATE.C.X", `{"stream_name":"Z","config":{"name":"X","ack_policy":"explicit"}}`),
		create("create missing stream", "CONSUMER.CREATE.NOPE.X", `{"stream_name":"NOPE","config":{"name":"X","ack_policy":"explicit"}}`),
		create("create ephemeral", "CONSUMER.CREATE.C", `{"stream_name":"C","config":{"ack_policy":"none","inactive_threshold":60000000000}}`, eph...),
		create("create ephemeral with durable", "CONSUMER.CREATE.C", `{"stream_name":"C","config":{"durable_name":"E","ack_policy":"none"}}`),
		create("create push", "CONSUMER.CREATE.C.P1", `{"stream_name":"C","config":{"durable_name":"P1","deliver_subject":"push.p1","ack_policy":"explicit","idle_heartbeat":5000000000,"flow_control":true}}`),
		create("create push with max_waiting", "CONSUMER.CREATE.C.P2", `{"stream_name":"C","config":{"durable_name":"P2","deliver_subject":"push.p2","max_waiting":5}}`),
		create("create pull with heartbeat", "CONSUMER.CREATE.C.P3", `{"stream_name":"C","config":{"durable_name":"P3","idle_heartbeat":5000000000}}`),
		create("create flow control without heartbeat", "CONSUMER.CREATE.C.P4", `{"stream_name":"C","config":{"durable_name":"P4","deliver_subject":"push.p4","flow_control":true}}`),
		create("create by start seq", "CONSUMER.CREATE.C.S1", `{"stream_name":"C","config":{"durable_name":"S1","deliver_policy":"by_start_sequence","opt_start_seq":2,"ack_policy":"explicit"}}`),
		create("create by start seq missing seq", "CONSUMER.CREATE.C.S2", `{"stream_name":"C","config":{"durable_name":"S2","deliver_policy":"by_start_sequence","ack_policy":"explicit"}}`),
		create("create by start time missing time", "CONSUMER.CREATE.C.S3", `{"stream_name":"C","config":{"durable_name":"S3","deliver_policy":"by_start_time","ack_policy":"explicit"}}`),
		create("create last", "CONSUMER.CREATE.C.L1", `{"stream_name":"C","config":{"durable_name":"L1","deliver_policy":"last","ack_policy":"explicit"}}`),
		create("create last per subject", "CONSUMER.CREATE.C.L2", `{"stream_name":"C","config":{"durable_name":"L2","deliver_policy":"last_per_subject","filter_subject":"c.*","ack_policy":"explicit"}}`),
		create("create new", "CONSUMER.CREATE.C.N1", `{"stream_name":"C","config":{"durable_name":"N1","deliver_policy":"new","ack_policy":"explicit"}}`),
		create("create backoff", "CONSUMER.CREATE.C.B1", `{"stream_name":"C","config":{"durable_name":"B1","ack_policy":"explicit","backoff":[1000000000,2000000000],"max_deliver":4}}`),
		create("create backoff too long", "CONSUMER.CREATE.C.B2", `{"stream_name":"C","config":{"durable_name":"B2","ack_policy":"explicit","backoff":[1000000000,2000000000],"max_deliver":2}}`),
		create("create headers only", "CONSUMER.CREATE.C.H1", `{"stream_name":"C","config":{"durable_name":"H1","headers_only":true}}`),
		create("create bad ack policy", "CONSUMER.CREATE.C.BA", `{"stream_name":"C","config":{"durable_name":"BA","ack_policy":"sometimes"}}`),
		create("create bad json", "CONSUMER.CREATE.C.BJ", `{"stream_name":`),
		create("create replicas 3", "CONSUMER.CREATE.C.R3", `{"stream_name":"C","config":{"durable_name":"R3","num_replicas":3}}`),
		create("create legacy durable", "CONSUMER.DURABLE.CREATE.C.LD", `{"stream_name":"C","config":{"durable_name":"LD","ack_policy":"explicit"}}`),
		create("create legacy durable mismatch", "CONSUMER.DURABLE.CREATE.C.LD", `{"stream_name":"C","config":{"durable_name":"XX","ack_policy":"explicit"}}`),
		create("create wq consumer", "CONSUMER.CREATE.W.Q1", `{"stream_name":"W","config":{"durable_name":"Q1","ack_policy":"explicit"}}`),
		create("create wq second unfiltered", "CONSUMER.CREATE.W.Q2", `{"stream_name":"W","config":{"durable_name":"Q2","ack_policy":"explicit"}}`),
		create("create wq ack none", "CONSUMER.CREATE.W.Q3", `{"stream_name":"W","config":{"durable_name":"Q3","ack_policy":"none","filter_subject":"w.x"}}`),
		create("create wq deliver last", "CONSUMER.CREATE.W.Q4", `{"stream_name":"W","config":{"durable_name":"Q4","ack_policy":"explicit","deliver_policy":"last","filter_subject":"w.y"}}`),

		{name: "info", subj: "$JS.API.CONSUMER.INFO.C.D1"},
		{name: "info missing consumer", subj: "$JS.API.CONSUMER.INFO.C.NOPE"},
		{name: "info missing stream", subj: "$JS.API.CONSUMER.INFO.NOPE.D1"},
		{name: "info filtered", subj: "$JS.API.CONSUMER.INFO.C.F1"},
		{name: "info last per subject", subj: "$JS.API.CONSUMER.INFO.C.L2"},
		{name: "info by start seq", subj: "$JS.API.CONSUMER.INFO.C.S1"},
		{name: "info last", subj: "$JS.API.CONSUMER.INFO.C.L1"},
		{name: "names", subj: "$JS.API.CONSUMER.NAMES.C", mask: []string{"consumers"}},
		{name: "names missing stream", subj: "$JS.API.CONSUMER.NAMES.NOPE"},
		{name: "list missing stream", subj: "$JS.API.CONSUMER.LIST.NOPE"},
		{name: "pause", subj: "$JS.API.CONSUMER.PAUSE.C.D1", body: `{"pause_until":"2099-01-01T00:00:00Z"}`, mask: []string{"pause_remaining"}},
		{name: "info paused", subj: "$JS.API.CONSUMER.INFO.C.D1", mask: []string{"pause_remaining"}},
		{name: "resume", subj: "$JS.API.CONSUMER.PAUSE.C.D1", body: `{}`},
		{name: "pause missing", subj: "$JS.API.CONSUMER.PAUSE.C.NOPE", body: `{"pause_until":"2099-01-01T00:00:00Z"}`},
		{name: "delete", subj: "$JS.API.CONSUMER.DELETE.C.D1"},
		{name: "delete again", subj: "$JS.API.CONSUMER.DELETE.C.D1"},
		{name: "delete missing stream", subj: "$JS.API.CONSUMER.DELETE.NOPE.D1"},
		{name: "stream info counts consumers", subj: "$JS.API.STREAM.INFO.C"},
	}
	compareSession(t, ours.nc, ref.nc, steps)
}

// pullTranscript sends one raw pull request and describes everything that
// answers it, until a final status or quiet for wait: user messages as
// "msg <subject> <data> <metadata>", status messages with their headers.
// Heartbeats are recorded once.
func pullTranscript(t testing.TB, nc *nats.Conn, subj, body string, wait time.Duration) []string {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subj, inbox, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var out []string
	hb := false
	for {
		m, err := sub.NextMsg(wait)
		if err == nats.ErrNoResponders {
			return append(out, "no responders")
		}
		if err != nil {
			return append(out, "quiet")
		}
		st := m.Header.Get("Status")
		if st == "" || len(m.Data) > 0 {
			out = append(out, fmt.Sprintf("msg %s %q %s", m.Subject, m.Data, ackShape(m.Reply)))
			continue
		}
		line := "status " + st + " " + m.Header.Get("Description") + headerList(m.Header, "Status", "Description")
		if st == "100" {
			if !hb {
				out = append(out, line)
			}
			hb = true
			continue
		}
		if st == "503" {
			return append(out, "no responders")
		}
		return append(out, line)
	}
}

// ackShape reduces an ack subject to what is comparable: everything but
// the timestamp.
func ackShape(reply string) string {
	toks := strings.Split(reply, ".")
	if len(toks) == 9 {
		toks[7] = "TS"
	}
	return strings.Join(toks, ".")
}

func headerList(h nats.Header, skip ...string) string {
	var keys []string
	for k := range h {
		if !containsStr(skip, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, strings.Join(h[k], ","))
	}
	return b.String()
}

func TestJSCComparePullStatus(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	type step struct {
		name  string
		subj  string // API request, or a publish when body is "pub:<data>"
		body  string
		pull  bool
		quiet time.Duration
	}
	api := func(name, subj, body string) step { return step{name: name, subj: "$JS.API." + subj, body: body} }
	pub := func(subj, data string) step { return step{name: "pub " + subj, subj: subj, body: data} }
	pull := func(name, cons, body string) step {
		return step{name: name, subj: "$JS.API.CONSUMER.MSG.NEXT.P." + cons, body: body, pull: true, quiet: 1500 * time.Millisecond}
	}
	steps := []step{
		api("stream", "STREAM.CREATE.P", `{"name":"P","subjects":["p.>"],"storage":"memory"}`),
		api("consumer", "CONSUMER.CREATE.P.D", `{"stream_name":"P","config":{"durable_name":"D","ack_policy":"explicit","ack_wait":60000000000}}`),
		api("limited consumer", "CONSUMER.CREATE.P.L", `{"stream_name":"P","config":{"durable_name":"L","ack_policy":"explicit","max_batch":2,"max_expires":1000000000,"max_bytes":1000,"max_waiting":1}}`),
		api("idle consumer", "CONSUMER.CREATE.P.E", `{"stream_name":"P","config":{"durable_name":"E","ack_policy":"explicit","filter_subject":"p.none"}}`),
		api("push consumer", "CONSUMER.CREATE.P.PU", `{"stream_name":"P","config":{"durable_name":"PU","deliver_subject":"nobody.listens","ack_policy":"explicit"}}`),
		pull("no wait, empty", "D", `{"batch":3,"no_wait":true}`),
		pull("expires, empty", "D", `{"batch":3,"expires":200000000}`),
		pull("no wait with expires, empty", "D", `{"batch":3,"no_wait":true,"expires":200000000}`),
		pub("p.a", "one"),
		pub("p.b", "two"),
		pull("no wait, fewer than batch", "D", `{"batch":5,"no_wait":true}`),
		pub("p.a", "three"),
		pub("p.a", "four"),
		pull("expires, fewer than batch", "D", `{"batch":5,"expires":300000000}`),
		pub("p.c", "five"),
		pub("p.c", "six"),
		pull("no wait with expires, some", "D", `{"batch":5,"no_wait":true,"expires":2000000000}`),
		pub("p.d", "seven"),
		pull("max bytes too small", "D", `{"batch":5,"max_bytes":10,"expires":2000000000}`),
		pub("p.d", "eight"),
		pull("batch done with bytes to spare", "D", `{"batch":1,"max_bytes":10000,"expires":2000000000}`),
		pub("p.e", "nine"),
		pub("p.e", "ten"),
		pull("max bytes fits one", "D", `{"batch":5,"max_bytes":60,"expires":2000000000}`),
		pull("bytes exactly used up", "D", `{"batch":5,"max_bytes":47,"expires":2000000000}`),
		pull("heartbeat", "E", `{"batch":1,"expires":1200000000,"idle_heartbeat":250000000}`),
		pull("heartbeat too large", "D", `{"batch":1,"expires":1000000000,"idle_heartbeat":800000000}`),
		pull("batch over max_batch", "L", `{"batch":3}`),
		pull("expires over max_expires", "L", `{"batch":1,"expires":2000000000}`),
		pull("max bytes over max_bytes", "L", `{"batch":1,"max_bytes":2000}`),
		pull("to a push consumer", "PU", `{"batch":1}`),
		pull("to a missing consumer", "NOPE", `{"batch":1}`),
		pull("bad json", "D", `{"batch":`),
		pull("negative batch", "D", `{"batch":-1,"no_wait":true}`),
		pull("empty body", "D", ``),
		pull("plain number body", "D", `2`),
		api("consumer info", "CONSUMER.INFO.P.D", ""),
	}
	for _, st := range steps {
		var a, b string
		switch {
		case st.pull:
			// nats-server updates a consumer's pending count from the
			// stream's new-message signal, asynchronously, and its ack
			// subjects carry that count: right after a publish it can
			// be one short. A consumer info makes it recount (it checks
			// num_pending), so both servers start the pull settled.
			settle := strings.Replace(st.subj, ".MSG.NEXT.", ".INFO.", 1)
			for _, nc := range []*nats.Conn{ours.nc, ref.nc} {
				_, _ = nc.Request(settle, nil, ioTimeout)
			}
			a = strings.Join(pullTranscript(t, ours.nc, st.subj, st.body, st.quiet), "\n    ")
			b = strings.Join(pullTranscript(t, ref.nc, st.subj, st.body, st.quiet), "\n    ")
		case strings.HasPrefix(st.subj, "$JS.API."):
			a = canonJSON(maskReply(exchange(t, ours.nc, apiStep{subj: st.subj, body: st.body}).doc))
			b = canonJSON(maskReply(exchange(t, ref.nc, apiStep{subj: st.subj, body: st.body}).doc))
		default:
			a = canonJSON(exchange(t, ours.nc, apiStep{subj: st.subj, body: st.body}).doc)
			b = canonJSON(exchange(t, ref.nc, apiStep{subj: st.subj, body: st.body}).doc)
		}
		t.Logf("%s (%s %s):\n    %s", st.name, st.subj, st.body, b)
		if a != b {
			t.Errorf("%s (%s %s): contrail and nats-server differ\ncontrail:\n    %s\nnats-server:\n    %s", st.name, st.subj, st.body, a, b)
		}
	}
}

// consumerLine renders the comparable parts of a consumer's state.
func consumerLine(t testing.TB, js jetstream.JetStream, stream, name string) string {
	t.Helper()
	ci := consumerInfo(t, js, stream, name)
	return fmt.Sprintf("delivered=%d/%d ack_floor=%d/%d ack_pending=%d redelivered=%d pending=%d waiting=%d",
		ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream,
		ci.NumAckPending, ci.NumRedelivered, ci.NumPending, ci.NumWaiting)
}

// TestJSCCompareConsumerState runs stream operations that move consumers
// (purges, deletes, more publishes) on both servers and compares the
// consumers' state after each.
func TestJSCCompareConsumerState(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	run := func(tgt *jsTarget) []string {
		js := tgt.js
		var out []string
		note := func(what string, names ...string) {
			for _, n := range names {
				// Counts may trail a write by a moment on either server:
				// take the state once it holds still.
				line, stable := consumerLine(t, js, "ST", n), 0
				waitFor(t, ioTimeout, "consumer state to settle", func() bool {
					next := consumerLine(t, js, "ST", n)
					if next == line {
						stable++
					} else {
						line, stable = next, 0
					}
					return stable >= 3
				})
				out = append(out, what+" "+n+": "+line)
			}
		}
		s := mkStream(t, js, jetstream.StreamConfig{Name: "ST", Subjects: []string{"st.>"}})
		for i := 1; i <= 10; i++ {
			jsPublish(t, js, "st."+[]string{"a", "b"}[i%2], strconv.Itoa(i))
		}
		all := mkConsumer(t, js, "ST", jetstream.ConsumerConfig{Durable: "ALL", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		mkConsumer(t, js, "ST", jetstream.ConsumerConfig{Durable: "A", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "st.a"})
		mkConsumer(t, js, "ST", jetstream.ConsumerConfig{Durable: "NONE", AckPolicy: jetstream.AckNonePolicy, FilterSubject: "st.b"})
		note("created", "ALL", "A", "NONE")
		ms, err := fetch(t, all, 5, jetstream.FetchMaxWait(2*time.Second))
		if err != nil || len(ms) != 5 {
			t.Fatalf("%s: fetch: %d %v", tgt.name, len(ms), err)
		}
		for _, m := range ms[:3] {
			m.DoubleAck(ctxT(t))
		}
		note("fetched 5 acked 3", "ALL")
		if err := s.DeleteMsg(ctxT(t), 4); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteMsg(ctxT(t), 8); err != nil {
			t.Fatal(err)
		}
		note("deleted 4 (pending) and 8 (not delivered)", "ALL", "A", "NONE")
		if err := s.Purge(ctxT(t), jetstream.WithPurgeSubject("st.a")); err != nil {
			t.Fatal(err)
		}
		note("purged st.a", "ALL", "A", "NONE")
		if err := s.Purge(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		note("purged all", "ALL", "A", "NONE")
		jsPublish(t, js, "st.a", "11")
		jsPublish(t, js, "st.b", "12")
		note("published 2", "ALL", "A", "NONE")
		ms, err = fetch(t, all, 10, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var seqs []string
		for _, m := range ms {
			md := meta(t, m)
			seqs = append(seqs, fmt.Sprintf("%s@%d/%d#%d", m.Data(), md.Sequence.Stream, md.Sequence.Consumer, md.NumDelivered))
			m.DoubleAck(ctxT(t))
		}
		out = append(out, "ALL fetched after purge: "+strings.Join(seqs, " "))
		note("acked", "ALL")
		return out
	}
	a, b := run(ours), run(ref)
	sameLines(t, "consumer state differs", a, b)
	if t.Failed() {
		t.Logf("nats-server:\n%s", strings.Join(b, "\n"))
	}
}

// TestJSCComparePushTranscript compares what a push consumer sends its
// deliver subject: messages with their ack subjects, then an idle
// heartbeat with its headers.
func TestJSCComparePushTranscript(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	run := func(tgt *jsTarget) []string {
		mkStream(t, tgt.js, jetstream.StreamConfig{Name: "PT"})
		pubN(t, tgt.js, "PT.a", "m", 3)
		sub := subscribeSync(t, tgt.nc, "pt.deliver")
		mkConsumer(t, tgt.js, "PT", jetstream.ConsumerConfig{Durable: "pt", DeliverSubject: "pt.deliver",
			AckPolicy: jetstream.AckExplicitPolicy, IdleHeartbeat: 300 * time.Millisecond, FilterSubject: "PT.a"})
		var out []string
		for {
			m := nextMsg(t, sub)
			if st := m.Header.Get("Status"); st != "" {
				out = append(out, "status "+st+" "+m.Header.Get("Description")+headerList(m.Header, "Status", "Description")+" reply="+m.Reply)
				break
			}
			out = append(out, fmt.Sprintf("msg %s %q %s", m.Subject, m.Data, ackShape(m.Reply)))
			m.AckSync()
		}
		return out
	}
	a, b := run(ours), run(ref)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("push transcripts differ\ncontrail:\n  %s\nnats-server:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
}
