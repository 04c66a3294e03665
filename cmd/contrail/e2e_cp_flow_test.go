package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// tenantFlow is the product's main path, run against any cell: create an
// account with a stream limit, a user whose creds connect with stock
// nats.go and are held to the limit, raise the limit (it applies to the
// live connection), revoke the user (it is cut off), delete the account.
// checkUsage also reads usage and streams back from the cell.
func tenantFlow(t *testing.T, a *api, dir string, checkUsage bool) {
	acc := a.createAccount("orders", map[string]any{"jetstream": map[string]any{"max_streams": 1}})
	if acc.Limits.JetStream.MaxStreams != 1 || acc.Limits.JetStream.MaxStorage != 1<<30 || acc.Limits.MaxConnections != -1 {
		t.Fatalf("limits = %+v, want max_streams 1 and the defaults for the rest", acc.Limits)
	}
	var got cpAccount
	a.do("GET", "/v1/accounts/"+acc.ID, nil, 200, &got)
	if got.PublicKey != acc.PublicKey || got.NatsURL == "" {
		t.Fatalf("GET account = %+v", got)
	}
	alice, aliceCreds := a.createUser(acc.ID, "alice", dir)
	if !strings.Contains(alice.Creds, "NATS USER JWT") || !strings.Contains(alice.Creds, "USER NKEY SEED") {
		t.Fatalf("creds file:\n%s", alice.Creds)
	}
	var users items[cpUser]
	a.do("GET", "/v1/accounts/"+acc.ID+"/users", nil, 200, &users)
	if len(users.Items) != 1 || users.Items[0].Creds != "" || users.Items[0].PublicKey != alice.PublicKey {
		t.Fatalf("users = %+v (creds must never be listed)", users.Items)
	}

	closed := make(chan struct{})
	nc := connectCreds(t, acc.NatsURL, aliceCreds, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	sub := subscribeSync(t, nc, "greet.>")
	publish(t, nc, "greet.world", []byte("hi"))
	if m := nextMsg(t, sub); string(m.Data) != "hi" {
		t.Fatalf("got %q", m.Data)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ONE", Subjects: []string{"one.>"}}); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "TWO", Subjects: []string{"two.>"}})
	if err == nil || !strings.Contains(fmt.Sprint(err), "maximum number of streams") {
		t.Fatalf("second stream over max_streams 1: %v, want maximum number of streams reached", err)
	}

	// Raise the limit: the same connection may now create the stream.
	a.do("PATCH", "/v1/accounts/"+acc.ID, map[string]any{"limits": map[string]any{"jetstream": map[string]any{"max_streams": 3}}}, 200, &got)
	if got.Limits.JetStream.MaxStreams != 3 || got.Limits.JetStream.MaxStorage != 1<<30 {
		t.Fatalf("after PATCH limits = %+v", got.Limits)
	}
	waitFor(t, ioTimeout, "the raised stream limit on the live connection", func() bool {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TWO", Subjects: []string{"two.>"}})
		return err == nil
	})
	if _, err := js.Publish(ctx, "one.a", []byte("x")); err != nil {
		t.Fatalf("publish to stream: %v", err)
	}

	if checkUsage {
		var u cpUsage
		a.do("GET", "/v1/accounts/"+acc.ID+"/usage", nil, 200, &u)
		if u.Connections != 1 || u.Streams != 2 || u.Messages != 1 || u.StorageBytes == 0 {
			t.Fatalf("usage = %+v, want 1 connection, 2 streams, 1 message", u)
		}
		var st items[struct {
			Name     string   `json:"name"`
			Subjects []string `json:"subjects"`
			Messages uint64   `json:"messages"`
		}]
		a.do("GET", "/v1/accounts/"+acc.ID+"/streams", nil, 200, &st)
		if len(st.Items) != 2 || st.Items[0].Name+st.Items[1].Name != "ONETWO" && st.Items[0].Name+st.Items[1].Name != "TWOONE" {
			t.Fatalf("streams = %+v", st.Items)
		}
	}

	// Revoke alice: her connection is closed and her creds stop working.
	a.do("DELETE", "/v1/accounts/"+acc.ID+"/users/"+alice.ID, nil, 204, nil)
	waitDisconnected(t, "the revoked user's connection to close", closed)
	if nc2, err := dialCreds(acc.NatsURL, aliceCreds, nil); err == nil {
		nc2.Close()
		t.Fatal("a revoked user's creds still connect")
	}
	a.problemOf("DELETE", "/v1/accounts/"+acc.ID+"/users/"+alice.ID, nil, 404, false)

	// Delete the account: bob is cut off, the account is gone.
	_, bobCreds := a.createUser(acc.ID, "bob", dir)
	bobClosed := make(chan struct{})
	connectCreds(t, acc.NatsURL, bobCreds, nats.ClosedHandler(func(*nats.Conn) { close(bobClosed) }))
	a.do("DELETE", "/v1/accounts/"+acc.ID, nil, 204, nil)
	waitDisconnected(t, "the deleted account's connection to close", bobClosed)
	a.problemOf("GET", "/v1/accounts/"+acc.ID, nil, 404, false)
	var list items[cpAccount]
	a.do("GET", "/v1/accounts", nil, 200, &list)
	for _, x := range list.Items {
		if x.ID == acc.ID {
			t.Fatal("deleted account still listed")
		}
	}
	deadline := time.Now().Add(ioTimeout)
	for {
		nc3, err := dialCreds(acc.NatsURL, bobCreds, nil)
		if err != nil {
			break
		}
		nc3.Close()
		if time.Now().After(deadline) {
			t.Fatal("a deleted account's creds still connect")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// items is a list envelope.
type items[T any] struct {
	Items []T `json:"items"`
}
