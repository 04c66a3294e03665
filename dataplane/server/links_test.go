package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/tenant"
)

// Imports and exports, driven through internal subscriptions and
// server publishes: handlers run on the publishing goroutine, so every
// delivery has happened when Publish returns and the tests need no waits.

// linkWorld is an operator-mode server (not listening) whose account JWTs
// the test writes and rewrites.
type linkWorld struct {
	t     testing.TB
	op    nkeys.KeyPair
	srv   *Server
	ready chan *Account // AccountReady calls, when watched

	*memResolver
}

type linkAccount struct {
	w      *linkWorld
	kp     nkeys.KeyPair
	pub    string
	claims *jwt.AccountClaims
}

func (w *linkWorld) AccountReady(acc *Account) {
	if w.ready != nil {
		w.ready <- acc
	}
}

func (w *linkWorld) AccountGone(*Account) {}

func newLinkWorld(t testing.TB) *linkWorld {
	w := &linkWorld{t: t, memResolver: newMemResolver()}
	w.op, w.srv = newOperatorServer(t, w)
	w.srv.SetAccountHooks(w)
	return w
}

// newOperatorServer makes an operator and a server (not listening) in
// operator mode that trusts it and looks accounts up in res.
func newOperatorServer(t testing.TB, res Resolver) (nkeys.KeyPair, *Server) {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := tenant.NewTrust([]byte(opJWT))
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Default()
	opts.Host, opts.Port = "127.0.0.1", -1
	s, err := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetOperatorMode(OperatorMode{Trust: trust, Resolver: res}); err != nil {
		t.Fatal(err)
	}
	return op, s
}

// account makes an account and publishes its JWT on the resolver.
func (w *linkWorld) account(edit func(*jwt.AccountClaims)) *linkAccount {
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	a := &linkAccount{w: w, kp: kp, pub: pub, claims: jwt.NewAccountClaims(pub)}
	if edit != nil {
		edit(a.claims)
	}
	w.Store(pub, a.sign())
	return a
}

func (a *linkAccount) sign() string {
	a.claims.IssuedAt = 0
	token, err := a.claims.Encode(a.w.op)
	if err != nil {
		a.w.t.Fatal(err)
	}
	return token
}

// load loads the account on the server.
func (a *linkAccount) load() *Account {
	a.w.t.Helper()
	acc, err := a.w.srv.LookupAccount(context.Background(), a.pub)
	if err != nil {
		a.w.t.Fatal(err)
	}
	return acc
}

// update pushes the account's current claims to the server.
func (a *linkAccount) update() {
	a.w.t.Helper()
	if _, err := a.w.srv.UpdateAccountClaims(a.sign(), ""); err != nil {
		a.w.t.Fatal(err)
	}
}

// activation issues an activation token from a for the importer.
func (a *linkAccount) activation(importer string, kind jwt.ExportType, subj string, edit func(*jwt.ActivationClaims)) string {
	act := jwt.NewActivationClaims(importer)
	act.ImportSubject = jwt.Subject(subj)
	act.ImportType = kind
	if edit != nil {
		edit(act)
	}
	token, err := act.Encode(a.kp)
	if err != nil {
		a.w.t.Fatal(err)
	}
	return token
}

// got is one message an internal subscription received.
type got struct {
	subj, reply, hdr, data string
}

// capture subscribes in acc and records what arrives.
type capture struct {
	mu   sync.Mutex
	msgs []got
}

