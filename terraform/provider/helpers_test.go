package provider_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/contrail/contrail/terraform/client"
)

var (
	reAccountKey = regexp.MustCompile(`^A[A-Z2-7]{55}$`)
	reUserKey    = regexp.MustCompile(`^U[A-Z2-7]{55}$`)
)

func notFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

// wantInSync checks the account's cell has its latest JWT: the provider
// waited for it before reporting the apply done.
func wantInSync(t *testing.T, c *client.Client, id string) error {
	a, err := c.Account(ctx(t), id)
	if err != nil {
		return err
	}
	if !a.InSync {
		return fmt.Errorf("account %s: apply returned before its cell had its JWT", id)
	}
	return nil
}

// writeCreds writes creds into a file of the test's temp dir.
func writeCreds(t *testing.T, creds string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(p, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// connectCreds connects stock nats.go to the dev node with a creds file.
func connectCreds(path string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(dev.NatsURL, append([]nats.Option{nats.UserCredentials(path), nats.Timeout(5 * time.Second),
		nats.NoReconnect()}, opts...)...)
}

// natsRun runs the stock nats CLI against the dev node with a private
// configuration directory.
func natsRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cfg := t.TempDir()
	cmd := exec.Command(natsCLI, append([]string{"--server", dev.NatsURL}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cfg, "HOME="+cfg, "NATS_CONTEXT=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
