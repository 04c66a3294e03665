package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// TestOpResolverDownAfterRestart: a node keeps every account JWT it has
// seen, so after a restart it serves its tenants, streams and all, while
// the resolver URL is unreachable, and with the latest pushed claims.
func TestOpResolverDownAfterRestart(t *testing.T) {
	w := newOpWorld(t)
	dir := t.TempDir()
	o := nodeOpts{dir: dir, args: w.nodeArgs(dir)}
	n := startNode(t, o)
	acc, a := w.jsAccount(t, n, "A")
	createStream(t, a.js, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep.>"}})
	jsPublish(t, a.js, "keep.1", "still here")
	creds, _ := acc.user("later", nil)
	victim, victimPub := acc.user("victim", nil)

	// A claim update the resolver never serves: revoke a user.
	sysCreds, _ := w.sys.user("sys", nil)
	sys := connectCreds(t, n.URL, sysCreds)
	acc.claims.Revoke(victimPub)
	w.pushClaims(t, sys, acc)
	w.mu.Lock()
	delete(w.jwts, acc.pub) // the resolver forgets the account, then goes down
	w.mu.Unlock()
	w.down.Store(true)

	a.nc.Close()
	sys.Close()
	n = restartNode(t, n, o, syscall.SIGTERM)
	nc := connectCreds(t, n.URL, creds)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := getRaw(t, mustStream(t, js, "KEEP"), 1)
	if string(m.Data) != "still here" {
		t.Fatalf("read %q after restart", m.Data)
	}
	if _, err := dialCreds(n.URL, victim, nil); err == nil {
		t.Fatal("a user revoked by a pushed claim update connected after restart")
	}
	if !strings.Contains(n.out.String(), "serving the stored account jwt") {
		t.Errorf("the node did not say it fell back to its stored JWT:\n%s", tail(n.out.String(), 2000))
	}
}

// TestOpMemoryResolverConfig runs a node from a config file as `nsc
// generate config --mem-resolver` writes it: operator JWT inline, system
// account, MEMORY resolver and preloaded account JWTs.
func TestOpMemoryResolverConfig(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() })
	w.down.Store(true) // the URL resolver plays no part
	n := startNode(t, nodeOpts{config: w.memResolverConf()})
	creds, _ := a.user("u", nil)
	tg := jsConnect(t, "A", n.URL, nats.UserCredentials(creds))
	createStream(t, tg.js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	jsPublish(t, tg.js, "s.1", "x")

	// The same file works for nats-server: the reference reads it alike.
	rc := connectCreds(t, w.startRef(t).URL, creds)
	roundTrip(t, rc)
}

// TestOpDeleteAccount: an operator-signed delete request cuts the
// account's users off and forgets its JWT; a forged one does nothing.
func TestOpDeleteAccount(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	n := w.startOpNode(t)
	sysCreds, _ := w.sys.user("sys", nil)
	sys := connectCreds(t, n.URL, sysCreds)
	creds, _ := a.user("u", nil)
	closed := make(chan struct{})
	connectCreds(t, n.URL, creds, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))

	deleteReq := func(signer nkeys.KeyPair) string {
		pub, _ := signer.PublicKey()
		gc := jwt.NewGenericClaims(pub)
		gc.Data["accounts"] = []string{a.pub}
		token, err := gc.Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := sys.Request("$SYS.REQ.CLAIMS.DELETE", []byte(token), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg.Data)
	}
	forger, _ := nkeys.CreateOperator()
	if reply := deleteReq(forger); !strings.Contains(reply, `"error"`) {
		t.Fatalf("a delete signed by another operator: %s", reply)
	}
	select {
	case <-closed:
		t.Fatal("a forged delete disconnected the account's user")
	default:
	}

	w.mu.Lock()
	delete(w.jwts, a.pub) // the control plane stops serving it too
	w.mu.Unlock()
	if reply := deleteReq(w.op); !strings.Contains(reply, "deleted 1 accounts") {
		t.Fatalf("delete: %s", reply)
	}
	recvChan(t, closed, "the deleted account's user is disconnected")
	if _, err := dialCreds(n.URL, creds, nil); err == nil {
		t.Fatal("a user of a deleted account connected")
	}
}

// TestOpFullDirResolver runs the config `nsc generate config
// --nats-resolver` writes: a full directory resolver that learns accounts
// only from claim pushes (as `nsc push` sends them), beside nats-server
// with the same file.
func TestOpFullDirResolver(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() })
	w.down.Store(true) // no URL anywhere in this setup
	conf := func(dir string) string {
		return "operator: " + w.opJWT + "\n" +
			"system_account: " + w.sys.pub + "\n" +
			"resolver {\n  type: full\n  dir: \"" + dir + "\"\n  allow_delete: false\n  interval: \"2m\"\n  timeout: \"1.9s\"\n}\n" +
			"resolver_preload: {\n  " + w.sys.pub + ": " + w.sys.sign() + "\n}\n"
	}
	sysCreds, _ := w.sys.user("sys", nil)
	creds, _ := a.user("u", nil)
	jwtDir := filepath.Join(t.TempDir(), "jwt")
	o := nodeOpts{config: conf(jwtDir)}
	n := startNode(t, o)
	ref := startNatsServer(t, "-c", writeFile(t, t.TempDir(), "ref.conf",
		conf(filepath.Join(t.TempDir(), "refjwt"))+"jetstream { store_dir: \""+t.TempDir()+"\" }\n"))

	for _, target := range []struct{ name, url string }{{"contrail", n.URL}, {"nats-server", ref.URL}} {
		t.Run(target.name, func(t *testing.T) {
			if _, err := dialCreds(target.url, creds, nil); err == nil {
				t.Fatal("a user connected before its account was pushed")
			}
			sys := connectCreds(t, target.url, sysCreds)
			msg, err := sys.Request("$SYS.REQ.CLAIMS.UPDATE", []byte(a.sign()), 5*time.Second)
			if err != nil || !strings.Contains(string(msg.Data), `"code":200`) {
				t.Fatalf("push: %v %s", err, msg.Data)
			}
			connectCreds(t, target.url, creds)
			list, err := sys.Request("$SYS.REQ.CLAIMS.LIST", nil, 5*time.Second)
			if err != nil || !strings.Contains(string(list.Data), a.pub) {
				t.Fatalf("claims list: %v %s", err, list.Data)
			}
			gc := jwt.NewGenericClaims(w.opPub)
			gc.Data["accounts"] = []string{a.pub}
			del, _ := gc.Encode(w.op)
			reply, err := sys.Request("$SYS.REQ.CLAIMS.DELETE", []byte(del), 5*time.Second)
			if err != nil || !strings.Contains(string(reply.Data), "delete must be enabled") {
				t.Fatalf("delete without allow_delete: %v %s", err, reply.Data)
			}
		})
	}
	// The pushed account is in the directory: a restart serves it.
	if _, err := os.Stat(filepath.Join(jwtDir, a.pub+".jwt")); err != nil {
		t.Fatalf("pushed JWT not in the resolver dir: %v", err)
	}
	n = restartNode(t, n, o, syscall.SIGTERM)
	connectCreds(t, n.URL, creds)
}