func listen(t *testing.T, acc *Account, filter string) *capture {
	t.Helper()
	c := &capture{}
	unsub, err := acc.SubscribeInternal(filter, func(subj, reply, hdr, msg []byte) {
		c.mu.Lock()
		c.msgs = append(c.msgs, got{string(subj), string(reply), string(hdr), string(msg)})
		c.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unsub)
	return c
}

func (c *capture) take() []got {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.msgs
	c.msgs = nil
	return out
}

// expect checks the capture received exactly the given subjects.
func (c *capture) expect(t *testing.T, what string, subjects ...string) []got {
	t.Helper()
	msgs := c.take()
	var have []string
	for _, m := range msgs {
		have = append(have, m.subj)
	}
	if strings.Join(have, " ") != strings.Join(subjects, " ") {
		t.Fatalf("%s: received %q, want %q", what, have, subjects)
	}
	return msgs
}

func streamExport(subj string) *jwt.Export {
	return &jwt.Export{Type: jwt.Stream, Subject: jwt.Subject(subj)}
}

func serviceExport(subj string) *jwt.Export {
	return &jwt.Export{Type: jwt.Service, Subject: jwt.Subject(subj)}
}

func TestStreamImportMapsSubjects(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) {
		ac.Exports.Add(streamExport("orders.>"), streamExport("metrics.*.*"), streamExport("alerts"))
	})
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(
			&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "orders.>", LocalSubject: "a.orders.>"},
			&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "metrics.*.*", LocalSubject: "m.$2.$1"},
			//lint:ignore SA1019 the deprecated prefix form is still honoured, as by nats-server
			&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "alerts", To: "ext"},
		)
	})
	other := w.account(nil)
	ea, ia, oa := exp.load(), imp.load(), other.load()

	local := listen(t, ia, ">")
	own := listen(t, ea, ">")
	third := listen(t, oa, ">")

	ea.Publish("orders.1", "", nil, []byte("o"))
	ea.Publish("metrics.cpu.host1", "", nil, []byte("m"))
	ea.Publish("alerts", "", nil, []byte("a"))
	ea.Publish("private.x", "", nil, []byte("p"))
	msgs := local.expect(t, "importer", "a.orders.1", "m.host1.cpu", "ext.alerts")
	if msgs[0].data != "o" {
		t.Fatalf("payload %q", msgs[0].data)
	}
	own.expect(t, "exporter", "orders.1", "metrics.cpu.host1", "alerts", "private.x")
	third.expect(t, "third account")

	// One way only: the importer publishing on the local subject stays home.
	ia.Publish("a.orders.2", "", nil, nil)
	own.expect(t, "exporter after importer publish")
	local.expect(t, "importer's own publish", "a.orders.2")
}

func TestStreamImportReachesConsumerDeliveries(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(streamExport("deliver.b")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "deliver.b"})
	})
	ea, ia := exp.load(), imp.load()
	inbox := listen(t, ia, "deliver.b")
	// A consumer delivers by its deliver subject, presenting the stored
	// message's subject.
	ea.Deliver("deliver.b", "orders.7", "$JS.ACK.s.c.1.7.1.0.0", nil, []byte("x"))
	m := inbox.expect(t, "importer", "orders.7")
	if m[0].reply != "$JS.ACK.s.c.1.7.1.0.0" {
		t.Fatalf("reply %q", m[0].reply)
	}
	if !ea.HasInterest("deliver.b") {
		t.Fatal("the exporter sees no interest in an imported deliver subject")
	}
}

