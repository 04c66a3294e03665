package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
)

// Exports and imports between accounts, as account JWTs declare them.
// Each scenario runs against Contrail and against nats-server in
// operator mode (MEMORY resolver, accounts preloaded), with the same
// accounts, and must read the same on both.
//
// Proving that something did not cross needs no waiting: a publisher's
// messages are routed in order, so once a later message that does cross
// (a sentinel) arrives, an earlier one that would have crossed has
// arrived too; and once both ends have flushed, a message queued for a
// subscriber has reached its client.

// importServer is a server, Contrail or nats-server, serving a world's
// accounts, with a system account connection for claim updates.
type importServer struct {
	w   *opWorld
	url string
	sys *nats.Conn
}

// startImportServer starts Contrail (ref false) or nats-server (ref true)
// for the world's accounts as they are now.
func startImportServer(t *testing.T, w *opWorld, ref bool) *importServer {
	t.Helper()
	var url string
	if ref {
		url = w.startRef(t).URL
	} else {
		url = w.startOpNode(t).URL
	}
	sysCreds, _ := w.sys.user("sys", nil)
	return &importServer{w: w, url: url, sys: connectCreds(t, url, sysCreds)}
}

// push sends the account's current claims as a claim update.
func (s *importServer) push(t *testing.T, a *opAccount) {
	t.Helper()
	s.w.pushClaims(t, s.sys, a)
}

// conn connects a new user of the account.
func (s *importServer) conn(t *testing.T, a *opAccount, name string) *nats.Conn {
	t.Helper()
	creds, _ := a.user(name, nil)
	return connectCreds(t, s.url, creds)
}

// onBoth runs a scenario against Contrail and against nats-server.
func onBoth(t *testing.T, scenario func(t *testing.T, ref bool)) {
	t.Run("contrail", func(t *testing.T) { scenario(t, false) })
	t.Run("nats-server", func(t *testing.T) { scenario(t, true) })
}

// expectSubjects reads len(want) messages and checks their subjects.
func expectSubjects(t *testing.T, sub *nats.Subscription, want ...string) []*nats.Msg {
	t.Helper()
	var msgs []*nats.Msg
	for _, w := range want {
		m := nextMsg(t, sub)
		if m.Subject != w {
			t.Fatalf("got %q (%q), want %q", m.Subject, m.Data, w)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// expectNothing checks a subscription holds no message once every given
// connection has flushed (their publishes were processed, and what they
// caused was queued to sub's connection before its own flush returned).
func expectNothing(t *testing.T, sub *nats.Subscription, flushed ...*nats.Conn) {
	t.Helper()
	for _, nc := range flushed {
		flush(t, nc)
	}
	if n, _, _ := sub.Pending(); n != 0 {
		m, _ := sub.NextMsg(0)
		t.Fatalf("%d unexpected message(s) on %q, first %q", n, sub.Subject, m.Subject)
	}
}

// expectNoResponders checks a request finds nobody.
func expectNoResponders(t *testing.T, nc *nats.Conn, subj string) {
	t.Helper()
	if m, err := nc.Request(subj, nil, ioTimeout); !errors.Is(err, nats.ErrNoResponders) {
		var data string
		if m != nil {
			data = string(m.Data)
		}
		t.Fatalf("request to %q: %v %q, want no responders", subj, err, data)
	}
}

// activationFor issues an activation token of the exporter for importer.
func activationFor(t *testing.T, exporter *opAccount, importer string, kind jwt.ExportType, subj string) string {
	t.Helper()
	act := jwt.NewActivationClaims(importer)
	act.ImportSubject = jwt.Subject(subj)
	act.ImportType = kind
	token, err := act.Encode(exporter.kp)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestOpImportStream(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "orders.>"},
				&jwt.Export{Type: jwt.Stream, Subject: "metrics.*.*"})
		})
		b := w.account("B", func(ac *jwt.AccountClaims) {
			ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "orders.>", LocalSubject: "a.orders.>"},
				&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "metrics.*.*", LocalSubject: "m.$2.$1"})
		})
		c := w.account("C", nil)
		s := startImportServer(t, w, ref)
		na, nb, nc := s.conn(t, a, "a"), s.conn(t, b, "b"), s.conn(t, c, "c")
		allA, allB, allC := subscribeSync(t, na, ">"), subscribeSync(t, nb, ">"), subscribeSync(t, nc, ">")

		publish(t, na, "orders.1", []byte("o1"))
		publish(t, na, "private.1", nil)
		publish(t, na, "metrics.cpu.h1", nil)
		msgs := expectSubjects(t, allB, "a.orders.1", "m.h1.cpu")
		if string(msgs[0].Data) != "o1" {
			t.Fatalf("payload %q", msgs[0].Data)
		}
		expectSubjects(t, allA, "orders.1", "private.1", "metrics.cpu.h1")
		// A third account sees nothing.
		expectNothing(t, allC, na, nc)

		// Imports run one way: the importer's local subjects stay home.
		publish(t, nb, "a.orders.2", nil)
		publish(t, nb, "orders.2", nil)
		expectSubjects(t, allB, "a.orders.2", "orders.2")
		expectNothing(t, allA, nb, na)
	})
}

