package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Operator mode: who may connect. Every failure must read "Authorization
// Violation" on the wire, with the reason only in the server log.

func TestOpAuthGoodAndBad(t *testing.T) {
	w := newOpWorld(t)
	acc := w.account("A", nil)
	n := w.startOpNode(t)

	good, _ := acc.user("alice", nil)
	nc := connectCreds(t, n.URL, good)
	sub := subscribeSync(t, nc, "greet")
	publish(t, nc, "greet", []byte("hi"))
	if m := nextMsg(t, sub); string(m.Data) != "hi" {
		t.Fatalf("got %q", m.Data)
	}

	expired, _ := acc.user("expired", func(uc *jwt.UserClaims) { uc.Expires = time.Now().Add(-time.Minute).Unix() })
	notYet, _ := acc.user("later", func(uc *jwt.UserClaims) { uc.NotBefore = time.Now().Add(time.Hour).Unix() })

	// A user of an account the resolver doesn't know.
	ghost := &opAccount{w: w}
	ghost.kp, _ = nkeys.CreateAccount()
	ghost.pub, _ = ghost.kp.PublicKey()
	ghostUser, _ := ghost.user("ghost", nil)

	// An account signed by another operator, served by the same resolver.
	other, _ := nkeys.CreateOperator()
	rogue := w.account("ROGUE", nil)
	rac := jwt.NewAccountClaims(rogue.pub)
	rtoken, _ := rac.Encode(other)
	w.mu.Lock()
	w.jwts[rogue.pub] = rtoken
	w.mu.Unlock()
	rogueUser, _ := rogue.user("rogue", nil)

	// A user signed by account B's key but claiming to be in account A.
	b := w.account("B", nil)
	forged, _ := b.user("forged", func(uc *jwt.UserClaims) { uc.IssuerAccount = acc.pub })

	// A bearer token the account does not allow.
	bearer, _ := acc.user("bearer", func(uc *jwt.UserClaims) { uc.BearerToken = true })
	acc.claims.Limits.DisallowBearer = true
	w.publish(acc)
	n2 := w.startOpNode(t) // loads A with bearer tokens disallowed

	for _, c := range []struct {
		name, url, creds string
	}{
		{"expired", n.URL, expired},
		{"not yet valid", n.URL, notYet},
		{"unknown account", n.URL, ghostUser},
		{"wrong operator", n.URL, rogueUser},
		{"issuer not of the account", n.URL, forged},
		{"bearer disallowed", n2.URL, bearer},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := dialCreds(c.url, c.creds, nil)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("connect: %v, want an authorization violation", err)
			}
		})
	}

	t.Run("bad signature", func(t *testing.T) {
		token := readUserJWT(t, good)
		wrong, _ := nkeys.CreateUser()
		_, err := nats.Connect(n.URL, nats.MaxReconnects(0), nats.UserJWT(
			func() (string, error) { return token, nil },
			func(nonce []byte) ([]byte, error) { return wrong.Sign(nonce) }))
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("connect: %v, want nats.ErrAuthorization", err)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		_, err := nats.Connect(n.URL, nats.MaxReconnects(0))
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("connect: %v, want nats.ErrAuthorization", err)
		}
	})
	t.Run("raw ops before CONNECT", func(t *testing.T) {
		rc := dialRaw(t, n.NatsAddr)
		rc.send("SUB > 1\r\n")
		rc.expect("-ERR 'Authorization Violation'")
		rc.expectClosed(2 * time.Second)
	})
	if !strings.Contains(n.out.String(), "authentication failed") {
		t.Errorf("the server log does not say why authentication failed:\n%s", tail(n.out.String(), 20))
	}
}

