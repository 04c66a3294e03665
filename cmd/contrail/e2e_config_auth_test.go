package main

import (
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"
)

// target is one server a compare test runs against.
type target struct{ name, url string }

// bothServers starts Contrail and nats-server v2.15.2 with the same
// config file; refArgs are extra nats-server flags.
func bothServers(t *testing.T, conf string, tls bool, refArgs ...string) []target {
	t.Helper()
	n := startNode(t, nodeOpts{config: conf, tls: tls})
	ref := startNatsServer(t, append([]string{"-c", writeFile(t, t.TempDir(), "ref.conf", conf)}, refArgs...)...)
	refURL := ref.URL
	if tls {
		refURL = strings.Replace(refURL, "nats://", "tls://", 1)
	}
	return []target{{"contrail", n.URL}, {"nats-server", refURL}}
}

// permErrors collects the asynchronous errors a connection is told.
func permErrors() (nats.Option, chan error) {
	errs := make(chan error, 8)
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }), errs
}

func refused(t *testing.T, what, url string, opts ...nats.Option) {
	t.Helper()
	nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0))...)
	if err == nil {
		nc.Close()
		t.Fatalf("%s: connected", what)
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("%s: %v, want %v", what, err, nats.ErrAuthorization)
	}
}

// TestConfigUserPassword: an authorization users list with a plain and a
// bcrypt password, default and per-user permissions and an auth
// timeout, run against both servers: the same clients get in, the same
// are refused, and a denied publish gets the same permissions violation.
func TestConfigUserPassword(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-pw"), 4)
	if err != nil {
		t.Fatal(err)
	}
	conf := `authorization {
  timeout: 1.5
  default_permissions: { publish: "pub.>", subscribe: ["pub.>", "_INBOX.>"] }
  users: [
    { user: plain, password: "plain-pw", permissions: { publish: { allow: ">", deny: "secret.>" } } }
    { user: hashed, password: "` + string(hash) + `" }
  ]
}
`
	for _, tg := range bothServers(t, conf, false) {
		t.Run(tg.name, func(t *testing.T) {
			errOpt, errs := permErrors()
			plain := connect(t, tg.url, nats.UserInfo("plain", "plain-pw"), errOpt)
			roundTrip(t, plain)
			hashed := connect(t, tg.url, nats.UserInfo("hashed", "hashed-pw"))
			flush(t, hashed)
			refused(t, "wrong plain password", tg.url, nats.UserInfo("plain", "plain-PW"))
			refused(t, "wrong bcrypt password", tg.url, nats.UserInfo("hashed", "plain-pw"))
			refused(t, "bcrypt hash as password", tg.url, nats.UserInfo("hashed", string(hash)))
			refused(t, "unknown user", tg.url, nats.UserInfo("nobody", "x"))
			refused(t, "no credentials", tg.url)

			// No CONNECT within authorization.timeout (1.5 s): the same
			// -ERR from both, in time, and INFO asks for credentials.
			raw := dialRaw(t, strings.TrimPrefix(tg.url, "nats://"))
			if raw.info["auth_required"] != true {
				t.Fatalf("INFO: %v", raw.info)
			}
			start := time.Now()
			lines := raw.expectClosed(5 * time.Second)
			if took := time.Since(start); took < time.Second || took > 3*time.Second || !slices.Contains(lines, "-ERR 'Authentication Timeout'") {
				t.Fatalf("auth timeout after %v: %q", took, lines)
			}

			// hashed has the default permissions: it sees pub.> only.
			watch := subscribeSync(t, hashed, "pub.>")
			plain.Publish("secret.x", nil)
			plain.Publish("pub.ok", nil)
			plain.Flush()
			if m := nextMsg(t, watch); m.Subject != "pub.ok" {
				t.Fatalf("got %s", m.Subject)
			}
			select {
			case err := <-errs:
				if !strings.Contains(err.Error(), `Permissions Violation for Publish to "secret.x"`) {
					t.Fatalf("plain publish error: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no permissions violation for a denied publish")
			}
			if _, err := hashed.SubscribeSync("other"); err != nil {
				t.Fatal(err)
			}
			if err := hashed.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := hashed.LastError(); err == nil || !strings.Contains(err.Error(), `Permissions Violation for Subscription to "other"`) {
				t.Fatalf("denied subscribe: %v", err)
			}
		})
	}
}

// TestConfigToken: authorization { token } admits the token alone, and
// authorization { user, password } its one user.
func TestConfigToken(t *testing.T) {
	conf := "authorization { token: \"s3cr3t-token\" }\n"
	for _, tg := range bothServers(t, conf, false) {
		t.Run(tg.name, func(t *testing.T) {
			roundTrip(t, connect(t, tg.url, nats.Token("s3cr3t-token")))
			refused(t, "wrong token", tg.url, nats.Token("s3cr3t"))
			refused(t, "no token", tg.url)
			refused(t, "user instead of token", tg.url, nats.UserInfo("s3cr3t-token", ""))
		})
	}
	conf = "authorization {\n  user: solo\n  password: \"solo-pw\"\n}\n"
	for _, tg := range bothServers(t, conf, false) {
		t.Run(tg.name+"/single user", func(t *testing.T) {
			roundTrip(t, connect(t, tg.url, nats.UserInfo("solo", "solo-pw")))
			refused(t, "wrong password", tg.url, nats.UserInfo("solo", "solo"))
			refused(t, "token instead of user", tg.url, nats.Token("solo-pw"))
			refused(t, "no credentials", tg.url)
		})
	}
}

// TestConfigAccounts: static accounts with a stream and a service
// shared between them (one restricted to a listed account), JetStream
// limits, users outside the accounts in $G, and no_auth_user.
func TestConfigAccounts(t *testing.T) {
	conf := `jetstream: enabled
accounts {
  A: {
    users: [ { user: a, password: a } ]
    jetstream: { max_streams: 1, max_mem: 1M, max_file: 1M }
    exports: [
      { stream: "events.>" }
      { service: "help.>", accounts: [B] }
    ]
  }
  B: {
    users: [ { user: b, password: b } ]
    imports: [
      { stream: { account: A, subject: "events.>" }, prefix: "fromA" }
      { service: { account: A, subject: "help.>" }, to: "ask.>" }
    ]
  }
  C: { users: [ { user: c, password: c } ], limits: { max_connections: 1 } }
  SYS: { users: [ { user: sys, password: sys } ] }
}
system_account: SYS
authorization { users: [
  { user: g, password: g }
  { user: ws, password: ws, allowed_connection_types: ["WEBSOCKET"] }
] }
no_auth_user: b
`
	cliLimits := map[string]string{}
	for _, tg := range bothServers(t, conf, false, "-sd", t.TempDir()) {
		t.Run(tg.name, func(t *testing.T) {
			a := connect(t, tg.url, nats.UserInfo("a", "a"))
			b := connect(t, tg.url) // no credentials: no_auth_user b
			c := connect(t, tg.url, nats.UserInfo("c", "c"))
			g := connect(t, tg.url, nats.UserInfo("g", "g"))
			refused(t, "wrong password", tg.url, nats.UserInfo("a", "b"))
			refused(t, "a user allowed websocket connections only", tg.url, nats.UserInfo("ws", "ws"))
			if _, err := nats.Connect(tg.url, nats.UserInfo("c", "c"), nats.MaxReconnects(0)); err == nil ||
				!strings.Contains(err.Error(), "maximum account active connections exceeded") {
				t.Fatalf("over the account's max_connections: %v", err)
			}
			sys := connect(t, tg.url, nats.UserInfo("sys", "sys"))
			if _, err := sys.Request("$SYS.REQ.SERVER.PING", nil, 5*time.Second); err != nil {
				t.Fatalf("system account: %v", err)
			}

			// The stream export reaches B under its prefix, and nobody else.
			inB := subscribeSync(t, b, "fromA.events.>")
			inG := subscribeSync(t, g, ">")
			inC := subscribeSync(t, c, "events.>")
			flush(t, b)
			flush(t, g)
			flush(t, c)
			publish(t, a, "events.one", []byte("1"))
			if m := nextMsg(t, inB); m.Subject != "fromA.events.one" || string(m.Data) != "1" {
				t.Fatalf("B got %s %q", m.Subject, m.Data)
			}

			for name, sub := range map[string]*nats.Subscription{"$G": inG, "C": inC} {
				if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
					t.Fatalf("%s got %s from account A", name, m.Subject)
				}
			}

			// The service: B asks through ask.>, C is not admitted.
			svc, err := a.Subscribe("help.>", func(m *nats.Msg) { m.Respond([]byte("re:" + m.Subject)) })
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Unsubscribe()
			flush(t, a)
			rep, err := b.Request("ask.me", []byte("?"), 5*time.Second)
			if err != nil || string(rep.Data) != "re:help.me" {
				t.Fatalf("service import: %v %v", rep, err)
			}
			if _, err := c.Request("help.me", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("an account without the import: %v", err)
			}

			// JetStream: A is limited to one stream; B has none.
			jsA, _ := a.JetStream()
			if _, err := jsA.AddStream(&nats.StreamConfig{Name: "S1", Subjects: []string{"s1"}, Storage: nats.MemoryStorage, MaxBytes: 1000}); err != nil {
				t.Fatalf("first stream: %v", err)
			}
			_, err = jsA.AddStream(&nats.StreamConfig{Name: "S2", Subjects: []string{"s2"}, Storage: nats.MemoryStorage, MaxBytes: 1000})
			var apiErr *nats.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10027 { // maximum number of streams reached
				t.Fatalf("second stream over max_streams: %v", err)
			}
			// The nats CLI sees the same limits, and the same refusal.
			info := runCLI(t, tg.url, "--user", "a", "--password", "a", "account", "info")
			i := strings.Index(info, "Account Limits:")
			if i < 0 || !strings.Contains(info, "Account: A (A)") {
				t.Fatalf("nats account info:\n%s", info)
			}
			cliLimits[tg.name] = info[i:]
			if out, err := tryCLI(t, tg.url, "--user", "a", "--password", "x", "pub", "p", "x"); err == nil || !strings.Contains(out, "Authorization Violation") {
				t.Fatalf("nats pub with a wrong password: %v %s", err, out)
			}
			jsB, _ := b.JetStream()
			if _, err := jsB.AccountInfo(); !errors.Is(err, nats.ErrJetStreamNotEnabledForAccount) {
				t.Fatalf("account without jetstream: %v", err)
			}
		})
	}
	if c, n := cliLimits["contrail"], cliLimits["nats-server"]; c != n {
		t.Errorf("nats account info limits differ:\ncontrail:\n%s\nnats-server:\n%s", c, n)
	}
}

