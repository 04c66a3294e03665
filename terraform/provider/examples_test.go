package provider_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/contrail/contrail/terraform/provider"
)

// TestAccExamples applies terraform/examples as they are (provider
// settings from the environment, as the examples' README runs them),
// checks the plan after apply is empty, and destroys them.
func TestAccExamples(t *testing.T) {
	tn := signup(t)
	t.Setenv(provider.EnvEndpoint, dev.URL)
	t.Setenv(provider.EnvToken, tn.Token)
	// The examples name the provider contrail/contrail, as users do;
	// the in-process provider answers to that address.
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "contrail")
	config, err := os.ReadFile(filepath.Join("..", "examples", "quickstart", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config:           string(config),
			ConfigPlanChecks: emptyAfterApply,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckOutput("nats_url", dev.NatsURL),
				resource.TestCheckResourceAttr("data.contrail_streams.orders", "streams.0.name", "ORDERS"),
				resource.TestCheckResourceAttrWith("contrail_user.app", "creds", func(v string) error {
					nc, err := connectCreds(writeCreds(t, v))
					if err != nil {
						return err
					}
					nc.Close()
					return nil
				}),
				func(s *terraform.State) error {
					out, err := natsRun(t, "--creds", writeCreds(t, s.RootModule().Resources["contrail_user.app"].Primary.Attributes["creds"]),
						"stream", "info", "ORDERS")
					if err != nil || !strings.Contains(out, "orders.>") {
						return fmt.Errorf("nats stream info ORDERS: %v\n%s", err, out)
					}
					return nil
				},
			),
		}},
	})
}
