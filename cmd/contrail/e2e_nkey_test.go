package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// TestNkeyUsers: bare nkey users from the authorization block, as
// nats-server takes them, sign the nonce at CONNECT; the same file works
// for both servers, and both treat the same clients alike.
func TestNkeyUsers(t *testing.T) {
	good, _ := nkeys.CreateUser()
	goodPub, _ := good.PublicKey()
	limited, _ := nkeys.CreateUser()
	limitedPub, _ := limited.PublicKey()
	stranger, _ := nkeys.CreateUser()
	conf := `authorization {
  users = [
    { nkey: ` + goodPub + ` }
    { nkey: ` + limitedPub + `, permissions: { publish: { allow: "ok.>", deny: "ok.no" }, subscribe: "_INBOX.>" } }
  ]
}
`
	n := startNode(t, nodeOpts{config: conf})
	ref := startNatsServer(t, "-c", writeFile(t, t.TempDir(), "ref.conf", conf))
	for _, target := range []struct{ name, url string }{{"contrail", n.URL}, {"nats-server", ref.URL}} {
		t.Run(target.name, func(t *testing.T) {
			nc := connect(t, target.url, nkeyOpt(t, good))
			roundTrip(t, nc)

			_, err := nats.Connect(target.url, nats.MaxReconnects(0), nkeyOpt(t, stranger))
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("unknown nkey: %v", err)
			}
			// Signing with another key than the one named.
			pub, _ := good.PublicKey()
			_, err = nats.Connect(target.url, nats.MaxReconnects(0), nats.Nkey(pub, stranger.Sign))
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("wrong signature: %v", err)
			}
			if _, err := nats.Connect(target.url, nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("no credentials: %v", err)
			}

			errs := make(chan error, 4)
			lc := connect(t, target.url, nkeyOpt(t, limited), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
			watch := subscribeSync(t, nc, "ok.>")
			lc.Publish("ok.no", nil)
			lc.Publish("ok.yes", nil)
			lc.Flush()
			if m := nextMsg(t, watch); m.Subject != "ok.yes" {
				t.Fatalf("denied publish delivered: %s", m.Subject)
			}
			select {
			case err := <-errs:
				if !strings.Contains(err.Error(), `Permissions Violation for Publish to "ok.no"`) {
					t.Fatalf("violation: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no permissions violation reported")
			}
		})
	}
}

func nkeyOpt(t testing.TB, kp nkeys.KeyPair) nats.Option {
	t.Helper()
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return nats.Nkey(pub, kp.Sign)
}