func TestServiceImportRequestReply(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(serviceExport("help.*")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "help.*", LocalSubject: "ask.$1"})
	})
	ea, ia := exp.load(), imp.load()

	var seen []got
	unsub, err := ea.SubscribeInternal("help.*", func(subj, reply, hdr, msg []byte) {
		seen = append(seen, got{string(subj), string(reply), string(hdr), string(msg)})
		ea.Publish(string(reply), "", nil, []byte("answer to "+string(msg)))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	inbox := listen(t, ia, "_INBOX.>")

	ia.Publish("ask.math", "_INBOX.r1", []byte("NATS/1.0\r\nNats-Request-Info: {\"acc\":\"forged\"}\r\nX: 1\r\n\r\n"), []byte("q"))
	if len(seen) != 1 {
		t.Fatalf("the service saw %d requests", len(seen))
	}
	req := seen[0]
	if req.subj != "help.math" || !strings.HasPrefix(req.reply, "_R_.") || req.reply == "_INBOX.r1" {
		t.Fatalf("the service saw %+v", req)
	}
	want := "Nats-Request-Info: {\"acc\":\"" + imp.pub + "\"}\r\n"
	if !strings.Contains(req.hdr, want) || strings.Contains(req.hdr, "forged") || !strings.Contains(req.hdr, "X: 1\r\n") {
		t.Fatalf("request headers %q", req.hdr)
	}
	resp := inbox.expect(t, "requester", "_INBOX.r1")
	if resp[0].data != "answer to q" {
		t.Fatalf("response %q", resp[0].data)
	}
	// Singleton: the route ended with the response.
	if n := ea.responses().open(); n != 0 {
		t.Fatalf("%d response routes left open", n)
	}
	ea.Publish(req.reply, "", nil, []byte("late"))
	inbox.expect(t, "after the route ended")

	// A request nobody answers leaves no route behind.
	unsub()
	ia.Publish("ask.math", "_INBOX.r2", nil, []byte("q"))
	if n := ea.responses().open(); n != 0 {
		t.Fatalf("%d response routes left by an undelivered request", n)
	}
	// The importer cannot reach the exporter's other subjects by naming
	// them.
	own := listen(t, ea, ">")
	ia.Publish("help.math", "", nil, nil)
	ia.Publish("other", "", nil, nil)
	own.expect(t, "exporter")
}

func TestServiceResponseTypes(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) {
		s := serviceExport("stream")
		s.ResponseType = jwt.ResponseTypeStream
		c := serviceExport("chunked")
		c.ResponseType = jwt.ResponseTypeChunked
		ac.Exports.Add(s, c)
	})
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "stream"},
			&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "chunked"})
	})
	ea, ia := exp.load(), imp.load()
	var reply string
	unsub, err := ea.SubscribeInternal(">", func(_, r, _, _ []byte) {
		if len(r) > 0 { // a request, not one of the responses
			reply = string(r)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	inbox := listen(t, ia, "in.>")

	ia.Publish("stream", "in.s", nil, nil)
	for i := range 3 {
		ea.Publish(reply, "", nil, []byte{byte('0' + i)})
	}
	inbox.expect(t, "stream responses", "in.s", "in.s", "in.s")
	if n := ea.responses().open(); n != 1 {
		t.Fatalf("stream route: %d open, want 1 until its threshold", n)
	}

	ia.Publish("chunked", "in.c", nil, nil)
	ea.Publish(reply, "", nil, []byte("part"))
	ea.Publish(reply, "", nil, nil) // an empty message ends a chunked response
	ea.Publish(reply, "", nil, []byte("after the end"))
	inbox.expect(t, "chunked responses", "in.c", "in.c")
	if n := ea.responses().open(); n != 1 {
		t.Fatalf("after the chunked response ended: %d open, want the stream's 1", n)
	}
}

func TestResponseRoutesExpire(t *testing.T) {
	w := newLinkWorld(t)
	a := w.account(nil).load()
	b := w.account(nil).load()
	tbl := a.responses()
	now := time.Now()
	single, _ := tbl.add(b, []byte("r1"), jwt.ResponseTypeSingleton, time.Minute, now)
	stream, _ := tbl.add(b, []byte("r2"), jwt.ResponseTypeStream, time.Minute, now)
	if _, _, ok := tbl.take([]byte(stream), false, now.Add(50*time.Second)); !ok {
		t.Fatal("stream route gone before its threshold")
	}
	// The response pushed the stream route's deadline on; the singleton
	// one passed its own.
	if next := tbl.sweepLocked(now.Add(70 * time.Second)); !next.Equal(now.Add(110 * time.Second)) {
		t.Fatalf("next deadline %v", next.Sub(now))
	}
	if _, _, ok := tbl.take([]byte(single), false, now.Add(70*time.Second)); ok {
		t.Fatal("singleton route outlived its threshold")
	}
	if _, _, ok := tbl.take([]byte(stream), false, now.Add(111*time.Second)); ok {
		t.Fatal("stream route outlived its threshold after its last response")
	}
	if tbl.open() != 0 {
		t.Fatalf("%d routes left", tbl.open())
	}
}

func TestPrivateExportNeedsActivation(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(nil)
	skp, _ := nkeys.CreateAccount()
	signer, _ := skp.PublicKey()
	exp.claims.SigningKeys.Add(signer)
	exp.claims.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "secret.>", TokenReq: true})
	w.Store(exp.pub, exp.sign())
	ea := exp.load()

	byKey := func(kp nkeys.KeyPair, importer string) string {
		act := jwt.NewActivationClaims(importer)
		act.ImportSubject, act.ImportType, act.IssuerAccount = "secret.>", jwt.Stream, exp.pub
		token, err := act.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	stranger, _ := nkeys.CreateAccount()
	other, _ := nkeys.CreateAccount()
	otherPub, _ := other.PublicKey()
	cases := []struct {
		name    string
		subject string
		token   func(importer string) string
		want    string // "linked", "refused", or "bad jwt" (the account JWT itself is invalid)
	}{
		{"no token", "secret.>", func(string) string { return "" }, "refused"},
		{"valid", "secret.>", func(i string) string { return exp.activation(i, jwt.Stream, "secret.>", nil) }, "linked"},
		{"narrower import of a wider grant", "secret.x", func(i string) string { return exp.activation(i, jwt.Stream, ">", nil) }, "linked"},
		{"by a signing key", "secret.>", func(i string) string { return byKey(skp, i) }, "linked"},
		{"signed by a stranger", "secret.>", func(i string) string { return byKey(stranger, i) }, "refused"},
		{"expired", "secret.>", func(i string) string {
			return exp.activation(i, jwt.Stream, "secret.>", func(a *jwt.ActivationClaims) { a.Expires = time.Now().Add(-time.Minute).Unix() })
		}, "refused"},
		{"for another account", "secret.>", func(string) string { return exp.activation(otherPub, jwt.Stream, "secret.>", nil) }, "bad jwt"},
		{"for a service", "secret.>", func(i string) string { return exp.activation(i, jwt.Service, "secret.>", nil) }, "bad jwt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			imp := w.account(nil)
			imp.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: jwt.Subject(c.subject), Token: c.token(imp.pub)})
			w.Store(imp.pub, imp.sign())
			ia, err := w.srv.LookupAccount(context.Background(), imp.pub)
			if c.want == "bad jwt" {
				if err == nil {
					t.Fatal("an account JWT with this activation token loaded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in := listen(t, ia, ">")
			ea.Publish("secret.x", "", nil, nil)
			var want []string
			if c.want == "linked" {
				want = []string{"secret.x"}
			}
			in.expect(t, c.name, want...)
		})
	}
}

func TestExportRevocationWithdrawsImport(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) {
		ac.Exports.Add(&jwt.Export{Type: jwt.Service, Subject: "svc", TokenReq: true})
	})
	imp := w.account(nil)
	imp.claims.Imports.Add(&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "svc",
		Token: exp.activation(imp.pub, jwt.Service, "svc", nil)})
	w.Store(imp.pub, imp.sign())
	ea, ia := exp.load(), imp.load()
	got := listen(t, ea, "svc")
	ia.Publish("svc", "", nil, nil)
	got.expect(t, "before revocation", "svc")

	exp.claims.Exports[0].RevokeAt(imp.pub, time.Now())
	exp.update()
	ia.Publish("svc", "", nil, nil)
	got.expect(t, "after revocation")
}

