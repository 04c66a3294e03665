package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDevDeletedAccountStaysDeleted: an account deleted through the API
// stays deleted when the node restarts holding its old, enabled JWT (what
// a power cut that lost the delete on disk leaves): the node either hears
// the resolver's 404 and forgets the JWT, or serves it until the control
// plane reconnects and pushes the delete again. Either way the account's
// creds stop working and the old JWT does not stay on disk.
func TestDevDeletedAccountStaysDeleted(t *testing.T) {
	d := startDev(t, filepath.Join(t.TempDir(), "data"))
	a, _ := newAPI(t, d.URL).signup("gone@example.com", "Gone")
	acc := a.createAccount("doomed", nil)
	_, creds := a.createUser(acc.ID, "u", t.TempDir())
	roundTrip(t, connectCreds(t, d.NatsURL, creds))
	jwtFile := filepath.Join(d.DataDir, "node", "accounts", acc.PublicKey+".jwt")
	enabled := mustRead(t, jwtFile)

	a.do("DELETE", "/v1/accounts/"+acc.ID, nil, 204, nil)
	waitFor(t, ioTimeout, "the deleted account's creds to be refused", func() bool {
		nc, err := dialCreds(d.NatsURL, creds, nil)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	d.stop()

	// The power cut: the enabled JWT is back in the node's directory.
	if err := os.WriteFile(jwtFile, enabled, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	waitFor(t, ioTimeout, "the deleted account's creds to be refused after the restart", func() bool {
		nc, err := dialCreds(d.NatsURL, creds, nil)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	// And it stays so: no later load brings the enabled JWT back.
	waitFor(t, ioTimeout, "the old JWT to leave the node's directory", func() bool {
		b, err := os.ReadFile(jwtFile)
		return err != nil || string(b) != string(enabled)
	})
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if nc, err := dialCreds(d.NatsURL, creds, nil); err == nil {
			nc.Close()
			t.Fatal("a deleted account's creds connected again")
		}
	}
}
