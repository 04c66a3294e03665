package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
)

// Hostile input on every $JS.API route, through stock nats.go requests, on
// contrail and on nats-server: contrail must never crash and must keep
// serving other clients, must answer every request (an error in
// JetStream's form: error JSON, or a status for pulls and direct gets),
// must change nothing where it refuses, and must answer as nats-server
// does except where hostileKnownDiffs says why not.

// hostileNums are numbers and things in number fields: negative, zero,
// huge, past int64 and uint64, and the wrong JSON types.
var hostileNums = map[string]string{
	"-1": "-1", "0": "0", "minint64": "-9223372036854775808", "maxint64": "9223372036854775807",
	"maxuint64": "18446744073709551615", "past-uint64": "18446744073709551616", "string": `"1"`,
	"fraction": "1.5", "exponent": "1e300", "bool": "true", "object": "{}",
}

// hostileSubjects are invalid and empty subjects (and the wrong type).
var hostileSubjects = map[string]string{
	"empty": `""`, "fwc-not-last": `">.x"`, "empty-token": `"s..x"`, "space": `"s. x"`, "number": "1",
}

// hostileTimes are times at and past the ends of what unix nanoseconds
// hold, and a malformed one.
var hostileTimes = map[string]string{
	"year-0001": `"0001-01-01T00:00:00Z"`, "year-1600": `"1600-01-01T00:00:00Z"`,
	"year-2263": `"2263-01-01T00:00:00Z"`, "year-9999": `"9999-12-31T23:59:59Z"`, "malformed": `"yesterday"`,
}

// hostileRoute is one API route and where hostile values go in its body
// (each template has one %s).
type hostileRoute struct {
	subj               string
	nums, subjs, times []string
	status             bool   // answered with status messages (pulls, direct gets)
	filters            bool   // takes 20,000 filter subjects
	desc               string // a body with a 1 MiB description at %s
}

var hostileRoutes = []hostileRoute{
	{subj: "INFO"},
	{subj: "STREAM.CREATE.H", desc: `{"name":"H","subjects":["h"],"description":"%s"}`,
		nums: []string{`{"name":"H","subjects":["h"],"max_msgs":%s}`, `{"name":"H","subjects":["h"],"max_age":%s}`,
			`{"name":"H","subjects":["h"],"first_seq":%s}`, `{"name":"H","subjects":["h"],"max_msg_size":%s}`,
			`{"name":"H","subjects":["h"],"num_replicas":%s}`, `{"name":"H","subjects":["h"],"duplicate_window":%s}`,
			`{"name":"H","subjects":["h"],"max_msgs_per_subject":%s}`},
		subjs: []string{`{"name":"H","subjects":[%s]}`}},
	{subj: "STREAM.UPDATE.S",
		nums:  []string{`{"name":"S","subjects":["s.>"],"allow_direct":true,"max_msgs":%s}`, `{"name":"S","subjects":["s.>"],"allow_direct":true,"max_bytes":%s}`},
		subjs: []string{`{"name":"S","subjects":[%s],"allow_direct":true}`}},
	{subj: "STREAM.INFO.S", nums: []string{`{"offset":%s}`}, subjs: []string{`{"subjects_filter":%s}`}},
	{subj: "STREAM.NAMES", nums: []string{`{"offset":%s}`}, subjs: []string{`{"subject":%s}`}},
	{subj: "STREAM.LIST", nums: []string{`{"offset":%s}`}, subjs: []string{`{"subject":%s}`}},
	{subj: "STREAM.PURGE.S", nums: []string{`{"seq":%s}`, `{"keep":%s}`}, subjs: []string{`{"filter":%s}`}},
	{subj: "STREAM.MSG.GET.S", nums: []string{`{"seq":%s}`},
		subjs: []string{`{"last_by_subj":%s}`, `{"next_by_subj":%s}`}, times: []string{`{"start_time":%s}`}},
	{subj: "STREAM.MSG.DELETE.S", nums: []string{`{"seq":%s}`}},
	{subj: "STREAM.DELETE.NOPE"},
	{subj: "CONSUMER.CREATE.S", filters: true, desc: `{"stream_name":"S","config":{"description":"%s"}}`,
		nums: []string{`{"stream_name":"S","config":{"ack_policy":"explicit","max_ack_pending":%s}}`,
			`{"stream_name":"S","config":{"ack_policy":"explicit","max_deliver":%s}}`,
			`{"stream_name":"S","config":{"ack_policy":"explicit","ack_wait":%s}}`,
			`{"stream_name":"S","config":{"max_waiting":%s}}`,
			`{"stream_name":"S","config":{"max_batch":%s}}`,
			`{"stream_name":"S","config":{"deliver_policy":"by_start_sequence","opt_start_seq":%s}}`,
			`{"stream_name":"S","config":{"num_replicas":%s}}`},
		subjs: []string{`{"stream_name":"S","config":{"filter_subject":%s}}`, `{"stream_name":"S","config":{"filter_subjects":[%s]}}`},
		times: []string{`{"stream_name":"S","config":{"deliver_policy":"by_start_time","opt_start_time":%s}}`,
			`{"stream_name":"S","config":{"pause_until":%s}}`}},
	{subj: "CONSUMER.DURABLE.CREATE.S.D",
		nums: []string{`{"stream_name":"S","config":{"durable_name":"D","ack_policy":"explicit","max_ack_pending":%s}}`}},
	{subj: "CONSUMER.INFO.S.C"},
	{subj: "CONSUMER.NAMES.S", nums: []string{`{"offset":%s}`}},
	{subj: "CONSUMER.LIST.S", nums: []string{`{"offset":%s}`}},
	{subj: "CONSUMER.PAUSE.S.C", times: []string{`{"pause_until":%s}`}},
	{subj: "CONSUMER.DELETE.S.NOPE"},
	{subj: "CONSUMER.MSG.NEXT.S.C", status: true,
		nums: []string{`{"batch":%s,"no_wait":true}`, `{"max_bytes":%s,"no_wait":true}`, `{"expires":%s,"no_wait":true}`}},
	{subj: "DIRECT.GET.S", status: true, nums: []string{`{"seq":%s}`}, subjs: []string{`{"last_by_subj":%s}`},
		times: []string{`{"start_time":%s}`}},
}