func TestOpImportService(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Service, Subject: "help.>"})
		})
		b := w.account("B", func(ac *jwt.AccountClaims) {
			ac.Imports.Add(&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "help.>", LocalSubject: "ask.>"})
		})
		c := w.account("C", nil)
		s := startImportServer(t, w, ref)
		na, nb, nc := s.conn(t, a, "a"), s.conn(t, b, "b"), s.conn(t, c, "c")

		seen := make(chan *nats.Msg, 4)
		responder, err := na.Subscribe("help.>", func(m *nats.Msg) {
			seen <- m
			m.Respond([]byte("re: " + m.Subject))
		})
		if err != nil {
			t.Fatal(err)
		}
		flush(t, na)

		resp, err := nb.Request("ask.time", []byte("q"), ioTimeout)
		if err != nil {
			t.Fatalf("request across the import: %v", err)
		}
		if string(resp.Data) != "re: help.time" {
			t.Fatalf("response %q", resp.Data)
		}
		req := recvChan(t, seen, "the request at the service")
		if !strings.HasPrefix(req.Reply, "_R_.") || strings.HasPrefix(req.Reply, "_INBOX.") {
			t.Fatalf("the service saw reply %q, want a rewritten _R_ subject", req.Reply)
		}
		var info struct {
			Account string `json:"acc"`
		}
		if err := json.Unmarshal([]byte(req.Header.Get("Nats-Request-Info")), &info); err != nil || info.Account != b.pub {
			t.Fatalf("Nats-Request-Info %q (%v), want acc %s", req.Header.Get("Nats-Request-Info"), err, b.pub)
		}
		// The response route is gone once answered: a second response
		// to the same reply reaches nobody, and nothing leaks to others.
		late := subscribeSync(t, nb, ">")
		publish(t, na, req.Reply, []byte("late"))
		expectNothing(t, late, na, nb)
		// (A no-responders notice goes to the requester's first matching
		// subscription: keep ">" out of the way of the requests below.)
		if err := late.Unsubscribe(); err != nil {
			t.Fatal(err)
		}

		// Only the import's subjects cross: the exporter's subject
		// itself, from the importer, or anything from a third account,
		// finds no responders.
		expectNoResponders(t, nb, "help.time")
		expectNoResponders(t, nc, "ask.time")
		expectNoResponders(t, nc, "help.time")
		// Several requests in flight, answered in turn.
		for i := range 20 {
			if _, err := nb.Request("ask.n", []byte{byte(i)}, ioTimeout); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			<-seen
		}

		// Nobody serving the import: no responders, as for a local request.
		if err := responder.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		flush(t, na)
		expectNoResponders(t, nb, "ask.time")
	})
}

