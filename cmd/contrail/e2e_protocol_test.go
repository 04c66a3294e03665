package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestRawInfo(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	c := dialRaw(t, n.NatsAddr)
	if c.info["headers"] != true {
		t.Errorf("INFO headers = %v, want true", c.info["headers"])
	}
	if c.info["proto"] != float64(1) {
		t.Errorf("INFO proto = %v, want 1", c.info["proto"])
	}
	if c.info["max_payload"] != float64(1<<20) {
		t.Errorf("INFO max_payload = %v, want %d (the default)", c.info["max_payload"], 1<<20)
	}
	if id, ok := c.info["client_id"].(float64); !ok || id < 1 {
		t.Errorf("INFO client_id = %v, want a positive number", c.info["client_id"])
	}
	for _, k := range []string{"server_id", "version", "go", "host"} {
		if s, ok := c.info[k].(string); !ok || s == "" {
			t.Errorf("INFO %s = %v, want a non-empty string", k, c.info[k])
		}
	}
	_, port := hostPort(t, n.NatsAddr)
	if c.info["port"] != float64(port) {
		t.Errorf("INFO port = %v, want %d", c.info["port"], port)
	}
	if _, ok := c.info["tls_required"]; ok && c.info["tls_required"] != false {
		t.Errorf("INFO tls_required = %v on a plain node", c.info["tls_required"])
	}
	// A second connection gets a different client id.
	c2 := dialRaw(t, n.NatsAddr)
	if c2.info["client_id"] == c.info["client_id"] {
		t.Errorf("two connections share client_id %v", c.info["client_id"])
	}
}

func TestRawProtocolSession(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})

	t.Run("verbose", func(t *testing.T) {
		c := dialRaw(t, n.NatsAddr)
		c.send(`CONNECT {"verbose":true,"pedantic":false,"headers":true}` + "\r\n")
		c.expect("+OK")
		c.send("PING\r\n")
		c.expect("PONG")
		c.send("SUB v.a 1\r\n")
		c.expect("+OK")
		// As in nats-server: the PUB's +OK comes before the delivery it
		// causes.
		c.send("PUB v.a 2\r\nhi\r\n")
		c.expect("+OK")
		c.expectBytes("MSG v.a 1 2\r\nhi\r\n")
		c.send("UNSUB 1\r\n")
		c.expect("+OK")
		c.send("PING\r\n")
		c.expect("PONG")
	})

	t.Run("msg framing", func(t *testing.T) {
		c := connectRaw(t, n.NatsAddr, `{"verbose":false,"headers":true}`)
		c.send("SUB frame.* 7\r\nSUB frame.> q1 8\r\n")
		c.send("PUB frame.one 5\r\nhello\r\n")
		c.expectBytes("MSG frame.one 7 5\r\nhello\r\n")
		c.expectBytes("MSG frame.one 8 5\r\nhello\r\n")
		c.send("PUB frame.two reply.to 0\r\n\r\n")
		c.expectBytes("MSG frame.two 7 reply.to 0\r\n\r\n")
		c.expectBytes("MSG frame.two 8 reply.to 0\r\n\r\n")
		// Payloads are opaque: CRLF and protocol words inside them are data.
		c.send("PUB frame.a.b 12\r\nPING\r\nPONG\r\n\r\n")
		c.expectBytes("MSG frame.a.b 8 12\r\nPING\r\nPONG\r\n\r\n")
		// Verbs are case-insensitive.
		c.send("pub frame.lc 2\r\nok\r\nping\r\n")
		c.expectBytes("MSG frame.lc 7 2\r\nok\r\n")
		c.expectBytes("MSG frame.lc 8 2\r\nok\r\n")
		c.expect("PONG")
	})

	t.Run("unsub and auto-unsub", func(t *testing.T) {
		c := connectRaw(t, n.NatsAddr, `{"verbose":false}`)
		c.send("SUB au 1\r\nUNSUB 1 2\r\n")
		c.send("PUB au 1\r\na\r\nPUB au 1\r\nb\r\nPUB au 1\r\nc\r\nPING\r\n")
		c.expectBytes("MSG au 1 1\r\na\r\n")
		c.expectBytes("MSG au 1 1\r\nb\r\n")
		c.expect("PONG") // and not c
		c.send("SUB gone 2\r\nUNSUB 2\r\nPUB gone 1\r\nx\r\nPING\r\n")
		c.expect("PONG")
	})

	t.Run("hpub to hmsg", func(t *testing.T) {
		c := connectRaw(t, n.NatsAddr, `{"verbose":false,"headers":true}`)
		hdr := "NATS/1.0\r\nX-Key: v1\r\n\r\n" // 23 bytes
		c.send("SUB h.x 3\r\n")
		c.send("HPUB h.x 23 28\r\n" + hdr + "hello\r\n")
		c.expectBytes("HMSG h.x 3 23 28\r\n" + hdr + "hello\r\n")
		c.send("HPUB h.x my.reply 23 23\r\n" + hdr + "\r\n")
		c.expectBytes("HMSG h.x 3 my.reply 23 23\r\n" + hdr + "\r\n")
	})

	t.Run("headers false gets payload only", func(t *testing.T) {
		old := connectRaw(t, n.NatsAddr, `{"verbose":false,"headers":false}`)
		old.send("SUB legacy.x 9\r\nPING\r\n")
		old.expect("PONG")
		nc := connect(t, n.URL)
		m := nats.NewMsg("legacy.x")
		m.Header.Set("X-Dropped", "yes")
		m.Data = []byte("payload only")
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		old.expectBytes("MSG legacy.x 9 12\r\npayload only\r\n")
		// Publishing without headers still reaches it normally.
		publish(t, nc, "legacy.x", []byte("plain"))
		flush(t, nc)
		old.expectBytes("MSG legacy.x 9 5\r\nplain\r\n")
	})

	t.Run("nats.go headers reach raw header client", func(t *testing.T) {
		raw := connectRaw(t, n.NatsAddr, `{"verbose":false,"headers":true}`)
		raw.send("SUB hdr.y 4\r\nPING\r\n")
		raw.expect("PONG")
		nc := connect(t, n.URL)
		m := nats.NewMsg("hdr.y")
		m.Header.Set("A", "b")
		m.Data = []byte("x")
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		hdr := "NATS/1.0\r\nA: b\r\n\r\n"
		raw.expectBytes("HMSG hdr.y 4 " + strconv.Itoa(len(hdr)) + " " + strconv.Itoa(len(hdr)+1) + "\r\n" + hdr + "x\r\n")
	})
}

