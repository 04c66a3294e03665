package main

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// connectRawCreds authenticates a raw connection as a user of the
// account (signing the INFO nonce as a client library does), subscribes
// to subj and then reads nothing more: a slow consumer by construction.
func connectRawCreds(t *testing.T, addr string, a *opAccount, edit func(*jwt.UserClaims), subj string) *rawConn {
	t.Helper()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	if edit != nil {
		edit(uc)
	}
	token, err := uc.Encode(a.kp)
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, addr)
	nonce, _ := c.info["nonce"].(string)
	sig, _ := ukp.Sign([]byte(nonce))
	connect, _ := json.Marshal(map[string]any{"verbose": false, "pedantic": false, "protocol": 1,
		"jwt": token, "sig": base64.RawURLEncoding.EncodeToString(sig)})
	c.send("CONNECT " + string(connect) + "\r\nSUB " + subj + " 1\r\nPING\r\n")
	c.expect("PONG")
	return c
}

// TestOpDataLimit: the data limit of a user (or its account) bounds the
// bytes queued for the connection. A subscriber that stops reading is cut
// off as a slow consumer once that much is pending, long before the
// server's max_pending; one without the limit rides out the same flood.
func TestOpDataLimit(t *testing.T) {
	w := newOpWorld(t)
	a := w.account("A", nil)
	n := w.startOpNode(t)
	limited := connectRawCreds(t, n.NatsAddr, a, func(uc *jwt.UserClaims) { uc.Limits.Data = 256 << 10 }, "flood.a")
	unlimited := connectRawCreds(t, n.NatsAddr, a, nil, "flood.b")

	pubCreds, _ := a.user("pub", nil)
	pub := connectCreds(t, n.URL, pubCreds)
	payload := make([]byte, 32<<10)
	for range 256 { // 8 MiB each: far past 256 KiB plus what sockets buffer, far under max_pending
		publish(t, pub, "flood.a", payload)
		publish(t, pub, "flood.b", payload)
	}
	flush(t, pub)
	waitFor(t, ioTimeout, "the limited subscriber cut off as a slow consumer", func() bool {
		return num(t, varz(t, n.MonURL), "slow_consumers") >= 1
	})
	limited.expectClosed(ioTimeout)
	if sc := num(t, varz(t, n.MonURL), "slow_consumers"); sc != 1 {
		t.Fatalf("slow_consumers = %v, want 1: the subscriber without a data limit was cut off too", sc)
	}
	// The account's statistics count it.
	sysCreds, _ := w.sys.user("sys", nil)
	sys := connectCreds(t, n.URL, sysCreds)
	stz := sysRequest(t, sys, "$SYS.REQ.ACCOUNT."+a.pub+".STATZ", "")
	if sc := num(t, first(t, obj(t, stz, "data"), "account_statz"), "slow_consumers"); sc != 1 {
		t.Fatalf("account statz slow_consumers = %v, want 1", sc)
	}
	// The unlimited one is still served: a PING gets its PONG after the
	// whole flood.
	unlimited.send("PING\r\n")
	for {
		if line := unlimited.line(); line == "PONG" {
			break
		}
	}
}
