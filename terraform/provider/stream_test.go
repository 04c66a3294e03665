package provider_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/contrail/contrail/terraform/client"
)

// TestAccStream: a stream made by Terraform is what `nats stream info`
// shows; limits and subjects change in place; drift made through the API
// is planned and repaired; storage replaces it (with a warning); import;
// the contrail_streams data source; destroy.
func TestAccStream(t *testing.T) {
	tn := signup(t)
	var accountID, creds string
	config := func(stream string) string {
		return tn.Provider + `
resource "contrail_account" "a" {
  name = "streams"
}

resource "contrail_user" "cli" {
  account_id = contrail_account.a.id
  name       = "cli"
}
` + stream + `
data "contrail_streams" "all" {
  account_id = contrail_account.a.id
  depends_on = [contrail_stream.orders]
}
`
	}
	orders := func(maxMsgs int, subjects, storage string) string {
		return fmt.Sprintf(`
resource "contrail_stream" "orders" {
  account_id = contrail_account.a.id
  name       = "ORDERS"
  subjects   = [%s]
  max_msgs   = %d
  max_age    = 86400
  storage    = %q
  metadata   = { team = "shop" }
  republish  = { destination = "copy.>" }
}
`, subjects, maxMsgs, storage)
	}
	// info is the stream as the stock nats CLI sees it.
	info := func() (cfg struct {
		Subjects []string `json:"subjects"`
		MaxMsgs  int64    `json:"max_msgs"`
		MaxAge   int64    `json:"max_age"`
		Storage  string   `json:"storage"`
	}, err error) {
		out, err := natsRun(t, "--creds", writeCreds(t, creds), "stream", "info", "ORDERS", "--json")
		if err != nil {
			return cfg, fmt.Errorf("nats stream info: %v: %s", err, out)
		}
		var si struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal([]byte(out), &si); err != nil {
			return cfg, fmt.Errorf("nats stream info: %v: %s", err, out)
		}
		return cfg, json.Unmarshal(si.Config, &cfg)
	}
	wantInfo := func(maxMsgs int64, storage string, subjects ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			cfg, err := info()
			if err != nil {
				return err
			}
			if cfg.MaxMsgs != maxMsgs || cfg.Storage != storage || cfg.MaxAge != 86400e9 || fmt.Sprint(cfg.Subjects) != fmt.Sprint(subjects) {
				return fmt.Errorf("nats stream info: %+v, want max_msgs %d, storage %s, subjects %v", cfg, maxMsgs, storage, subjects)
			}
			return nil
		}
	}
	// messages checks what the stream holds: an in-place update keeps
	// its messages, a replacement starts empty.
	messages := func(want uint64) resource.TestCheckFunc {
		return func(*terraform.State) error {
			st, err := tn.Client.Stream(ctx(t), accountID, "ORDERS")
			if err != nil {
				return err
			}
			if st.State.Messages != want {
				return fmt.Errorf("ORDERS holds %d messages, want %d", st.State.Messages, want)
			}
			return nil
		}
	}
	publish := func(*terraform.State) error {
		out, err := natsRun(t, "--creds", writeCreds(t, creds), "pub", "orders.1", "x", "--jetstream")
		if err != nil {
			return fmt.Errorf("nats pub --jetstream: %v: %s", err, out)
		}
		return nil
	}
	captureCreds := resource.TestCheckResourceAttrWith("contrail_user.cli", "creds", func(v string) error { creds = v; return nil })
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := tn.Client.Account(ctx(t), accountID); !notFound(err) {
				return fmt.Errorf("account after destroy: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:           config(orders(100, `"orders.>"`, "file")),
				ConfigPlanChecks: emptyAfterApply,
				Check: resource.ComposeAggregateTestCheckFunc(
					idOf("contrail_account.a", &accountID),
					captureCreds,
					resource.TestCheckResourceAttr("contrail_stream.orders", "retention", "limits"),
					resource.TestCheckResourceAttr("contrail_stream.orders", "duplicate_window", "120"),
					resource.TestCheckResourceAttr("contrail_stream.orders", "replicas", "1"),
					resource.TestCheckResourceAttr("contrail_stream.orders", "republish.source", ">"),
					resource.TestCheckResourceAttr("data.contrail_streams.all", "streams.#", "1"),
					resource.TestCheckResourceAttr("data.contrail_streams.all", "streams.0.name", "ORDERS"),
					wantInfo(100, "file", "orders.>"),
					publish,
					messages(1),
				),
			},
			{
				// In place: the stream keeps its messages.
				Config:           config(orders(50, `"orders.>", "returns.>"`, "file")),
				ConfigPlanChecks: planAction("contrail_stream.orders", plancheck.ResourceActionUpdate),
				Check:            resource.ComposeAggregateTestCheckFunc(wantInfo(50, "file", "orders.>", "returns.>"), messages(1)),
			},
			{
				// Drift through the API: planned as an update, repaired.
				PreConfig: func() {
					s, err := tn.Client.Stream(ctx(t), accountID, "ORDERS")
					if err != nil {
						t.Fatal(err)
					}
					cfg := s.Config
					cfg.MaxMsgs, cfg.Subjects, cfg.Metadata, cfg.RePublish = 7, []string{"drift.>"}, nil, nil
					if _, err := tn.Client.UpdateStream(ctx(t), accountID, "ORDERS", cfg); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config(orders(50, `"orders.>", "returns.>"`, "file")),
				ConfigPlanChecks: planAction("contrail_stream.orders", plancheck.ResourceActionUpdate),
				Check:            wantInfo(50, "file", "orders.>", "returns.>"),
			},
			{
				ResourceName:      "contrail_stream.orders",
				ImportState:       true,
				ImportStateIdFunc: func(*terraform.State) (string, error) { return accountID + "/ORDERS", nil },
				ImportStateVerify: true,
			},
			{
				Config:            config(orders(50, `"orders.>", "returns.>"`, "file")),
				ResourceName:      "contrail_stream.orders",
				ImportState:       true,
				ImportStateKind:   resource.ImportBlockWithID,
				ImportStateIdFunc: func(*terraform.State) (string, error) { return accountID + "/ORDERS", nil },
			},
			{
				// nats-server cannot change storage: the plan replaces the
				// stream.
				Config:           config(orders(50, `"orders.>"`, "memory")),
				ConfigPlanChecks: planAction("contrail_stream.orders", plancheck.ResourceActionDestroyBeforeCreate),
				Check:            resource.ComposeAggregateTestCheckFunc(wantInfo(50, "memory", "orders.>"), messages(0)),
			},
			{
				// Deleted elsewhere: made again.
				PreConfig: func() {
					if err := tn.Client.DeleteStream(ctx(t), accountID, "ORDERS"); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config(orders(50, `"orders.>"`, "memory")),
				ConfigPlanChecks: planAction("contrail_stream.orders", plancheck.ResourceActionCreate),
				Check:            wantInfo(50, "memory", "orders.>"),
			},
		},
	})
}

// TestAccStreamRefusals: what the control plane refuses reaches the user
// as a clear error naming the field.
func TestAccStreamRefusals(t *testing.T) {
	tn := signup(t)
	a, err := tn.Client.CreateAccount(ctx(t), client.AccountRequest{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config: tn.Provider + fmt.Sprintf(`
resource "contrail_stream" "bad" {
  account_id = %q
  name       = "BAD"
  retention  = "forever"
}
`, a.ID),
			ExpectError: regexp.MustCompile(`field retention`),
		}},
	})
}
