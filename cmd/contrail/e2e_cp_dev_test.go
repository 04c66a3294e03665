package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevReady: `contrail dev` prints its URLs and a creds file that
// works with the nats CLI at once, and an unauthenticated client is
// refused (the node trusts only the control plane's operator).
func TestDevReady(t *testing.T) {
	d := startDev(t, filepath.Join(t.TempDir(), "data"))
	out := d.out.String()
	creds := filepath.Join(d.DataDir, "dev.creds")
	for _, want := range []string{d.URL + "/v1", d.NatsURL, creds} {
		if !strings.Contains(out, want) {
			t.Fatalf("dev output lacks %q:\n%s", want, out)
		}
	}
	cli := natsCLI(t)
	sub := connectCreds(t, d.NatsURL, creds)
	s := subscribeSync(t, sub, "x")
	if o, err := exec.Command(cli, "--server", d.NatsURL, "--creds", creds, "pub", "x", "y").CombinedOutput(); err != nil {
		t.Fatalf("nats pub with the dev creds: %v\n%s", err, o)
	}
	if m := nextMsg(t, s); string(m.Data) != "y" {
		t.Fatalf("got %q", m.Data)
	}
	if nc, err := dial(t, d.NatsURL); err == nil {
		nc.Close()
		t.Fatal("a client without creds connected to the dev node")
	}
	// The dev token acts for the dev organization.
	token := strings.TrimSpace(string(mustRead(t, filepath.Join(d.DataDir, "dev.token"))))
	var accts items[cpAccount]
	newAPI(t, d.URL).as(token).do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 1 || accts.Items[0].Name != "dev" || accts.Items[0].NatsURL != d.NatsURL {
		t.Fatalf("dev accounts = %+v", accts.Items)
	}
}

// TestDevTenantFlow runs the main path against `contrail dev`: our own
// data plane as the cell.
func TestDevTenantFlow(t *testing.T) {
	d := startDev(t, filepath.Join(t.TempDir(), "data"))
	a, _ := newAPI(t, d.URL).signup("dev@example.com", "Dev Inc")
	tenantFlow(t, a, t.TempDir(), true)
}

// TestDevRestart: everything survives a restart of `contrail dev`, and
// the dev organization is not created twice.
func TestDevRestart(t *testing.T) {
	d := startDev(t, filepath.Join(t.TempDir(), "data"))
	a, _ := newAPI(t, d.URL).signup("keep@example.com", "Keep")
	acc := a.createAccount("kept", nil)
	_, creds := a.createUser(acc.ID, "u", t.TempDir())
	devCreds := mustRead(t, filepath.Join(d.DataDir, "dev.creds"))
	d.stop()

	d.start(t)
	if got := mustRead(t, filepath.Join(d.DataDir, "dev.creds")); string(got) != string(devCreds) {
		t.Fatal("dev.creds was rewritten on restart")
	}
	var login struct{ Token string }
	api := newAPI(t, d.URL)
	api.do("POST", "/v1/login", map[string]string{"email": "keep@example.com", "password": "correct horse battery"}, 200, &login)
	var accts items[cpAccount]
	api.as(login.Token).do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 1 || accts.Items[0].ID != acc.ID {
		t.Fatalf("accounts after restart: %+v", accts.Items)
	}
	roundTrip(t, connectCreds(t, d.NatsURL, creds))
	roundTrip(t, connectCreds(t, d.NatsURL, filepath.Join(d.DataDir, "dev.creds")))
	if _, err := os.Stat(filepath.Join(d.DataDir, "operator.jwt")); err != nil {
		t.Fatal(err)
	}
}
