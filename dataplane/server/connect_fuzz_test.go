package server

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/tenant"
)

// discardConn is a connection that reads nothing and swallows writes.
type discardConn struct{ net.Conn }

func (discardConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (discardConn) Write(p []byte) (int, error)      { return len(p), nil }
func (discardConn) Close() error                     { return nil }
func (discardConn) SetDeadline(time.Time) error      { return nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }
func (discardConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
}

// opFixture is an operator-mode server (not listening) with one account
// and a user whose CONNECT is valid for a fixed nonce.
type opFixture struct {
	srv     *Server
	nonce   []byte
	connect []byte // a CONNECT body that authenticates
}

func newOpFixture(tb testing.TB) *opFixture {
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	opJWT, _ := oc.Encode(op)
	trust, err := tenant.NewTrust([]byte(opJWT))
	if err != nil {
		tb.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	acJWT, _ := ac.Encode(op)
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Pub.Allow.Add("allowed.>")
	uJWT, _ := uc.Encode(akp)

	opts := config.Default()
	opts.Host, opts.Port = "127.0.0.1", -1
	s, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.SetOperatorMode(OperatorMode{Trust: trust, Resolver: &memResolver{jwts: map[string]string{apub: acJWT}}}); err != nil {
		tb.Fatal(err)
	}
	nonce := []byte("fixed-nonce-for-fuzz")
	sig, _ := ukp.Sign(nonce)
	connect, _ := json.Marshal(map[string]any{
		"verbose": false, "pedantic": false, "jwt": uJWT, "sig": base64.RawURLEncoding.EncodeToString(sig),
		"headers": true, "protocol": 1,
	})
	return &opFixture{srv: s, nonce: nonce, connect: connect}
}

// tryConnect runs one CONNECT body through a fresh client and reports
// whether it authenticated.
func (f *opFixture) tryConnect(arg []byte) bool {
	c := f.srv.newClient(discardConn{})
	c.nonce = f.nonce
	done := make(chan struct{})
	go func() { c.flushLoop(); close(done) }()
	ok := c.processConnect(arg)
	authed := ok && c.authed.Load()
	c.close(reasonClientClosed, false)
	<-done
	return authed
}

func TestConnectAuthFixture(t *testing.T) {
	f := newOpFixture(t)
	if !f.tryConnect(f.connect) {
		t.Fatal("the valid CONNECT did not authenticate")
	}
	for _, bad := range []string{`{}`, `{"jwt":"x","sig":"y"}`, `not json`, `{"nkey":"UABC","sig":"AAAA"}`} {
		if f.tryConnect([]byte(bad)) {
			t.Fatalf("%s authenticated", bad)
		}
	}
	// Any change to the signed CONNECT's signature fails.
	var m map[string]any
	json.Unmarshal(f.connect, &m)
	m["sig"] = base64.RawURLEncoding.EncodeToString(make([]byte, 64))
	b, _ := json.Marshal(m)
	if f.tryConnect(b) {
		t.Fatal("a zero signature authenticated")
	}
}

// FuzzConnect feeds CONNECT bodies to an operator-mode server: whatever
// arrives, it must not panic, and nothing but the valid credentials may
// authenticate.
func FuzzConnect(f *testing.F) {
	fx := newOpFixture(f)
	f.Add(fx.connect)
	f.Add([]byte(`{"verbose":true,"jwt":"eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.AAAA","sig":"AAAA"}`))
	f.Add([]byte(`{"jwt":null,"sig":[],"nkey":{}}`))
	f.Add([]byte(`{"auth_token":"x","user":"a","pass":"b"}`))
	f.Fuzz(func(t *testing.T, arg []byte) {
		if fx.tryConnect(arg) {
			var m connectOpts
			if json.Unmarshal(arg, &m) != nil {
				t.Fatalf("unparseable CONNECT authenticated: %q", arg)
			}
			var want connectOpts
			json.Unmarshal(fx.connect, &want)
			if m.JWT != want.JWT {
				t.Fatalf("a CONNECT with another JWT authenticated: %q", arg)
			}
		}
	})
}

// TestCloseDuringAuthentication: a connection closed while its CONNECT
// is checked (the auth timeout fired during a slow resolver fetch) is not
// left counted in its account.
func TestCloseDuringAuthentication(t *testing.T) {
	f := newOpFixture(t)
	c := f.srv.newClient(discardConn{})
	c.nonce = f.nonce
	done := make(chan struct{})
	go func() { c.flushLoop(); close(done) }()
	c.close(reasonAuthTimeout, false)
	<-done
	if c.processConnect(f.connect) {
		t.Fatal("a closed connection authenticated")
	}
	for _, a := range f.srv.Accounts() {
		if n := a.NumConnections(); n != 0 {
			t.Fatalf("account %s counts %d connections after the client closed", a.Name(), n)
		}
	}
}
