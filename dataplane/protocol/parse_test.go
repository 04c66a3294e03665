package protocol

import (
	"errors"
	"strings"
	"testing"
)

var lim = Limits{MaxControlLine: 4096, MaxPayload: 1 << 20}

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     Op
		n        int
		err      error
	}{
		{"pub", "PUB foo 5\r\nhello\r\n", Op{Kind: KindPub, Subject: []byte("foo"), Msg: []byte("hello")}, 18, nil},
		{"pub reply", "pub foo.bar _INBOX.1 2\r\nhi\r\n", Op{Kind: KindPub, Subject: []byte("foo.bar"), Reply: []byte("_INBOX.1"), Msg: []byte("hi")}, 28, nil},
		{"pub empty", "PUB foo 0\r\n\r\n", Op{Kind: KindPub, Subject: []byte("foo"), Msg: []byte{}}, 13, nil},
		{"pub tabs", "PUB\tfoo \t 1\r\nx\r\n", Op{Kind: KindPub, Subject: []byte("foo"), Msg: []byte("x")}, 16, nil},
		{"pub bare lf line", "PUB foo 1\nx\r\n", Op{Kind: KindPub, Subject: []byte("foo"), Msg: []byte("x")}, 13, nil},
		{"payload bare lf", "PUB foo 1\r\nx\nPING\r\n", Op{}, 0, ErrUnknownOp},
		{"hpub", "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", Op{Kind: KindHPub, Subject: []byte("foo"), HdrLen: 12, Msg: []byte("NATS/1.0\r\n\r\nhi")}, 32, nil},
		{"hpub reply", "HPUB foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n", Op{Kind: KindHPub, Subject: []byte("foo"), Reply: []byte("r"), HdrLen: 12, Msg: []byte("NATS/1.0\r\n\r\n")}, 32, nil},
		{"sub", "SUB foo.* 1\r\n", Op{Kind: KindSub, Subject: []byte("foo.*"), SID: []byte("1")}, 13, nil},
		{"sub queue", "SUB foo q 22\r\n", Op{Kind: KindSub, Subject: []byte("foo"), Queue: []byte("q"), SID: []byte("22")}, 14, nil},
		{"unsub", "UNSUB 1\r\n", Op{Kind: KindUnsub, SID: []byte("1")}, 9, nil},
		{"unsub max", "UNSUB 1 10\r\n", Op{Kind: KindUnsub, SID: []byte("1"), Max: 10}, 12, nil},
		{"ping", "PING\r\n", Op{Kind: KindPing}, 6, nil},
		{"pong lower", "pong\r\n", Op{Kind: KindPong}, 6, nil},
		{"connect", "CONNECT {\"verbose\":false}\r\n", Op{Kind: KindConnect, Arg: []byte(`{"verbose":false}`)}, 27, nil},
		{"partial line", "PUB foo", Op{}, 0, nil},
		{"partial payload", "PUB foo 5\r\nhel", Op{}, 0, nil},
		{"missing crlf", "PUB foo 5\r\nhelloXX", Op{}, 0, ErrUnknownOp},
		{"bad size", "PUB foo x\r\n", Op{}, 0, ErrUnknownOp},
		{"negative size", "PUB foo -1\r\n", Op{}, 0, ErrUnknownOp},
		{"too many args", "PUB a b c 1\r\n", Op{}, 0, ErrUnknownOp},
		{"unknown", "FOO bar\r\n", Op{}, 0, ErrUnknownOp},
		{"ping args", "PING x\r\n", Op{Kind: KindPing}, 8, nil},
		{"sub no sid", "SUB foo\r\n", Op{}, 0, ErrUnknownOp},
		{"hdr > total", "HPUB foo 10 5\r\n", Op{}, 0, ErrUnknownOp},
		{"oversize", "PUB foo 2000000\r\n", Op{}, 0, ErrMaxPayload},
		{"connect empty", "CONNECT\r\n", Op{}, 0, ErrUnknownOp},
		{"long line", "PUB " + strings.Repeat("a", 5000), Op{}, 0, ErrControlLine},
		{"long line complete", "SUB " + strings.Repeat("a", 5000) + " 1\r\n", Op{}, 0, ErrControlLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var op Op
			n, err := Parse([]byte(tt.in), lim, &op)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if n != tt.n {
				t.Fatalf("n = %d, want %d", n, tt.n)
			}
			if err != nil || n == 0 {
				return
			}
			if op.Kind != tt.want.Kind || string(op.Subject) != string(tt.want.Subject) ||
				string(op.Reply) != string(tt.want.Reply) || string(op.Queue) != string(tt.want.Queue) ||
				string(op.SID) != string(tt.want.SID) || op.Max != tt.want.Max || op.HdrLen != tt.want.HdrLen ||
				string(op.Msg) != string(tt.want.Msg) || string(op.Arg) != string(tt.want.Arg) {
				t.Fatalf("op = %+v, want %+v", op, tt.want)
			}
		})
	}
}

