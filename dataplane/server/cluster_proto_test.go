package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var testRouteLimits = routeLimits{maxControlLine: 4096, maxPayload: 1 << 20}

func TestParseRoute(t *testing.T) {
	for _, tt := range []struct {
		in                    string
		kind                  routeOpKind
		acct, subj, to, reply string
		queue                 string
		queues                []string
		hdr                   int
		msg                   string
	}{
		{in: "PING\r\n", kind: routeOpPing, hdr: -1},
		{in: "pong\r\n", kind: routeOpPong, hdr: -1},
		{in: "RS+ $G foo.*\r\n", kind: routeOpSub, acct: "$G", subj: "foo.*", hdr: -1},
		{in: "RS+ $G foo q 3\r\n", kind: routeOpSub, acct: "$G", subj: "foo", queue: "q", hdr: -1},
		{in: "RS- A foo q\r\n", kind: routeOpUnsub, acct: "A", subj: "foo", queue: "q", hdr: -1},
		{in: "RMSG $G foo 5\r\nhello\r\n", kind: routeOpMsg, acct: "$G", subj: "foo", to: "foo", hdr: -1, msg: "hello"},
		{in: "RMSG $G foo _INBOX.1 2\r\nhi\r\n", kind: routeOpMsg, acct: "$G", subj: "foo", to: "foo", reply: "_INBOX.1", hdr: -1, msg: "hi"},
		{in: "RMSG $G foo + r q1 q2 0\r\n\r\n", kind: routeOpMsg, acct: "$G", subj: "foo", to: "foo", reply: "r", queues: []string{"q1", "q2"}, hdr: -1},
		{in: "RMSG $G foo | q1 1\r\nx\r\n", kind: routeOpMsg, acct: "$G", subj: "foo", to: "foo", queues: []string{"q1"}, hdr: -1, msg: "x"},
		{in: "HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nab\r\n", kind: routeOpMsg, acct: "$G", subj: "foo", to: "foo", hdr: 12, msg: "NATS/1.0\r\n\r\nab"},
		{in: "RDMSG $G dlv orig 1\r\nx\r\n", kind: routeOpMsg, acct: "$G", subj: "orig", to: "dlv", hdr: -1, msg: "x"},
		// Operation names are case-insensitive.
		{in: "rmsg $G foo 5\r\nhello\r\n", kind: routeOpMsg, acct: "$G", subj: "foo", to: "foo", hdr: -1, msg: "hello"},
		{in: "hDmsg $G dlv orig 12 13\r\nNATS/1.0\r\n\r\nx\r\n", kind: routeOpMsg, acct: "$G", subj: "orig", to: "dlv", hdr: 12, msg: "NATS/1.0\r\n\r\nx"},
		{in: "rs+ $G foo\r\n", kind: routeOpSub, acct: "$G", subj: "foo", hdr: -1},
		{in: "PAUSE ACCT\r\n", kind: routeOpPause, acct: "ACCT", hdr: -1},
		{in: "resume ACCT\r\n", kind: routeOpResume, acct: "ACCT", hdr: -1},
		{in: string(appendPause(nil, true, "$G")), kind: routeOpPause, acct: "$G", hdr: -1},
		{in: string(appendPause(nil, false, "$G")), kind: routeOpResume, acct: "$G", hdr: -1},
	} {
		var op routeOp
		n, err := parseRoute([]byte(tt.in), testRouteLimits, &op)
		if err != nil || n != len(tt.in) {
			t.Errorf("%q: used %d err %v", tt.in, n, err)
			continue
		}
		var qs []string
		for _, q := range op.queues {
			qs = append(qs, string(q))
		}
		if op.kind != tt.kind || string(op.acct) != tt.acct || string(op.subj) != tt.subj || string(op.to) != tt.to ||
			string(op.reply) != tt.reply || string(op.queue) != tt.queue || !equalStrings(qs, tt.queues) ||
			op.hdrLen != tt.hdr || string(op.msg) != tt.msg {
			t.Errorf("%q: got %+v", tt.in, op)
		}
		// Every proper prefix is incomplete, never an error.
		for i := 0; i < len(tt.in); i++ {
			if n, err := parseRoute([]byte(tt.in[:i]), testRouteLimits, &op); n != 0 || err != nil {
				t.Errorf("%q prefix %d: used %d err %v", tt.in, i, n, err)
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestParseRouteAllocs checks that parsing the frames every routed
// message and subscription uses allocates nothing: each publish that
// crosses a route, and its acknowledgement, is parsed once.
func TestParseRouteAllocs(t *testing.T) {
	for _, in := range []string{
		"RMSG $G bench.js _INBOX.abc.1 128\r\n" + string(bytes.Repeat([]byte("x"), 128)) + "\r\n",
		"HMSG ACCT $JS.ACK.S.C.1.2.3.4.5 + r q1 q2 12 14\r\nNATS/1.0\r\n\r\nab\r\n",
		"RS+ $G foo.* q 3\r\n",
		"RS- $G foo.* q\r\n",
	} {
		buf := []byte(in)
		var op routeOp
		if _, err := parseRoute(buf, testRouteLimits, &op); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = parseRoute(buf, testRouteLimits, &op) }); n != 0 {
			t.Errorf("%q: %.1f allocations per parse, want 0", in, n)
		}
	}
}

func TestParseRouteBad(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want error
	}{
		{"FOO\r\n", errRouteProtocol},
		{"RS+ $G\r\n", errRouteProtocol},
		{"RS+ $G foo q\r\n", errRouteProtocol},
		{"RS+ $G foo q x\r\n", errRouteProtocol},
		{"PAUSE\r\n", errRouteProtocol},
		{"PAUSE A B\r\n", errRouteProtocol},
		{"RESUME\r\n", errRouteProtocol},
		{"RMSG $G foo\r\n", errRouteProtocol},
		{"RMSG $G foo -1\r\n", errRouteProtocol},
		{"RMSG $G foo 2000000\r\n", errRouteMaxPayload},
		{"RMSG $G foo a b 1\r\n", errRouteProtocol},
		{"HMSG $G foo 5 2\r\n", errRouteProtocol},
		{"RMSG $G foo 1\r\nxyz", errRouteProtocol},
		{"RS+ " + string(bytes.Repeat([]byte("a"), 5000)), errRouteControlLine},
	} {
		var op routeOp
		if _, err := parseRoute([]byte(tt.in), testRouteLimits, &op); !errors.Is(err, tt.want) {
			t.Errorf("%.40q: err %v, want %v", tt.in, err, tt.want)
		}
	}
}

// A frame naming more queue groups than the parser's stack room splits
// into a slice of its own, up to maxRouteQueues; one more is refused.
func TestParseRouteManyQueues(t *testing.T) {
	lim := routeLimits{maxControlLine: 16 << 10, maxPayload: 1 << 20}
	frame := func(n int) ([]byte, []string) {
		var qs []string
		for i := range n {
			qs = append(qs, fmt.Sprintf("q%d", i))
		}
		return []byte("RMSG $G foo | " + strings.Join(qs, " ") + " 1\r\nx\r\n"), qs
	}
	for _, n := range []int{1, 9, 10, 20, maxRouteQueues} {
		in, want := frame(n)
		var op routeOp
		used, err := parseRoute(in, lim, &op)
		if err != nil || used != len(in) || string(op.msg) != "x" {
			t.Fatalf("%d queues: used %d of %d, msg %q, err %v", n, used, len(in), op.msg, err)
		}
		var got []string
		for _, q := range op.queues {
			got = append(got, string(q))
		}
		if !equalStrings(got, want) {
			t.Fatalf("%d queues: got %d, first %q", n, len(got), got[:min(len(got), 3)])
		}
	}
	in, _ := frame(maxRouteQueues + 1)
	var op routeOp
	if _, err := parseRoute(in, lim, &op); !errors.Is(err, errRouteProtocol) {
		t.Fatalf("%d queues: err %v, want %v", maxRouteQueues+1, err, errRouteProtocol)
	}
}

func TestFrameQueues(t *testing.T) {
	names := func(n, size int) [][]byte {
		qs := make([][]byte, n)
		for i := range qs {
			qs[i] = bytes.Repeat([]byte("q"), size)
		}
		return qs
	}
	for _, tt := range []struct {
		qs   [][]byte
		want int
	}{
		{names(1, 1), 1},
		{names(maxRouteQueues+1, 1), maxRouteQueues},
		{names(20, 4000), maxFrameQueueBytes / 4001},
		{names(3, maxFrameQueueBytes*2), 1}, // a frame always carries one
	} {
		if got := frameQueues(tt.qs); got != tt.want {
			t.Errorf("%d names of %d bytes: %d in a frame, want %d", len(tt.qs), len(tt.qs[0]), got, tt.want)
		}
	}
}

func TestRouteMsgLineRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		to, reply  string
		queues     []string
		queuesOnly bool
		hdr        int
	}{
		{}, {reply: "r"}, {queues: []string{"a", "b"}}, {reply: "r", queues: []string{"a"}},
		{hdr: 3}, {to: "dlv", hdr: 3, reply: "r", queues: []string{"q"}},
		{queues: []string{"a"}, queuesOnly: true}, {reply: "r", queues: []string{"a", "b"}, queuesOnly: true},
	} {
		var to []byte
		if tt.to != "" {
			to = []byte(tt.to)
		}
		var qs [][]byte
		for _, q := range tt.queues {
			qs = append(qs, []byte(q))
		}
		hdr := tt.hdr
		if hdr == 0 {
			hdr = -1
		}
		body := "abc-body"
		b := appendRouteMsgLine(nil, "ACC", to, []byte("subj"), []byte(tt.reply), qs, tt.queuesOnly, hdr, len(body))
		b = append(append(b, body...), "\r\n"...)
		var op routeOp
		n, err := parseRoute(b, testRouteLimits, &op)
		if err != nil || n != len(b) {
			t.Fatalf("%q: %d %v", b, n, err)
		}
		wantTo := tt.to
		if wantTo == "" {
			wantTo = "subj"
		}
		if string(op.acct) != "ACC" || string(op.subj) != "subj" || string(op.to) != wantTo || string(op.reply) != tt.reply ||
			len(op.queues) != len(qs) || op.queuesOnly != tt.queuesOnly || op.hdrLen != hdr || string(op.msg) != body {
			t.Errorf("%q: got %+v", b, op)
		}
	}
}

// FuzzRoute feeds hostile bytes to the route parser: it must never panic,
// never claim more bytes than it was given, and never return a message
// past its bounds.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{"PING\r\n", "RS+ $G foo q 1\r\n", "RS- $G foo\r\n", "RMSG $G foo + r q 2\r\nhi\r\n",
		"HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nab\r\n", "RDMSG A b c | q 0\r\n\r\n", "INFO {}\r\n"} {
		f.Add([]byte(s))
	}
	lim := routeLimits{maxControlLine: 256, maxPayload: 1024}
	f.Fuzz(func(t *testing.T, data []byte) {
		var op routeOp
		for len(data) > 0 {
			n, err := parseRoute(data, lim, &op)
			if err != nil || n == 0 {
				return
			}
			if n > len(data) {
				t.Fatalf("used %d of %d", n, len(data))
			}
			if len(op.msg) > lim.maxPayload || op.hdrLen > len(op.msg) || len(op.queues) > maxRouteQueues {
				t.Fatalf("out of bounds: %+v", op)
			}
			data = data[n:]
		}
	})
}