// TestConfigVerifyAndMap: with tls { verify_and_map }, the client
// certificate names the user, and a certificate naming nobody is refused.
func TestConfigVerifyAndMap(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := makeCA(t, "map CA")
	caFile := writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	srvDER, srvKey := makeLeaf(t, ca, caKey, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	cert := writePEM(t, dir, "server.pem", "CERTIFICATE", srvDER)
	key := writeKey(t, dir, "server-key.pem", srvKey)
	client := func(name string) nats.Option {
		der, k := makeLeaf(t, ca, caKey, name, x509.ExtKeyUsageClientAuth)
		return nats.ClientCert(writePEM(t, dir, name+".pem", "CERTIFICATE", der), writeKey(t, dir, name+"-key.pem", k))
	}
	alice, mallory := client("alice"), client("mallory")
	conf := `tls {
  cert_file: "` + cert + `"
  key_file: "` + key + `"
  ca_file: "` + caFile + `"
  verify_and_map: true
}
authorization { users: [ { user: alice, permissions: { publish: "alice.>", subscribe: ["alice.>", "_INBOX.>"] } } ] }
`
	for _, tg := range bothServers(t, conf, true) {
		t.Run(tg.name, func(t *testing.T) {
			errOpt, errs := permErrors()
			nc := connect(t, tg.url, nats.RootCAs(caFile), alice, errOpt)
			sub := subscribeSync(t, nc, "alice.x")
			publish(t, nc, "alice.x", []byte("hi"))
			nextMsg(t, sub)
			nc.Publish("bob.x", nil) // alice's permissions apply
			nc.Flush()
			select {
			case err := <-errs:
				if !strings.Contains(err.Error(), "Permissions Violation") {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the mapped user's permissions did not apply")
			}
			refused(t, "certificate naming nobody", tg.url, nats.RootCAs(caFile), mallory)
		})
	}
}

// TestConfigTraceRedacted: trace and log_file in the config: the log
// file shows the protocol as nats-server traces it, the password and
// token redacted.
func TestConfigTraceRedacted(t *testing.T) {
	for _, srv := range []string{"contrail", "nats-server"} {
		t.Run(srv, func(t *testing.T) {
			dir := t.TempDir()
			logFile := filepath.Join(dir, "server.log")
			conf := `trace: true
logtime: false
log_file: "` + logFile + `"
authorization { users: [ { user: tracy, password: "hunter2-secret" } ] }
`
			var url string
			if srv == "contrail" {
				url = startNode(t, nodeOpts{config: conf}).URL
			} else {
				url = startNatsServer(t, "-c", writeFile(t, dir, "ref.conf", conf)).URL
			}
			nc := connect(t, url, nats.UserInfo("tracy", "hunter2-secret"))
			sub := subscribeSync(t, nc, "traced")
			publish(t, nc, "traced", []byte("payload-1"))
			nextMsg(t, sub)
			var log string
			waitFor(t, 5*time.Second, "the traced MSG in the log", func() bool {
				b, _ := os.ReadFile(logFile)
				log = strings.ReplaceAll(string(b), `\"`, `"`) // as slog's text quotes it
				return strings.Contains(log, "->> [MSG traced")
			})
			for _, want := range []string{`<<- [CONNECT {`, `"pass":"[REDACTED]"`, `<<- [SUB traced  1]`,
				`<<- [PUB traced 9]`, `<<- MSG_PAYLOAD: ["payload-1"]`, `->> [MSG traced 1 9]`, `->> [PONG]`} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %s:\n%s", want, tail(log, 3000))
				}
			}
			if strings.Contains(log, "hunter2-secret") {
				t.Fatalf("the password reached the log:\n%s", log)
			}
		})
	}
}

