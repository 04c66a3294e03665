package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/tenant"
)

// sysWorld is an operator with a system account and a tenant account A,
// served by an in-process node whose resolver is a map.
type sysWorld struct {
	t        *testing.T
	op       nkeys.KeyPair
	srv      *Server
	sys, acc nkeys.KeyPair
	sysPub   string
	accPub   string

	*memResolver
}

// newSysWorld starts the node with its system services and mon as its
// Monitoring (nil: none).
func newSysWorld(t *testing.T, mon Monitoring) *sysWorld {
	w := &sysWorld{t: t, memResolver: newMemResolver()}
	w.op, _ = nkeys.CreateOperator()
	opPub, _ := w.op.PublicKey()
	w.sys, w.sysPub = w.newAccount("SYS")
	w.acc, w.accPub = w.newAccount("A")
	oc := jwt.NewOperatorClaims(opPub)
	oc.SystemAccount = w.sysPub
	opJWT, err := oc.Encode(w.op)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := tenant.NewTrust([]byte(opJWT))
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Default()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	if w.srv, err = New(opts, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if err := w.srv.SetOperatorMode(OperatorMode{Trust: trust, Resolver: w, SystemAccount: w.sysPub}); err != nil {
		t.Fatal(err)
	}
	if mon != nil {
		w.srv.SetMonitoring(mon)
	}
	if err := w.srv.StartSystemServices(); err != nil {
		t.Fatal(err)
	}
	if err := w.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go w.srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return w
}

func (w *sysWorld) newAccount(name string) (nkeys.KeyPair, string) {
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	token, err := ac.Encode(w.op)
	if err != nil {
		w.t.Fatal(err)
	}
	w.Store(pub, token)
	return kp, pub
}

// connect connects a new user of the account signed by kp.
func (w *sysWorld) connect(kp nkeys.KeyPair, name string) *nats.Conn {
	w.t.Helper()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	seed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	token, err := uc.Encode(kp)
	if err != nil {
		w.t.Fatal(err)
	}
	return connect(w.t, w.srv, nats.UserJWTAndSeed(token, string(seed)), nats.Name(name))
}

// request asks subj and decodes the reply.
func request(t *testing.T, nc *nats.Conn, subj, body string) map[string]any {
	t.Helper()
	msg, err := nc.Request(subj, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(msg.Data, &m); err != nil {
		t.Fatalf("%s: %v: %s", subj, err, msg.Data)
	}
	return m
}

func TestSysEventsComeInOrder(t *testing.T) {
	w := newSysWorld(t, nil)
	sys := w.connect(w.sys, "admin")
	sub, err := sys.SubscribeSync("$SYS.ACCOUNT." + w.accPub + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := w.connect(w.acc, "tenant")
	if err := nc.Publish("x", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	want := []struct {
		suffix string
		conns  float64
	}{{".CONNECT", -1}, {".SERVER.CONNS", 1}, {".DISCONNECT", -1}, {".SERVER.CONNS", 0}}
	for i, step := range want {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !strings.HasSuffix(m.Subject, step.suffix) {
			t.Fatalf("event %d on %s, want %s", i, m.Subject, step.suffix)
		}
		var ev map[string]any
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if step.conns >= 0 && ev["conns"] != step.conns {
			t.Errorf("event %d: conns %v, want %v", i, ev["conns"], step.conns)
		}
		if step.suffix == ".DISCONNECT" {
			sent := ev["sent"].(map[string]any)
			if sent["msgs"] != 1.0 || sent["bytes"] != 3.0 || ev["reason"] != reasonClientClosed {
				t.Errorf("disconnect event: %s", m.Data)
			}
		}
	}
}

// A client that closes before its connect hook runs (a revocation racing
// CONNECT) gets neither event: a disconnect is never announced alone.
func TestSysEventsSkipClientClosedBeforeConnect(t *testing.T) {
	w := newSysWorld(t, nil)
	acc, err := w.srv.LookupAccount(context.Background(), w.accPub)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{cid: 99, acc: acc, start: time.Now()}
	c.authed.Store(true)
	c.closed.Store(true)
	w.srv.accountDisconnected(c, reasonRevoked)
	w.srv.accountConnected(c)
	st := w.srv.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.mu.live) != 0 || len(st.mu.queue) != 0 {
		t.Fatalf("closed client recorded (%d) or announced (%d events)", len(st.mu.live), len(st.mu.queue))
	}
}

// fakeMonitoring answers every document with its endpoint and account,
// or with err.
type fakeMonitoring struct{ err error }

func (f fakeMonitoring) MonitorDoc(endpoint string, _ []byte, account string) (any, error) {
	if f.err != nil {
		return nil, f.err
	}
	return map[string]string{"endpoint": endpoint, "account": account}, nil
}

func TestSysRequestEnvelopeAndErrors(t *testing.T) {
	w := newSysWorld(t, fakeMonitoring{})
	sys := w.connect(w.sys, "admin")
	id := w.srv.ID()

	r := request(t, sys, "$SYS.REQ.ACCOUNT."+w.accPub+".CONNZ", "")
	data, _ := r["data"].(map[string]any)
	if data["endpoint"] != "CONNZ" || data["account"] != w.accPub || r["server"].(map[string]any)["id"] != id {
		t.Fatalf("account CONNZ: %v", r)
	}
	r = request(t, sys, "$SYS.REQ.SERVER.PING.VARZ", "not json")
	if e, _ := r["error"].(map[string]any); e == nil || e["code"] != 400.0 || r["data"] != nil {
		t.Fatalf("bad body: %v", r)
	}
	r = request(t, sys, "$SYS.REQ.SERVER."+id+".VARZ", `{"server_name":"`+w.srv.Name()+`"}`)
	if r["data"].(map[string]any)["endpoint"] != "VARZ" {
		t.Fatalf("VARZ by id: %v", r)
	}
	r = request(t, sys, "$SYS.REQ.ACCOUNT.PING.STATZ", `{"accounts":["`+w.sysPub+`"]}`)
	stz := r["data"].(map[string]any)["account_statz"].([]any)
	if len(stz) != 1 || stz[0].(map[string]any)["acc"] != w.sysPub {
		t.Fatalf("PING.STATZ: %v", r)
	}
}

// A request whose filter leaves this server out gets no answer; one
// that names it does.
func TestEventFilter(t *testing.T) {
	opts := config.Default()
	opts.Host, opts.ServerName = "10.0.0.1", "node-7"
	s, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.EnableJetStream("hub")
	for _, c := range []struct {
		f        eventFilter
		excluded bool
	}{
		{eventFilter{}, false},
		{eventFilter{Name: "node"}, false},
		{eventFilter{Name: "node", ExactMatch: true}, true},
		{eventFilter{Name: "node-7", ExactMatch: true}, false},
		{eventFilter{Name: "other"}, true},
		{eventFilter{Host: "10.0.0"}, false},
		{eventFilter{Cluster: "c1"}, true},
		{eventFilter{Tags: []string{"az:1"}}, true},
		{eventFilter{Domain: "hub"}, false},
		{eventFilter{Domain: "leaf"}, true},
	} {
		if got := c.f.excludes(s); got != c.excluded {
			t.Errorf("%+v: excluded %v, want %v", c.f, got, c.excluded)
		}
	}
}

func TestSysRequestMonitoringErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		code float64
	}{{ErrBadOptions, 400}, {errors.New("boom"), 500}} {
		w := newSysWorld(t, fakeMonitoring{err: c.err})
		r := request(t, w.connect(w.sys, "admin"), "$SYS.REQ.SERVER.PING.JSZ", "")
		if e, _ := r["error"].(map[string]any); e == nil || e["code"] != c.code || e["description"] != c.err.Error() {
			t.Errorf("%v: %v", c.err, r)
		}
	}
}

func TestUserInfoPermissions(t *testing.T) {
	p := newPermissions(jwt.Permissions{
		Pub:  jwt.Permission{Allow: jwt.StringList{"a.>"}, Deny: jwt.StringList{"a.b"}},
		Sub:  jwt.Permission{Allow: jwt.StringList{"_INBOX.>"}},
		Resp: &jwt.ResponsePermission{},
	})
	got, _ := json.Marshal(p.public())
	want := `{"publish":{"allow":["a.\u003e"],"deny":["a.b"]},"subscribe":{"allow":["_INBOX.\u003e"]},"responses":{"max":1,"ttl":120000000000}}`
	if string(got) != want {
		t.Fatalf("public permissions\n got %s\nwant %s", got, want)
	}
	if newPermissions(jwt.Permissions{}).public() != nil {
		t.Fatal("a user without permissions shows some")
	}
}

func TestUserInfoFromAnyAccount(t *testing.T) {
	w := newSysWorld(t, nil)
	nc := w.connect(w.acc, "alice")
	r := request(t, nc, subjUserInfo, "")
	data := r["data"].(map[string]any)
	if data["account"] != w.accPub || data["account_name"] != "A" || data["user_name"] != "alice" ||
		!strings.HasPrefix(data["user"].(string), "U") {
		t.Fatalf("user info: %v", r)
	}
}

func TestSysServicesNeedSystemAccount(t *testing.T) {
	opts := config.Default()
	s, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartSystemServices(); err != nil {
		t.Fatalf("open mode: %v", err)
	}
}