func TestOpImportPrivate(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "secret.>", TokenReq: true},
				&jwt.Export{Type: jwt.Service, Subject: "psvc", TokenReq: true},
				&jwt.Export{Type: jwt.Stream, Subject: "pub.>"})
		})
		imports := func(token func(importer string, kind jwt.ExportType, subj string) string) func(*jwt.AccountClaims) {
			return func(ac *jwt.AccountClaims) {
				ac.Imports.Add(
					&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "secret.>", Token: token(ac.Subject, jwt.Stream, "secret.>")},
					&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "psvc", Token: token(ac.Subject, jwt.Service, "psvc")},
					&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "pub.>"})
			}
		}
		noToken := w.account("NOTOKEN", imports(func(string, jwt.ExportType, string) string { return "" }))
		holder := w.account("HOLDER", imports(func(i string, k jwt.ExportType, s string) string { return activationFor(t, a, i, k, s) }))
		s := startImportServer(t, w, ref)
		na, nn, nh := s.conn(t, a, "a"), s.conn(t, noToken, "n"), s.conn(t, holder, "h")
		if _, err := na.Subscribe("psvc", func(m *nats.Msg) { m.Respond([]byte("private answer")) }); err != nil {
			t.Fatal(err)
		}
		allN, allH := subscribeSync(t, nn, ">"), subscribeSync(t, nh, ">")

		publish(t, na, "secret.1", nil)
		publish(t, na, "pub.sentinel", nil)
		expectSubjects(t, allH, "secret.1", "pub.sentinel")
		// Without a token the private stream did not cross: the public
		// sentinel published after it is the first thing to arrive.
		expectSubjects(t, allN, "pub.sentinel")

		if _, err := nh.Request("psvc", nil, ioTimeout); err != nil {
			t.Fatalf("request with an activation token: %v", err)
		}
		if err := allN.Unsubscribe(); err != nil { // keep ">" away from the request's inbox
			t.Fatal(err)
		}
		expectNoResponders(t, nn, "psvc")
	})
}

func TestOpImportOfWhatIsNotExported(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "pub.>"},
				&jwt.Export{Type: jwt.Service, Subject: "svc.open"})
		})
		b := w.account("B", func(ac *jwt.AccountClaims) {
			ac.Imports.Add(
				&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "private.>"},
				&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: ">"},
				&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "svc.closed"},
				&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "pub.>"})
		})
		s := startImportServer(t, w, ref)
		na, nb := s.conn(t, a, "a"), s.conn(t, b, "b")
		if _, err := na.Subscribe("svc.>", func(m *nats.Msg) { m.Respond([]byte("leaked")) }); err != nil {
			t.Fatal(err)
		}
		allB := subscribeSync(t, nb, ">")
		publish(t, na, "private.1", nil)
		publish(t, na, "other", nil)
		publish(t, na, "pub.sentinel", nil)
		expectSubjects(t, allB, "pub.sentinel")
		if err := allB.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		expectNoResponders(t, nb, "svc.closed")
		expectNoResponders(t, nb, "svc.open")
	})
}

func TestOpImportClaimUpdates(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "feed.>"},
				&jwt.Export{Type: jwt.Service, Subject: "svc"},
				&jwt.Export{Type: jwt.Stream, Subject: "sentinel"})
		})
		feed := &jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "feed.>"}
		svc := &jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "svc"}
		sentinel := &jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "sentinel"}
		b := w.account("B", func(ac *jwt.AccountClaims) { ac.Imports.Add(feed, svc, sentinel) })
		s := startImportServer(t, w, ref)
		na, nb := s.conn(t, a, "a"), s.conn(t, b, "b")
		if _, err := na.Subscribe("svc", func(m *nats.Msg) { m.Respond([]byte("ok")) }); err != nil {
			t.Fatal(err)
		}
		flush(t, na)
		feedB, sentB := subscribeSync(t, nb, "feed.>"), subscribeSync(t, nb, "sentinel")

		crosses := func(want bool) {
			t.Helper()
			publish(t, na, "feed.1", nil)
			publish(t, na, "sentinel", nil)
			nextMsg(t, sentB)
			if want {
				expectSubjects(t, feedB, "feed.1")
			} else {
				expectNothing(t, feedB)
			}
			if _, err := nb.Request("svc", nil, ioTimeout); want && err != nil {
				t.Fatalf("request: %v", err)
			} else if !want && !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("request after the import was removed: %v, want no responders", err)
			}
		}
		crosses(true)

		// The importer drops the imports: they stop at once.
		b.claims.Imports = jwt.Imports{sentinel}
		s.push(t, b)
		crosses(false)

		// Added back, they work again.
		b.claims.Imports = jwt.Imports{feed, svc, sentinel}
		s.push(t, b)
		crosses(true)

		// The exporter withdraws the exports: the imports stop too.
		a.claims.Exports = jwt.Exports{{Type: jwt.Stream, Subject: "sentinel"}}
		s.push(t, a)
		crosses(false)
	})
}