func TestImportOfWhatIsNotExported(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) {
		ac.Exports.Add(streamExport("public.>"), serviceExport("svc.public"))
	})
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(
			&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: ">"},            // wider than the export
			&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "private.x"},    // not exported
			&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "svc.public"},   // a service, imported as a stream
			&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "svc.private"}, // not exported
			&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "public.x"},    // a stream, imported as a service
		)
	})
	ea, ia := exp.load(), imp.load()
	in := listen(t, ia, ">")
	out := listen(t, ea, ">")
	for _, s := range []string{"public.x", "private.x", "svc.public", "other"} {
		ea.Publish(s, "", nil, nil)
	}
	out.take()
	in.expect(t, "importer")
	for _, s := range []string{"svc.private", "public.x", "svc.public"} {
		ia.Publish(s, "", nil, nil)
	}
	in.take()
	out.expect(t, "exporter")
}

func TestClaimUpdatesRelinkLive(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(streamExport("feed"), serviceExport("svc")) })
	imp := w.account(nil)
	ea, ia := exp.load(), imp.load()
	in := listen(t, ia, "feed")
	svc := listen(t, ea, "svc")

	ea.Publish("feed", "", nil, nil)
	in.expect(t, "before the import")

	imp.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "feed"},
		&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "svc"})
	imp.update()
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "after adding the import", "feed")
	ia.Publish("svc", "", nil, nil)
	svc.expect(t, "after adding the service import", "svc")

	imp.claims.Imports = nil
	imp.update()
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "after removing the import")
	ia.Publish("svc", "", nil, nil)
	svc.expect(t, "after removing the service import")

	// The exporter withdrawing the export withdraws the import too.
	imp.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "feed"})
	imp.update()
	exp.claims.Exports = nil
	exp.update()
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "after the export was withdrawn")
	if n := ea.subs.Count() - selfServiceSubs; n != 1 { // the svc capture
		t.Fatalf("exporter index holds %d subscriptions, want 1", n)
	}
}

