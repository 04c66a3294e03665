package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/contrail/contrail/terraform/client"
)

// TestAccAPIToken: the token from state works as a bearer token; a new
// name replaces it (the old one stops working); import; drift; destroy.
func TestAccAPIToken(t *testing.T) {
	tn := signup(t)
	var id, secret, oldSecret string
	config := func(name string) string {
		return tn.Provider + fmt.Sprintf(`
resource "contrail_api_token" "ci" {
  name        = %q
  ttl_seconds = 3600
}
`, name)
	}
	works := func(secret string) error {
		c, err := client.New(dev.URL, secret)
		if err != nil {
			return err
		}
		_, err = c.Accounts(ctx(t))
		return err
	}
	capture := resource.TestCheckResourceAttrWith("contrail_api_token.ci", "token", func(v string) error {
		secret = v
		return works(v)
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := works(secret); err == nil {
				return fmt.Errorf("token %s still works after destroy", id)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:           config("ci"),
				ConfigPlanChecks: emptyAfterApply,
				Check: resource.ComposeAggregateTestCheckFunc(
					idOf("contrail_api_token.ci", &id),
					capture,
					resource.TestCheckResourceAttr("contrail_api_token.ci", "ttl_seconds", "3600"),
					resource.TestCheckResourceAttrSet("contrail_api_token.ci", "expires_at"),
				),
			},
			{
				Config:           config("deploy"),
				ConfigPlanChecks: planAction("contrail_api_token.ci", plancheck.ResourceActionDestroyBeforeCreate),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { oldSecret = secret; return nil },
					capture,
					idOf("contrail_api_token.ci", &id),
					func(*terraform.State) error {
						if works(oldSecret) == nil {
							return fmt.Errorf("the replaced token still works")
						}
						return nil
					},
				),
			},
			{
				ResourceName:            "contrail_api_token.ci",
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"token"},
			},
			{
				Config:          config("deploy"),
				ResourceName:    "contrail_api_token.ci",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
			},
			{
				PreConfig: func() {
					if err := tn.Client.DeleteToken(ctx(t), id); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config("deploy"),
				ConfigPlanChecks: planAction("contrail_api_token.ci", plancheck.ResourceActionCreate),
				Check:            resource.ComposeAggregateTestCheckFunc(idOf("contrail_api_token.ci", &id), capture),
			},
		},
	})
}