// TestOpImportLoadsAccounts: an import naming an account the node has not
// loaded loads it, and accounts importing from each other load without
// looping; each message crosses once.
func TestOpImportLoadsAccounts(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	b := w.account("B", nil)
	a.claims.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "from.a.>"}, &jwt.Export{Type: jwt.Service, Subject: "svc.a"})
	b.claims.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "from.b.>"}, &jwt.Export{Type: jwt.Service, Subject: "svc.b"})
	a.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: b.pub, Subject: "from.b.>"},
		&jwt.Import{Type: jwt.Service, Account: b.pub, Subject: "svc.b"})
	b.claims.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "from.a.>"},
		&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "svc.a"})
	w.publish(a)
	w.publish(b)
	s := startImportServer(t, w, false)

	// Only B's user connects: B's imports load A.
	nb := s.conn(t, b, "b")
	allB := subscribeSync(t, nb, "from.>")
	if _, err := nb.Subscribe("svc.b", func(m *nats.Msg) { m.Respond([]byte("b")) }); err != nil {
		t.Fatal(err)
	}
	flush(t, nb)
	na := s.conn(t, a, "a")
	allA := subscribeSync(t, na, "from.>")
	if _, err := na.Subscribe("svc.a", func(m *nats.Msg) { m.Respond([]byte("a")) }); err != nil {
		t.Fatal(err)
	}
	flush(t, na)

	publish(t, na, "from.a.1", nil)
	flush(t, na) // from.a.1 is routed before from.b.1 is sent
	publish(t, nb, "from.b.1", nil)
	expectSubjects(t, allB, "from.a.1", "from.b.1")
	expectSubjects(t, allA, "from.a.1", "from.b.1")
	expectNothing(t, allA, na, nb)
	expectNothing(t, allB, na, nb)
	for _, c := range []struct {
		nc   *nats.Conn
		subj string
		want string
	}{{na, "svc.b", "b"}, {nb, "svc.a", "a"}} {
		m, err := c.nc.Request(c.subj, nil, ioTimeout)
		if err != nil || string(m.Data) != c.want {
			t.Fatalf("request %s: %v", c.subj, err)
		}
	}
}

// TestOpImportResponseTypes: a Stream service answers a request many
// times through the import; a Singleton one only once.
func TestOpImportResponseTypes(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Service, Subject: "many", ResponseType: jwt.ResponseTypeStream},
				&jwt.Export{Type: jwt.Service, Subject: "one"})
		})
		b := w.account("B", func(ac *jwt.AccountClaims) {
			ac.Imports.Add(&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "many"},
				&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "one"})
		})
		s := startImportServer(t, w, ref)
		na, nb := s.conn(t, a, "a"), s.conn(t, b, "b")
		answered := make(chan struct{}, 1)
		if _, err := na.Subscribe("*", func(m *nats.Msg) {
			for i := range 3 {
				m.Respond([]byte{byte('0' + i)})
			}
			answered <- struct{}{}
		}); err != nil {
			t.Fatal(err)
		}
		flush(t, na)
		for _, c := range []struct {
			subj string
			n    int
		}{{"many", 3}, {"one", 1}} {
			inbox := nats.NewInbox()
			sub := subscribeSync(t, nb, inbox)
			if err := nb.PublishRequest(c.subj, inbox, nil); err != nil {
				t.Fatal(err)
			}
			for range c.n {
				nextMsg(t, sub)
			}
			// The responder sent three answers; once they are flushed
			// they have all been routed.
			recvChan(t, answered, "the responder's answers")
			expectNothing(t, sub, na, nb)
		}
	})
}