func TestImportLoadsTheExporter(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(streamExport("feed")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "feed"})
	})
	w.ready = make(chan *Account, 4)
	ia := imp.load()
	// Loading the importer started the exporter's load; once the
	// exporter's claims are in (the two loads finish in either order), the
	// import is in force.
	ready := map[string]*Account{}
	for range 2 {
		acc := <-w.ready
		ready[acc.name] = acc
	}
	ea := ready[exp.pub]
	if ea == nil || ready[imp.pub] != ia {
		t.Fatalf("ready accounts %v", ready)
	}
	in := listen(t, ia, "feed")
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "importer", "feed")
}

func TestImportCyclesDoNotLoop(t *testing.T) {
	w := newLinkWorld(t)
	a := w.account(nil)
	b := w.account(nil)
	a.claims.Exports.Add(streamExport("s.>"), serviceExport("svc"))
	b.claims.Exports.Add(streamExport("s.>"), serviceExport("svc"))
	a.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: b.pub, Subject: "s.>"},
		&jwt.Import{Type: jwt.Service, Account: b.pub, Subject: "svc"})
	b.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "s.>"},
		&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "svc"})
	w.Store(a.pub, a.sign())
	w.Store(b.pub, b.sign())
	w.ready = make(chan *Account, 4)
	aa := a.load()
	<-w.ready
	ba := b.load()
	<-w.ready

	inA, inB := listen(t, aa, ">"), listen(t, ba, ">")
	aa.Publish("s.1", "", nil, nil)
	inA.expect(t, "A", "s.1")
	inB.expect(t, "B", "s.1")

	// One of the two service imports is refused as a cycle; a request
	// crosses once and stops.
	aa.Publish("svc", "", nil, nil)
	ba.Publish("svc", "", nil, nil)
	if n := len(inA.take()) + len(inB.take()); n != 3 {
		t.Fatalf("two requests were seen %d times, want 3 (one crossed)", n)
	}
}