// jsHostileCase is one request of the table.
type jsHostileCase struct {
	name, subj, body string
	status           bool
}

// hostileCases crosses every route with every input class it has a place
// for, plus the classes every route gets: no body, broken JSON, a 1 MiB
// body.
func hostileCases() []jsHostileCase {
	var out []jsHostileCase
	big := `{"x":"` + strings.Repeat("x", 1<<20-4096) + `"}`
	for _, r := range hostileRoutes {
		add := func(class, body string) {
			out = append(out, jsHostileCase{name: r.subj + "/" + class, subj: "$JS.API." + r.subj, body: body, status: r.status})
		}
		add("no-body", "")
		add("broken-json", `{"offset":`)
		add("array", `[1,2]`)
		add("1MiB", big)
		for _, set := range []struct {
			kind      string
			templates []string
			values    map[string]string
		}{{"num", r.nums, hostileNums}, {"subject", r.subjs, hostileSubjects}, {"time", r.times, hostileTimes}} {
			names := make([]string, 0, len(set.values))
			for n := range set.values {
				names = append(names, n)
			}
			sort.Strings(names)
			for i, tpl := range set.templates {
				for _, n := range names {
					add(fmt.Sprintf("%s%d=%s", set.kind, i, n), fmt.Sprintf(tpl, set.values[n]))
				}
			}
		}
		if r.subj == "STREAM.CREATE.H" {
			ss := make([]string, 20000)
			for i := range ss {
				ss[i] = fmt.Sprintf(`"h.%d"`, i)
			}
			add("20000-subjects", `{"name":"H","subjects":[`+strings.Join(ss, ",")+`]}`)
			add("20000-subjects-overlap", `{"name":"H","subjects":[`+strings.Join(ss, ",")+`,"h.*"]}`)
		}
		if r.desc != "" {
			add("1MiB-description", fmt.Sprintf(r.desc, strings.Repeat("d", 1<<20-4096)))
		}
		if r.filters {
			fs := make([]string, 20000)
			for i := range fs {
				fs[i] = fmt.Sprintf(`"s.%d"`, i)
			}
			add("20000-filters", `{"stream_name":"S","config":{"ack_policy":"explicit","filter_subjects":[`+strings.Join(fs, ",")+`]}}`)
			add("20000-filters-overlap", `{"stream_name":"S","config":{"ack_policy":"explicit","filter_subjects":[`+strings.Join(fs, ",")+`,"s.*"]}}`)
		}
	}
	long := strings.Repeat("L", 300)
	for _, c := range []jsHostileCase{
		{name: "name/missing", subj: "STREAM.INFO"},
		{name: "name/too-long", subj: "STREAM.CREATE." + long, body: `{"name":"` + long + `","subjects":["l"]}`},
		{name: "name/unicode", subj: "STREAM.INFO.Ünï"},
		{name: "name/unknown-route", subj: "NO.SUCH.API"},
		{name: "name/filter-mismatch", subj: "CONSUMER.CREATE.S.n.s.a", body: `{"stream_name":"S","config":{"name":"n","filter_subject":"s.b"}}`},
		{name: "name/filter-and-filters", subj: "CONSUMER.CREATE.S.n.s.a", body: `{"stream_name":"S","config":{"name":"n","filter_subjects":["s.a"]}}`},
		{name: "name/durable-missing", subj: "CONSUMER.DURABLE.CREATE.S", body: `{"stream_name":"S","config":{"durable_name":"D"}}`},
		{name: "name/consumer-missing", subj: "CONSUMER.INFO.S"},
		{name: "name/pause-unknown", subj: "CONSUMER.PAUSE.S.NOPE", body: `{"pause_until":"9999-12-31T23:59:59Z"}`},
		{name: "name/msg-get-unknown", subj: "STREAM.MSG.GET.NOPE", body: `{"seq":1}`},
		{name: "name/pull-no-consumer", subj: "CONSUMER.MSG.NEXT.S", status: true},
		{name: "name/direct-unknown-stream", subj: "DIRECT.GET.NOPE", body: `{"seq":1}`, status: true},
		{name: "name/direct-unknown-subject", subj: "DIRECT.GET.S.s.nope", status: true},
	} {
		c.subj = "$JS.API." + c.subj
		out = append(out, c)
	}
	return out
}