// readUserJWT reads the JWT out of a creds file.
func readUserJWT(t testing.TB, creds string) string {
	t.Helper()
	b := mustRead(t, creds)
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestOpAccountsAreIsolated(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	b := w.account("B", nil)
	n := w.startOpNode(t)
	ca, _ := a.user("a", nil)
	cb, _ := b.user("b", nil)
	na := connectCreds(t, n.URL, ca)
	nb := connectCreds(t, n.URL, cb)

	subB := subscribeSync(t, nb, "orders.>")
	subA := subscribeSync(t, na, "orders.>")
	publish(t, na, "orders.1", []byte("a's order"))
	if m := nextMsg(t, subA); string(m.Data) != "a's order" {
		t.Fatalf("A got %q", m.Data)
	}
	// B's wildcard saw nothing of A's traffic: a round trip through B's
	// own connection proves anything A's publish caused has arrived.
	roundTrip(t, nb)
	if m, err := subB.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatalf("account B received %q on %q from account A", m.Data, m.Subject)
	}
	// Requests to the other account's services find no responders.
	if _, err := na.Subscribe("svc.help", func(m *nats.Msg) { m.Respond([]byte("a")) }); err != nil {
		t.Fatal(err)
	}
	flush(t, na)
	if _, err := nb.Request("svc.help", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request across accounts: %v, want no responders", err)
	}
}

func TestOpPermissions(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	n := w.startOpNode(t)
	creds, _ := a.user("limited", func(uc *jwt.UserClaims) {
		uc.Pub.Allow.Add("orders.>", "_INBOX.>")
		uc.Pub.Deny.Add("orders.secret")
		uc.Sub.Allow.Add("orders.*", "_INBOX.>", "events.>")
		uc.Sub.Deny.Add("events.private")
	})
	free, _ := a.user("free", nil)
	errs := make(chan error, 16)
	nc, err := dialCreds(n.URL, creds, errs)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	other := connectCreds(t, n.URL, free)

	expectErr := func(what, want string) {
		t.Helper()
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
				t.Fatalf("%s: got %v, want %q", what, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no error reported, want %q", what, want)
		}
	}

	watch := subscribeSync(t, other, ">")
	nc.Publish("billing.x", []byte("no"))
	expectErr("publish outside allow", `Permissions Violation for Publish to "billing.x"`)
	nc.Publish("orders.secret", []byte("no"))
	expectErr("publish to denied", `Permissions Violation for Publish to "orders.secret"`)
	nc.Publish("orders.ok", []byte("yes"))
	flush(t, nc)
	if m := nextMsg(t, watch); m.Subject != "orders.ok" {
		t.Fatalf("a denied publish was delivered: %q", m.Subject)
	}

	nc.SubscribeSync("billing.>")
	expectErr("subscribe outside allow", `Permissions Violation for Subscription to "billing.>"`)
	nc.SubscribeSync("events.private")
	expectErr("subscribe to denied", `Permissions Violation for Subscription to "events.private"`)

	// A wildcard overlapping a denied subject is allowed, but the denied
	// messages are kept from it.
	ev := subscribeSync(t, nc, "events.>")
	publish(t, other, "events.private", []byte("hidden"))
	publish(t, other, "events.public", []byte("shown"))
	if m := nextMsg(t, ev); m.Subject != "events.public" {
		t.Fatalf("subscriber with a deny got %q", m.Subject)
	}
	// The connection stays up through violations.
	flush(t, nc)
}

func TestOpAllowResponses(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	n := w.startOpNode(t)
	svc, _ := a.user("svc", func(uc *jwt.UserClaims) {
		uc.Sub.Allow.Add("help")
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	})
	cli, _ := a.user("client", nil)
	errs := make(chan error, 4)
	sc, err := dialCreds(n.URL, svc, errs)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sc.Subscribe("help", func(m *nats.Msg) {
		m.Respond([]byte("answer"))
		m.Respond([]byte("a second answer is over max"))
	})
	flush(t, sc)
	cc := connectCreds(t, n.URL, cli)
	resp, err := cc.Request("help", nil, 5*time.Second)
	if err != nil || string(resp.Data) != "answer" {
		t.Fatalf("request: %v %+v", err, resp)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation for Publish") {
			t.Fatalf("second reply: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second reply was allowed past max")
	}
	// Publishing anywhere else is not a response.
	sc.Publish("help", nil)
	if err := <-errs; !strings.Contains(err.Error(), `Publish to "help"`) {
		t.Fatalf("publish: %v", err)
	}
}