func TestServiceMapping(t *testing.T) {
	for _, c := range []struct{ local, to, pub, want string }{
		{"a.b", "x.y", "a.b", "x.y"},
		{"help.>", "help.>", "help.q.r", "help.q.r"},
		{"ask.>", "help.>", "ask.q.r", "help.q.r"},
		{"ask.$2.$1", "svc.*.*", "ask.b.a", "svc.a.b"},
		{"ask.*.*", "svc.*.*", "ask.a.b", "svc.a.b"},
	} {
		_, m, err := newServiceMap(c.local, c.to)
		if err != nil {
			t.Fatalf("%s→%s: %v", c.local, c.to, err)
		}
		if got := string(m.apply([]byte(c.pub))); got != c.want {
			t.Errorf("%s→%s maps %s to %s, want %s", c.local, c.to, c.pub, got, c.want)
		}
	}
	for _, c := range []struct{ from, to, pub, want string }{
		{"a.*", "p.a.*", "a.x", "p.a.x"},
		{"a.*.*", "b.$2.$1", "a.x.y", "b.y.x"},
		{"a.>", "b.>", "a.x.y", "b.x.y"},
		{"lit", "other", "lit", "other"},
	} {
		m, err := newStreamMap(c.from, c.to)
		if err != nil {
			t.Fatalf("%s→%s: %v", c.from, c.to, err)
		}
		if got := string(m.apply([]byte(c.pub))); got != c.want {
			t.Errorf("%s→%s maps %s to %s, want %s", c.from, c.to, c.pub, got, c.want)
		}
	}
}

func TestActivationExpiryWithdrawsImport(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) {
		ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "feed", TokenReq: true})
	})
	imp := w.account(nil)
	expires := time.Now().Add(time.Hour)
	imp.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "feed",
		Token: exp.activation(imp.pub, jwt.Stream, "feed", func(a *jwt.ActivationClaims) { a.Expires = expires.Unix() })})
	w.Store(imp.pub, imp.sign())
	ea, ia := exp.load(), imp.load()
	in := listen(t, ia, "feed")
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "while the activation is valid", "feed")

	reg := &w.srv.accts.links
	reg.mu.Lock()
	armed := ia.links.expiry != nil
	// What the expiry timer does when it fires, an hour on.
	w.srv.relinkLocked(ia, expires.Add(time.Second))
	reg.mu.Unlock()
	if !armed {
		t.Fatal("no relink scheduled for the activation's expiry")
	}
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "after the activation expired")
}

func TestAccountGoneAndBack(t *testing.T) {
	w := newLinkWorld(t)
	exp := w.account(func(ac *jwt.AccountClaims) { ac.Exports.Add(streamExport("feed"), serviceExport("svc")) })
	imp := w.account(func(ac *jwt.AccountClaims) {
		ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: exp.pub, Subject: "feed"},
			&jwt.Import{Type: jwt.Service, Account: exp.pub, Subject: "svc"})
	})
	ea, ia := exp.load(), imp.load()
	in := listen(t, ia, "feed")
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "linked", "feed")

	// The exporter's JWT expires: nothing crosses any more, and the
	// exporter's index no longer holds the importer's link.
	w.srv.expireAccount(ea, ea.claims.Load())
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "after the exporter expired")
	if n := ea.subs.Count() - selfServiceSubs; n != 0 {
		t.Fatalf("expired exporter still holds %d subscriptions", n)
	}
	// New claims bring it back.
	exp.update()
	ea.Publish("feed", "", nil, nil)
	in.expect(t, "after new claims", "feed")

	// The exporter is deleted: the link goes with it. Pushed again, it
	// is a new account, and the import follows it there.
	if err := w.srv.DeleteAccount(exp.pub); err != nil {
		t.Fatal(err)
	}
	if n := ea.subs.Count() - selfServiceSubs; n != 0 {
		t.Fatalf("deleted exporter still holds %d subscriptions", n)
	}
	w.Store(exp.pub, exp.sign())
	ea2 := exp.load()
	if ea2 == ea {
		t.Fatal("the account was not loaded anew")
	}
	ea2.Publish("feed", "", nil, nil)
	in.expect(t, "from the reloaded exporter", "feed")
	svc := listen(t, ea2, "svc")
	ia.Publish("svc", "", nil, nil)
	svc.expect(t, "request to the reloaded exporter", "svc")
	if n := ea.subs.Count() - selfServiceSubs; n != 0 {
		t.Fatalf("the old exporter still holds %d subscriptions", n)
	}
}