func TestGarbageProtocol(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	// A well-behaved client connected all along must not notice.
	observer := connect(t, n.URL)
	roundTrip(t, observer)

	cases := []struct {
		name    string
		connect bool // send CONNECT first
		send    string
		wantErr string
	}{
		{"unknown verb", false, "FOO BAR\r\n", "Unknown Protocol Operation"},
		{"unknown verb after connect", true, "FOO BAR\r\n", "Unknown Protocol Operation"},
		{"pub bad size", true, "PUB foo bar\r\n", "Unknown Protocol Operation"},
		{"pub negative size", true, "PUB foo -1\r\n", "Unknown Protocol Operation"},
		{"pub missing size", true, "PUB foo\r\n", "Unknown Protocol Operation"},
		{"payload longer than size", true, "PUB foo 3\r\nabcdef\r\n", "Unknown Protocol Operation"},
		{"sub without sid", true, "SUB foo\r\n", "Unknown Protocol Operation"},
		{"unsub without sid", true, "UNSUB\r\n", "Unknown Protocol Operation"},
		{"hpub header larger than total", true, "HPUB foo 10 5\r\n", "Unknown Protocol Operation"},
		{"connect not json", false, "CONNECT {nope\r\n", "Unknown Protocol Operation"},
		{"control line too long", true, "PUB " + strings.Repeat("a", 5000) + " 1\r\n", "maximum control line exceeded"},
		{"control line too long without newline", true, "SUB " + strings.Repeat("b", 8000), "maximum control line exceeded"},
		{"binary junk", false, "\x00\x01\x02\xff\r\n", "Unknown Protocol Operation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, n.NatsAddr)
			if tc.connect {
				c.send(`CONNECT {"verbose":false,"headers":true}` + "\r\nPING\r\n")
				c.expect("PONG")
			}
			c.send(tc.send)
			lines := c.expectClosed(ioTimeout)
			want := "-ERR '" + tc.wantErr + "'"
			if len(lines) == 0 || lines[0] != want {
				t.Errorf("server sent %q before closing, want %q", lines, want)
			}
			roundTrip(t, observer)
		})
	}
}

func TestMaxPayload(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodeOpts{})
	observer := connect(t, n.URL)
	obsSub := subscribeSync(t, observer, "big.>")

	t.Run("raw oversize pub", func(t *testing.T) {
		c := connectRaw(t, n.NatsAddr, `{"verbose":false}`)
		// Only the control line: the node must refuse on the size alone,
		// without waiting for (or buffering) 2 MB.
		c.send("PUB big.raw 2000000\r\n")
		lines := c.expectClosed(ioTimeout)
		if want := "-ERR 'Maximum Payload Violation'"; len(lines) == 0 || lines[0] != want {
			t.Errorf("server sent %q before closing, want %q", lines, want)
		}
	})

	t.Run("raw oversize hpub", func(t *testing.T) {
		c := connectRaw(t, n.NatsAddr, `{"verbose":false,"headers":true}`)
		c.send("HPUB big.raw 12 1048577\r\n")
		lines := c.expectClosed(ioTimeout)
		if want := "-ERR 'Maximum Payload Violation'"; len(lines) == 0 || lines[0] != want {
			t.Errorf("server sent %q before closing, want %q", lines, want)
		}
	})

	t.Run("exactly max payload is fine", func(t *testing.T) {
		nc := connect(t, n.URL)
		max := int(nc.MaxPayload())
		if max != 1<<20 {
			t.Fatalf("nats.go sees max_payload %d, want %d", max, 1<<20)
		}
		publish(t, nc, "big.max", make([]byte, max))
		flush(t, nc)
		if m := nextMsg(t, obsSub); len(m.Data) != max {
			t.Fatalf("observer got %d bytes, want %d", len(m.Data), max)
		}
	})

	t.Run("nats.go refuses oversize", func(t *testing.T) {
		nc := connect(t, n.URL)
		err := nc.Publish("big.go", make([]byte, nc.MaxPayload()+1))
		if !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("publish of max_payload+1: %v, want %v", err, nats.ErrMaxPayload)
		}
		roundTrip(t, nc)
	})

	roundTrip(t, observer)
	if _, err := obsSub.NextMsg(0); err == nil {
		t.Error("observer received an oversize message")
	}
}
