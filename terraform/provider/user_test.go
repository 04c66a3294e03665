package provider_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAccUser: creds from state connect with stock nats.go, within the
// user's permissions and the account's limits; rotation replaces the
// user (the old creds stop working); import; drift; destroy.
func TestAccUser(t *testing.T) {
	tn := signup(t)
	var accountID, userID, creds, oldCreds string
	config := func(rotation string) string {
		return tn.Provider + fmt.Sprintf(`
resource "contrail_account" "a" {
  name            = "app"
  max_connections = 1
  max_streams     = 1
}

resource "contrail_user" "app" {
  account_id      = contrail_account.a.id
  name            = "app"
  publish_allow   = ["orders.>", "$JS.API.>"]
  subscribe_allow = ["_INBOX.>"]
  publish_deny    = []
  expires_in_seconds = 86400
  rotation        = { generation = %q }
}
`, rotation)
	}
	captureCreds := func(dst *string) resource.TestCheckFunc {
		return resource.TestCheckResourceAttrWith("contrail_user.app", "creds", func(v string) error {
			if !strings.Contains(v, "BEGIN NATS USER JWT") || !strings.Contains(v, "BEGIN USER NKEY SEED") {
				return fmt.Errorf("creds are not a creds file")
			}
			*dst = v
			return nil
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := tn.Client.User(ctx(t), accountID, userID); !notFound(err) {
				return fmt.Errorf("user after destroy: %v, want not found", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:           config("1"),
				ConfigPlanChecks: emptyAfterApply,
				Check: resource.ComposeAggregateTestCheckFunc(
					idOf("contrail_account.a", &accountID),
					idOf("contrail_user.app", &userID),
					resource.TestMatchResourceAttr("contrail_user.app", "public_key", reUserKey),
					resource.TestCheckResourceAttrWith("contrail_user.app", "expires_at", func(v string) error {
						at, err := time.Parse(time.RFC3339, v)
						if err != nil || time.Until(at) < 23*time.Hour || time.Until(at) > 25*time.Hour {
							return fmt.Errorf("expires_at %q, want a day from now (%v)", v, err)
						}
						return nil
					}),
					captureCreds(&creds),
					func(*terraform.State) error { return checkUserCreds(t, creds) },
				),
			},
			{
				// New keepers: a new user and creds; the old ones are revoked.
				Config:           config("2"),
				ConfigPlanChecks: planAction("contrail_user.app", plancheck.ResourceActionDestroyBeforeCreate),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { oldCreds = creds; return nil },
					captureCreds(&creds),
					idOf("contrail_user.app", &userID),
					func(*terraform.State) error {
						if creds == oldCreds {
							return errors.New("rotation kept the creds")
						}
						if err := wantRefused(t, oldCreds); err != nil {
							return err
						}
						nc, err := connectCreds(writeCreds(t, creds))
						if err != nil {
							return fmt.Errorf("new creds: %w", err)
						}
						nc.Close()
						return nil
					},
				),
			},
			{
				ResourceName:      "contrail_user.app",
				ImportState:       true,
				ImportStateIdFunc: func(*terraform.State) (string, error) { return accountID + "/" + userID, nil },
				ImportStateVerify: true,
				// The API never returns creds; rotation is the config's own.
				ImportStateVerifyIgnore: []string{"creds", "rotation"},
			},
			{
				// Revoked elsewhere: the plan makes a new one.
				PreConfig: func() {
					if err := tn.Client.DeleteUser(ctx(t), accountID, userID); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config("2"),
				ConfigPlanChecks: planAction("contrail_user.app", plancheck.ResourceActionCreate),
				Check:            idOf("contrail_user.app", &userID),
			},
		},
	})
}

// checkUserCreds connects with the creds from state and checks the user's
// permissions and the account's limits hold.
func checkUserCreds(t *testing.T, creds string) error {
	path := writeCreds(t, creds)
	errs := make(chan error, 8)
	nc, err := connectCreds(path, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		return fmt.Errorf("connecting with the creds from state: %w", err)
	}
	defer nc.Close()
	// max_connections = 1: a second connection is refused.
	if nc2, err := connectCreds(path); err == nil {
		nc2.Close()
		return errors.New("a second connection was accepted over max_connections 1")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(c, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		return fmt.Errorf("first stream: %w", err)
	}
	if _, err := js.Publish(c, "orders.1", []byte("x")); err != nil {
		return fmt.Errorf("publish within the permissions: %w", err)
	}
	// max_streams = 1.
	if _, err := js.CreateStream(c, jetstream.StreamConfig{Name: "MORE", Subjects: []string{"orders2.>"}}); err == nil ||
		!strings.Contains(err.Error(), "maximum number of streams") {
		return fmt.Errorf("second stream over max_streams 1: %v, want maximum number of streams reached", err)
	}
	// publish_allow: anything else is a permissions violation.
	if err := nc.Publish("elsewhere", []byte("x")); err != nil {
		return err
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			return fmt.Errorf("publish outside publish_allow: %v", err)
		}
	case <-time.After(5 * time.Second):
		return errors.New("publish outside publish_allow was not refused")
	}
	return js.DeleteStream(c, "ORDERS")
}

// wantRefused checks revoked creds no longer connect: the provider's
// destroy waited until the cell had the revocation.
func wantRefused(t *testing.T, creds string) error {
	nc, err := connectCreds(writeCreds(t, creds))
	if err == nil {
		nc.Close()
		return errors.New("revoked creds still connect")
	}
	return nil
}