// hostileKnownDiffs are the cases (by name; a trailing * matches a
// prefix) where contrail answers differently from nats-server on
// purpose, and why. Every other difference fails the test.
var hostileKnownDiffs = map[string]string{
	"STREAM.CREATE.H/num2=maxuint64":       "first_seq past 2^63-1 is refused (10052): nats-server takes it and the stream's sequences wrap to 0 after one message",
	"STREAM.PURGE.S/num0=maxuint64":        "a purge to seq past 2^63-1 is refused (10003): nats-server takes it and the stream's next sequences wrap to 0",
	"STREAM.PURGE.S/subject0=fwc-not-last": "a purge with an invalid filter is refused (10003): nats-server answers success, purging nothing; contrail's store read the filter as a prefix",
	"STREAM.PURGE.S/subject0=empty-token":  "as fwc-not-last",
	"STREAM.PURGE.S/subject0=space":        "as fwc-not-last",
	"STREAM.MSG.GET.S/time0=year-2263":     "a start_time past 2262 is after every message (10037): nats-server's UnixNano wraps it to before 1970 and answers the first message",
	"STREAM.MSG.GET.S/time0=year-9999":     "as year-2263",
	"STREAM.MSG.GET.S/time0=year-1600":     "a start_time before 1678 is before every message: nats-server's UnixNano wraps it past the last message (10037)",
	"DIRECT.GET.S/time0=year-2263":         "as STREAM.MSG.GET.S/time0=year-2263 (404 instead of the first message)",
	"DIRECT.GET.S/time0=year-9999":         "as STREAM.MSG.GET.S/time0=year-2263",
	"DIRECT.GET.S/time0=year-1600":         "as STREAM.MSG.GET.S/time0=year-1600",
	"CONSUMER.CREATE.S/20000-filters*":     "nats-server does not answer in time: it compares every pair of filters, ~20 s for 20,000; contrail answers at once",
	"STREAM.CREATE.H/20000-subjects*":      "nats-server does not answer in time: it compares every pair of subjects, ~14 s for 20,000; contrail answers at once",
	"name/missing":                         "nats-server does not answer a route without its name (no handler subscribes there); contrail answers 10059",
	"name/unknown-route":                   "nats-server does not answer an unknown API subject; contrail answers 10003",
	"name/durable-missing":                 "nats-server does not answer a durable create without the durable's name; contrail answers 10016",
	"name/consumer-missing":                "nats-server does not answer CONSUMER.INFO without a consumer name; contrail answers 10014",
}

// hostileOutcome reduces a reply to what the two servers must agree on:
// the err_code of an error, "ok" for a JSON success, "status N" for a
// status message, "msg" for a message (a pulled or directly got one).
func hostileOutcome(r apiReply) string {
	if s, ok := r.doc["_status"].(string); ok {
		return s
	}
	if hdr, ok := r.doc["_hdr"].(map[string]any); ok {
		if st, ok := hdr["Status"].(string); ok {
			return "status " + st
		}
		return "msg"
	}
	if c := r.errCode(); c != 0 {
		return fmt.Sprint(c)
	}
	if _, ok := r.doc["error"]; ok {
		return "malformed error"
	}
	if _, ok := r.doc["type"]; ok {
		return "ok"
	}
	return "malformed"
}