// TestConfigRefusedAlike: a file nats-server refuses to start with (an
// import the exporter does not admit) is refused by Contrail too, naming
// the line and the reason.
func TestConfigRefusedAlike(t *testing.T) {
	conf := `accounts {
  A: { exports: [ { service: "help.>", accounts: [B] } ] }
  B: {}
  C: { imports: [ { service: { account: A, subject: "help.>" } } ] }
}
`
	file := writeFile(t, t.TempDir(), "bad.conf", conf)
	bin := findTool(t, "nats-server", "github.com/nats-io/nats-server/v2", "v2.15.2")
	out, err := exec.Command(bin, "-c", file, "-p", "-1", "-m", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not authorized") {
		t.Fatalf("nats-server: %v: %s", err, out)
	}
	code, _, stderr := runContrail(t, "dataplane", "--config", file, "--data-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, `line 4: accounts.C.imports: service "help.>" of account A is not exported to C`) {
		t.Fatalf("contrail exit %d: %s", code, stderr)
	}
}

// TestConfigAccountsCluster: the accounts block on a three-node
// cluster: a stream export crosses nodes, and an R3 stream lives in a
// static account.
func TestConfigAccountsCluster(t *testing.T) {
	conf := `jetstream: enabled
accounts {
  A: { users: [ { user: a, password: a } ], jetstream: enabled, exports: [ { stream: "events.>" } ] }
  B: { users: [ { user: b, password: b } ], imports: [ { stream: { account: A, subject: "events.>" }, prefix: "fromA" } ] }
}
`
	file := writeFile(t, t.TempDir(), "accounts.conf", conf)
	nodes := startCluster(t, 3, clusterOpts{args: func(int, string) []string { return []string{"--config", file} }})
	waitMesh(t, nodes)
	b := connect(t, nodes[2].URL, nats.UserInfo("b", "b"))
	in := subscribeSync(t, b, "fromA.events.>")
	flush(t, b)
	a := connect(t, nodes[0].URL, nats.UserInfo("a", "a"))
	waitFor(t, 10*time.Second, "the import's interest on the exporter's node", func() bool {
		publish(t, a, "events.probe", nil)
		m, err := in.NextMsg(100 * time.Millisecond)
		return err == nil && m.Subject == "fromA.events.probe"
	})
	js, _ := a.JetStream()
	if _, err := js.AddStream(&nats.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3}); err != nil {
		t.Fatalf("R3 stream in a static account: %v", err)
	}
	if _, err := js.Publish("r3.x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	a2 := connect(t, nodes[1].URL, nats.UserInfo("a", "a"))
	js2, _ := a2.JetStream()
	si, err := js2.StreamInfo("R3")
	if err != nil || si.State.Msgs != 1 {
		t.Fatalf("stream info from another node: %+v %v", si, err)
	}
}

