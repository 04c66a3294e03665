package provider_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/contrail/contrail/terraform/provider"
)

// TestAccProviderConfig: a missing endpoint or token, and a token the
// control plane refuses, are clear errors, not a crash or an empty plan.
func TestAccProviderConfig(t *testing.T) {
	t.Setenv(provider.EnvEndpoint, "")
	t.Setenv(provider.EnvToken, "")
	account := `
resource "contrail_account" "a" {
  name = "x"
}
`
	for _, c := range []struct {
		name, config string
		want         string
	}{
		{"no endpoint", `provider "contrail" {
  token = "t"
}
` + account, "No Contrail endpoint"},
		{"no token", fmt.Sprintf(`provider "contrail" {
  endpoint = %q
}
`, dev.URL) + account, "No Contrail API token"},
		{"bad endpoint", `provider "contrail" {
  endpoint = "ftp://x"
  token    = "t"
}
` + account, "must be an http"},
		{"refused token", fmt.Sprintf(`provider "contrail" {
  endpoint = %q
  token    = "not-a-token"
}
`, dev.URL) + account, "401 Unauthorized"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps:                    []resource.TestStep{{Config: c.config, ExpectError: regexp.MustCompile(c.want)}},
			})
		})
	}
}