// hostileState is what a refused request must leave as it was.
func hostileState(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	r := exchange(t, nc, apiStep{name: "state", subj: "$JS.API.STREAM.INFO.S"})
	st, _ := r.doc["state"].(map[string]any)
	return fmt.Sprintf("msgs=%v first=%v last=%v consumers=%v", st["messages"], st["first_seq"], st["last_seq"], st["consumer_count"])
}

// hostileReset gives a server the state each case starts from: stream S
// (s.>, direct gets on) with three messages and a durable pull consumer
// C, and no other stream.
func hostileReset(t *testing.T, nc *nats.Conn) {
	t.Helper()
	names, _ := mustAPI(t, nc, "$JS.API.STREAM.NAMES", "").doc["streams"].([]any)
	for _, s := range names {
		mustAPI(t, nc, "$JS.API.STREAM.DELETE."+s.(string), "")
	}
	hostileCreate(t, nc, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s.>"],"allow_direct":true}`)
	for _, subj := range []string{"s.a", "s.b", "s.a"} {
		m, err := nc.Request(subj, []byte("x"), ioTimeout)
		if err != nil || !strings.Contains(string(m.Data), `"seq"`) {
			t.Fatalf("reset publish: %v %v", m, err)
		}
	}
	hostileCreate(t, nc, "$JS.API.CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"name":"C","durable_name":"C","ack_policy":"explicit"}}`)
}

// hostileCreate makes a reset's create until it succeeds: nats-server
// removes a deleted stream's files in the background, and a stream or
// consumer created at once under the same name can find the old ones
// (10049, 10104).
func hostileCreate(t *testing.T, nc *nats.Conn, subj, body string) {
	t.Helper()
	waitFor(t, ioTimeout, subj, func() bool {
		r := apiRequest(t, nc, subj, body)
		if c := r.errCode(); c != 0 && c != 10049 && c != 10104 {
			t.Fatalf("reset %s: %s", subj, r.raw)
		}
		return r.errCode() == 0
	})
}

func knownDiff(name string) (string, bool) {
	if why, ok := hostileKnownDiffs[name]; ok {
		return why, true
	}
	for k, why := range hostileKnownDiffs {
		if p, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(name, p) {
			return why, true
		}
	}
	return "", false
}

func TestHostileJSAPI(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	ref := startRefJS(t)
	ours, theirs := connect(t, n.URL), connect(t, ref.URL)
	// Another client of the node, which must be served after each case.
	other := connect(t, n.URL)
	cases := hostileCases()
	if os.Getenv("CONTRAIL_HOSTILE_ONLY") != "" {
		// A prefix of case names, for a quick look at one route.
		var keep []jsHostileCase
		for _, c := range cases {
			if strings.HasPrefix(c.name, os.Getenv("CONTRAIL_HOSTILE_ONLY")) {
				keep = append(keep, c)
			}
		}
		cases = keep
	}
	var differ []string
	start := time.Now()
	for i, c := range cases {
		// Streams created by a case are named anew each time (H1, H2…),
		// so no create reuses a name nats-server is still removing.
		h := fmt.Sprint("H", i)
		c.subj = strings.Replace(c.subj, "STREAM.CREATE.H", "STREAM.CREATE."+h, 1)
		c.body = strings.Replace(c.body, `"name":"H"`, `"name":"`+h+`"`, 1)
		hostileReset(t, ours)
		before := hostileState(t, ours)
		st := apiStep{name: c.name, subj: c.subj, body: c.body}
		a := exchange(t, ours, st)
		if !n.running() {
			t.Fatalf("%s: contrail exited:\n%s", c.name, tail(n.out.String(), 40))
		}
		got := hostileOutcome(a)
		statusForm := strings.HasPrefix(got, "status ") || got == "msg" || got == "503 no responders"
		switch {
		case got == "timeout" || got == "malformed" || got == "malformed error":
			t.Errorf("%s: contrail answered %s: %.300s", c.name, got, a.raw)
		case c.status != statusForm:
			// Pulls and direct gets answer with status messages, every
			// other route with JSON.
			t.Errorf("%s: contrail answered %s, not in the route's form: %.300s", c.name, got, a.raw)
		}
		if ok := exchange(t, other, apiStep{name: "other client", subj: "$JS.API.INFO"}); hostileOutcome(ok) != "ok" {
			t.Fatalf("%s: another client is not served after it: %s", c.name, ok.raw)
		}
		if got != "ok" && got != "msg" && !strings.HasPrefix(c.subj, "$JS.API.STREAM.DELETE") {
			if after := hostileState(t, ours); after != before {
				t.Errorf("%s: refused (%s) but changed the stream: %s -> %s", c.name, got, before, after)
			}
		}
		why, known := knownDiff(c.name)
		if known && strings.HasPrefix(why, "nats-server does not answer") {
			continue
		}
		hostileReset(t, theirs)
		want := hostileOutcome(exchange(t, theirs, st))
		switch {
		case got == want && known:
			t.Logf("%s: listed as a difference (%s) but both answer %s", c.name, why, got)
		case got != want && !known:
			differ = append(differ, fmt.Sprintf("%s: contrail %s, nats-server %s (body %.120s)", c.name, got, want, c.body))
		}
	}
	for _, d := range differ {
		t.Error(d)
	}
	t.Logf("%d hostile requests in %v", len(cases), time.Since(start).Round(time.Millisecond))
}

// TestHostileJSMaxAckPendingLimit: under an account JWT's max_ack_pending,
// a consumer asking for unlimited (-1, or any negative) gets the account's
// limit on contrail. nats-server keeps -1 there, which lets one consumer
// hold more unacknowledged messages than its account allows; above the
// limit both refuse with 10121.
func TestHostileJSMaxAckPendingLimit(t *testing.T) {
	t.Parallel()
	w := newOpWorld(t)
	a := w.account("A", func(ac *jwt.AccountClaims) {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: 1 << 20, DiskStorage: 1 << 20, Streams: -1, Consumer: -1, MaxAckPending: 10}
	})
	creds, _ := a.user("u", nil)
	ours := connectCreds(t, w.startOpNode(t).URL, creds)
	theirs := connectCreds(t, w.startRef(t).URL, creds)
	for _, nc := range []*nats.Conn{ours, theirs} {
		mustAPI(t, nc, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)
	}
	maxAckPending := func(r apiReply) any {
		cfg, _ := r.doc["config"].(map[string]any)
		return cfg["max_ack_pending"]
	}
	for i, tc := range []struct {
		value       string
		ours, their any // the config's max_ack_pending, or the err_code
	}{
		{"-1", 10.0, -1.0}, {"-5", 10.0, -1.0}, {"0", 10.0, 10.0}, {"7", 7.0, 7.0}, {"11", 10121, 10121},
	} {
		body := fmt.Sprintf(`{"stream_name":"S","config":{"name":"c%d","ack_policy":"explicit","max_ack_pending":%s}}`, i, tc.value)
		for _, side := range []struct {
			name string
			nc   *nats.Conn
			want any
		}{{"contrail", ours, tc.ours}, {"nats-server", theirs, tc.their}} {
			r := apiRequest(t, side.nc, fmt.Sprintf("$JS.API.CONSUMER.CREATE.S.c%d", i), body)
			var got any = r.errCode()
			if r.errCode() == 0 {
				got = maxAckPending(r)
			}
			if got != side.want {
				t.Errorf("%s: max_ack_pending %s: got %v, want %v (%s)", side.name, tc.value, got, side.want, r.raw)
			}
		}
	}
}

// TestHostileJSOversizeRequest: on a node whose max_payload allows larger
// messages, an API request over 1 MiB (nats-server's default max_payload)
// is refused before it is decoded, with an error naming the bound;
// nats-server has no such bound and decodes whatever arrives.
func TestHostileJSOversizeRequest(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{config: "max_payload: 4MB\n"})
	nc := connect(t, n.URL)
	mustAPI(t, nc, "$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"allow_direct":true}`)
	mustAPI(t, nc, "$JS.API.CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"name":"C","ack_policy":"explicit"}}`)
	big := `{"description":"` + strings.Repeat("d", 2<<20) + `"}`
	for _, subj := range []string{"STREAM.CREATE.X", "STREAM.INFO.S", "CONSUMER.CREATE.S", "STREAM.MSG.GET.S", "STREAM.PURGE.S"} {
		r := apiRequest(t, nc, "$JS.API."+subj, big)
		wantAPIError(t, subj, r, 10025, "exceeds the maximum of 1048576 bytes")
	}
	for _, subj := range []string{"DIRECT.GET.S", "CONSUMER.MSG.NEXT.S.C"} {
		r := exchange(t, nc, apiStep{name: subj, subj: "$JS.API." + subj, body: big})
		if got := hostileOutcome(r); got != "status 408" && got != "status 400" {
			t.Errorf("%s with 2 MiB: %s", subj, r.raw)
		}
	}
	if st := hostileState(t, nc); st != "msgs=0 first=0 last=0 consumers=1" {
		t.Errorf("oversize requests changed the stream: %s", st)
	}
}