func TestParseStream(t *testing.T) {
	in := []byte("CONNECT {}\r\nSUB a 1\r\nPUB a 3\r\nabc\r\nPING\r\nUNSUB 1\r\n")
	kinds := []Kind{KindConnect, KindSub, KindPub, KindPing, KindUnsub}
	var op Op
	for i, want := range kinds {
		n, err := Parse(in, lim, &op)
		if err != nil || n == 0 {
			t.Fatalf("op %d: n=%d err=%v", i, n, err)
		}
		if op.Kind != want {
			t.Fatalf("op %d: kind %d, want %d", i, op.Kind, want)
		}
		in = in[n:]
	}
	if len(in) != 0 {
		t.Fatalf("left %q", in)
	}
}

func TestAppendMsgLine(t *testing.T) {
	got := string(AppendMsgLine(nil, []byte("foo"), []byte("1"), nil, -1, 5))
	if got != "MSG foo 1 5\r\n" {
		t.Fatalf("got %q", got)
	}
	got = string(AppendMsgLine(nil, []byte("foo"), []byte("1"), []byte("r"), 12, 14))
	if got != "HMSG foo 1 r 12 14\r\n" {
		t.Fatalf("got %q", got)
	}
}

func TestParseAllocs(t *testing.T) {
	buf := []byte("PUB foo.bar _INBOX.x 5\r\nhello\r\n")
	var op Op
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := Parse(buf, lim, &op); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %v times per call", allocs)
	}
}

func BenchmarkParsePub(b *testing.B) {
	buf := []byte("PUB foo.bar 128\r\n" + strings.Repeat("x", 128) + "\r\n")
	var op Op
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Parse(buf, lim, &op)
	}
}

// FuzzParse feeds arbitrary bytes through the parser the way a connection
// does; it must never panic or claim more bytes than it was given.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"PUB foo 5\r\nhello\r\n", "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
		"SUB foo q 1\r\nUNSUB 1 5\r\n", "CONNECT {\"echo\":true}\r\nPING\r\nPONG\r\n",
		"PUB foo 99999999999\r\n", "-ERR 'x'\r\n+OK\r\n",
	} {
		f.Add([]byte(s))
	}
	small := Limits{MaxControlLine: 64, MaxPayload: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		var op Op
		for len(data) > 0 {
			n, err := Parse(data, small, &op)
			if err != nil || n == 0 {
				return
			}
			if n > len(data) {
				t.Fatalf("consumed %d of %d", n, len(data))
			}
			if (op.Kind == KindPub || op.Kind == KindHPub) && (len(op.Msg) > small.MaxPayload || op.HdrLen > len(op.Msg)) {
				t.Fatalf("payload bounds: %d hdr %d", len(op.Msg), op.HdrLen)
			}
			data = data[n:]
		}
	})
}