// TestConfigAccountsRestart: a static account's streams survive a
// restart and stay in their account.
func TestConfigAccountsRestart(t *testing.T) {
	conf := `accounts {
  A: { users: [ { user: a, password: a } ], jetstream: enabled }
  B: { users: [ { user: b, password: b } ], jetstream: enabled }
}
`
	n := startNode(t, nodeOpts{config: conf})
	nc := connect(t, n.URL, nats.UserInfo("a", "a"))
	js, _ := nc.JetStream()
	if _, err := js.AddStream(&nats.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish("keep", []byte("1")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	n.signal(syscall.SIGTERM)
	if _, ok := n.wait(stopTimeout); !ok {
		t.Fatal("node did not stop")
	}

	n = startNode(t, nodeOpts{config: conf, dir: n.Dir})
	js, _ = connect(t, n.URL, nats.UserInfo("a", "a")).JetStream()
	waitFor(t, 10*time.Second, "the stream back in account A", func() bool {
		si, err := js.StreamInfo("KEEP")
		return err == nil && si.State.Msgs == 1
	})
	jsB, _ := connect(t, n.URL, nats.UserInfo("b", "b")).JetStream()
	if _, err := jsB.StreamInfo("KEEP"); !errors.Is(err, nats.ErrStreamNotFound) {
		t.Fatalf("account B sees account A's stream: %v", err)
	}
}