// TestOpImportStreamInterest: an idle stream import is no responder. A
// request in the exporter that only the import would take gets the 503
// no-responders status; once the importer subscribes, the request
// crosses and is answered.
func TestOpImportStreamInterest(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "feed.>"},
				&jwt.Export{Type: jwt.Service, Subject: "svc.>"})
		})
		b := w.account("B", func(ac *jwt.AccountClaims) {
			ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "feed.>", LocalSubject: "a.feed.>"},
				&jwt.Import{Type: jwt.Service, Account: a.pub, Subject: "svc.>", LocalSubject: "a.svc.>"})
		})
		s := startImportServer(t, w, ref)
		na, nb := s.conn(t, a, "a"), s.conn(t, b, "b")

		expectNoResponders(t, na, "feed.x")
		// A service import with nobody serving in the exporter: the same.
		expectNoResponders(t, nb, "a.svc.x")

		sub := subscribeSync(t, nb, "a.feed.>")
		flush(t, nb)
		if _, err := na.Request("feed.x", []byte("ping"), 200*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("request with a subscriber behind the import: %v, want a timeout (it crossed; nobody answers)", err)
		}
		if m := nextMsg(t, sub); m.Subject != "a.feed.x" || string(m.Data) != "ping" {
			t.Fatalf("importer got %q %q", m.Subject, m.Data)
		}
	})
}

// TestOpImportAccountInfo: the account INFO of the system services lists
// the account's exports and the imports in force.
func TestOpImportAccountInfo(t *testing.T) {
	onBoth(t, func(t *testing.T, ref bool) {
		w := newOpWorld(t)
		a := w.account("A", func(ac *jwt.AccountClaims) {
			ac.Exports.Add(&jwt.Export{Type: jwt.Stream, Subject: "feed.>"})
		})
		b := w.account("B", func(ac *jwt.AccountClaims) {
			ac.Imports.Add(&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "feed.>", LocalSubject: "a.feed.>"},
				&jwt.Import{Type: jwt.Stream, Account: a.pub, Subject: "secret.>"})
		})
		s := startImportServer(t, w, ref)
		s.conn(t, a, "a")
		s.conn(t, b, "b")
		info := func(acc string) map[string]any {
			msg, err := s.sys.Request("$SYS.REQ.ACCOUNT."+acc+".INFO", nil, ioTimeout)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Data map[string]any `json:"data"`
			}
			if err := json.Unmarshal(msg.Data, &doc); err != nil || doc.Data == nil {
				t.Fatalf("INFO %s: %v %s", acc, err, msg.Data)
			}
			return doc.Data
		}
		exports, _ := info(a.pub)["exports"].([]any)
		if len(exports) != 1 || exports[0].(map[string]any)["subject"] != "feed.>" {
			t.Errorf("A's exports: %v", exports)
		}
		imports, _ := info(b.pub)["imports"].([]any)
		invalid := map[string]bool{}
		for _, i := range imports {
			m := i.(map[string]any)
			invalid[m["subject"].(string)] = m["invalid"] == true
		}
		// Only imports in force are listed (nats-server also lists its
		// own system imports, which Contrail serves without imports).
		if bad, listed := invalid["feed.>"]; !listed || bad {
			t.Errorf("B's imports (subject → invalid): %v, want feed.> in force", invalid)
		}
		if _, listed := invalid["secret.>"]; listed {
			t.Errorf("B's imports list one A does not export: %v", invalid)
		}
	})
}
