package provider_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/contrail/contrail/terraform/client"
)

// emptyAfterApply is the plan check every step makes: after apply and
// refresh, nothing is left to do.
var emptyAfterApply = resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}

func planAction(addr string, action plancheck.ResourceActionType) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{
		PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, action)},
		PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
	}
}

// idOf reads a resource's id from the state into *dst.
func idOf(addr string, dst *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s not in state", addr)
		}
		*dst = rs.Primary.ID
		return nil
	}
}

func TestAccAccount(t *testing.T) {
	tn := signup(t)
	var id string
	config := func(name string, streams int, extra ...string) string {
		return tn.Provider + fmt.Sprintf(`
resource "contrail_account" "a" {
  name        = %q
  max_streams = %d
  %s
}

data "contrail_account" "by_name" {
  name = contrail_account.a.name
}

data "contrail_accounts" "all" {
  depends_on = [contrail_account.a]
}
`, name, streams, strings.Join(extra, "\n"))
	}
	const tiers = `tiers = {
    r1 = {
      max_memory = 0, max_storage = 1048576, max_streams = 2, max_consumers = -1,
      max_ack_pending = -1, max_stream_bytes = 524288
    }
  }`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := tn.Client.Account(ctx(t), id); !notFound(err) {
				return fmt.Errorf("account %s after destroy: %v, want not found", id, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:           config("orders", 5),
				ConfigPlanChecks: emptyAfterApply,
				Check: resource.ComposeAggregateTestCheckFunc(
					idOf("contrail_account.a", &id),
					resource.TestCheckResourceAttr("contrail_account.a", "name", "orders"),
					resource.TestCheckResourceAttr("contrail_account.a", "max_streams", "5"),
					// The server's defaults, so the plan stays empty.
					resource.TestCheckResourceAttr("contrail_account.a", "max_connections", "-1"),
					resource.TestCheckResourceAttr("contrail_account.a", "max_memory", fmt.Sprint(256<<20)),
					resource.TestCheckResourceAttr("contrail_account.a", "max_storage", fmt.Sprint(1<<30)),
					resource.TestMatchResourceAttr("contrail_account.a", "public_key", reAccountKey),
					resource.TestCheckResourceAttr("contrail_account.a", "nats_url", dev.NatsURL),
					resource.TestCheckResourceAttrSet("contrail_account.a", "created_at"),
					resource.TestCheckResourceAttrPair("data.contrail_account.by_name", "id", "contrail_account.a", "id"),
					resource.TestCheckResourceAttr("data.contrail_account.by_name", "max_streams", "5"),
					resource.TestCheckResourceAttr("data.contrail_accounts.all", "accounts.#", "1"),
					// Create waited for the cell.
					func(*terraform.State) error { return wantInSync(t, tn.Client, id) },
				),
			},
			{
				// Name and limits change in place, and the cell has them.
				Config:           config("orders-eu", 7),
				ConfigPlanChecks: planAction("contrail_account.a", plancheck.ResourceActionUpdate),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPtr("contrail_account.a", "id", &id),
					resource.TestCheckResourceAttr("contrail_account.a", "name", "orders-eu"),
					resource.TestCheckResourceAttr("contrail_account.a", "max_streams", "7"),
					func(*terraform.State) error { return wantInSync(t, tn.Client, id) },
				),
			},
			{
				// Drift made through the API shows in the plan, and apply
				// puts the config back.
				PreConfig: func() {
					if _, err := tn.Client.UpdateAccount(ctx(t), id, client.AccountRequest{Name: "renamed",
						Limits: &client.Limits{MaxConnections: 2, MaxPayload: -1, JetStream: client.JetStreamLimits{
							MaxMemory: 256 << 20, MaxStorage: 1 << 30, MaxStreams: 1, MaxConsumers: -1, MaxAckPending: -1}}}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config("orders-eu", 7),
				ConfigPlanChecks: planAction("contrail_account.a", plancheck.ResourceActionUpdate),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error {
						a, err := tn.Client.Account(ctx(t), id)
						if err != nil {
							return err
						}
						if a.Name != "orders-eu" || a.Limits.MaxConnections != -1 || a.Limits.JetStream.MaxStreams != 7 {
							return fmt.Errorf("after apply the account is %+v", a)
						}
						return nil
					},
				),
			},
			{
				// Tiered limits change in place, and the cell has them.
				Config:           config("orders-eu", 7, tiers),
				ConfigPlanChecks: planAction("contrail_account.a", plancheck.ResourceActionUpdate),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("contrail_account.a", "tiers.r1.max_streams", "2"),
					resource.TestCheckNoResourceAttr("contrail_account.a", "tiers.r3"),
					resource.TestCheckResourceAttr("data.contrail_account.by_name", "tiers.r1.max_stream_bytes", "524288"),
					func(*terraform.State) error {
						a, err := tn.Client.Account(ctx(t), id)
						if err != nil {
							return err
						}
						if tr := a.Limits.JetStream.Tiers; tr == nil || tr.R1 == nil || tr.R1.MaxStreams != 2 || tr.R3 != nil {
							return fmt.Errorf("tiers %+v", tr)
						}
						return wantInSync(t, tn.Client, id)
					},
				),
			},
			{
				ResourceName:      "contrail_account.a",
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// Left out of the config, the tiers go.
				Config:           config("orders-eu", 7),
				ConfigPlanChecks: planAction("contrail_account.a", plancheck.ResourceActionUpdate),
				Check: func(*terraform.State) error {
					a, err := tn.Client.Account(ctx(t), id)
					if err != nil {
						return err
					}
					if a.Limits.JetStream.Tiers != nil {
						return fmt.Errorf("tiers left after removal: %+v", a.Limits.JetStream.Tiers)
					}
					return nil
				},
			},
			{
				Config:          config("orders-eu", 7),
				ResourceName:    "contrail_account.a",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
			},
			{
				// Deleted elsewhere: the plan makes it again.
				PreConfig: func() {
					if err := tn.Client.DeleteAccount(ctx(t), id); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config("orders-eu", 7),
				ConfigPlanChecks: planAction("contrail_account.a", plancheck.ResourceActionCreate),
				Check:            idOf("contrail_account.a", &id),
			},
		},
	})
}