func TestOpRevocationAndLimits(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", func(ac *jwt.AccountClaims) { ac.Limits.Conn = 3 })
	n := w.startOpNode(t)
	sysCreds, _ := w.sys.user("sys", nil)
	sys := connectCreds(t, n.URL, sysCreds)

	victim, victimPub := a.user("victim", nil)
	keep, _ := a.user("keep", nil)
	closed := make(chan struct{})
	vc := connectCreds(t, n.URL, victim, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	kc := connectCreds(t, n.URL, keep)
	roundTrip(t, vc)

	// Revoke the victim: connected, it is cut off at once; it cannot come
	// back; others stay.
	a.claims.Revoke(victimPub)
	w.pushClaims(t, sys, a)
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("revoked user still connected a second after the claim update")
	}
	if _, err := dialCreds(n.URL, victim, nil); err == nil {
		t.Fatal("revoked user reconnected")
	}
	roundTrip(t, kc)

	// Connection limit: 3 in all (kc plus two), the next is refused.
	connectCreds(t, n.URL, keep)
	connectCreds(t, n.URL, keep)
	_, err := dialCreds(n.URL, keep, nil)
	if err == nil || !strings.Contains(err.Error(), "maximum account active connections exceeded") {
		t.Fatalf("4th connection: %v", err)
	}
	// Raising the limit live lets it in.
	a.claims.Limits.Conn = 4
	w.pushClaims(t, sys, a)
	connectCreds(t, n.URL, keep)

	// A claim update for one account cannot be smuggled under another's
	// subject, nor can a tenant push claims at all.
	msg, err := sys.Request("$SYS.REQ.ACCOUNT."+w.sys.pub+".CLAIMS.UPDATE", []byte(a.sign()), 5*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), `"error"`) {
		t.Fatalf("mismatched claim update: %v %s", err, msg.Data)
	}
	a.claims.Limits.Conn = -1
	if _, err := kc.Request("$SYS.REQ.ACCOUNT."+a.pub+".CLAIMS.UPDATE", []byte(a.sign()), 500*time.Millisecond); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("tenant pushing claims: %v, want no responders", err)
	}
}

func TestOpUserLimits(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", func(ac *jwt.AccountClaims) { ac.Limits.Payload = 1024 })
	n := w.startOpNode(t)
	creds, _ := a.user("u", func(uc *jwt.UserClaims) { uc.Limits.Subs = 2 })
	errs := make(chan error, 4)
	nc, err := dialCreds(n.URL, creds, errs)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subscribeSync(t, nc, "a")
	subscribeSync(t, nc, "b")
	nc.SubscribeSync("c")
	if err := <-errs; !strings.Contains(err.Error(), "maximum subscriptions exceeded") {
		t.Fatalf("third sub: %v", err)
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	nc.Publish("a", make([]byte, 2048))
	nc.Flush()
	recvChan(t, closed, "close after a payload over the account's max_payload")

	cidr, _ := a.user("elsewhere", func(uc *jwt.UserClaims) { uc.Limits.Src.Add("10.1.2.0/24") })
	if _, err := dialCreds(n.URL, cidr, nil); err == nil {
		t.Fatal("connected from outside the user's allowed networks")
	}
	local, _ := a.user("local", func(uc *jwt.UserClaims) { uc.Limits.Src.Add("127.0.0.0/8") })
	connectCreds(t, n.URL, local)

	now := time.Now().UTC()
	hours, _ := a.user("hours", func(uc *jwt.UserClaims) {
		uc.Limits.Locale = "UTC"
		uc.Limits.Times = []jwt.TimeRange{{Start: now.Add(2 * time.Hour).Format("15:04:05"), End: now.Add(3 * time.Hour).Format("15:04:05")}}
	})
	if _, err := dialCreds(n.URL, hours, nil); err == nil {
		t.Fatal("connected outside the user's allowed hours")
	}
}
