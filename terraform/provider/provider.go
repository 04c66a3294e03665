// Package provider is Contrail's Terraform provider (on
// terraform-plugin-framework): accounts with limits, users whose creds
// land in state, API tokens and streams, managed through the control
// plane's REST API with one endpoint and one token.
//
// Every resource follows the same rules: Read sets every attribute from
// the API and removes the resource from state on a 404, so drift made
// elsewhere shows in the next plan; stable computed values keep their
// state (no "known after apply" on every plan); and replacement is
// forced only where the API cannot change a value in place.
package provider

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// Environment variables the provider reads when its config leaves the
// matching argument out.
const (
	EnvEndpoint = "CONTRAIL_ENDPOINT"
	EnvToken    = "CONTRAIL_TOKEN"
)

// New returns a constructor of the provider, as providerserver wants it.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &contrailProvider{version: version} }
}

type contrailProvider struct{ version string }

type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
}

func (p *contrailProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "contrail"
	resp.Version = p.version
}

func (p *contrailProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages Contrail accounts, NATS users, API tokens and JetStream streams through the control plane's REST API.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "The control plane's base URL, like http://127.0.0.1:8080. Defaults to $" + EnvEndpoint + ".",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "An API token (POST /v1/tokens, or the console). Defaults to $" + EnvToken + ".",
			},
		},
	}
}

func (p *contrailProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() || cfg.Token.IsUnknown() {
		// Known only after another resource applies; resources are
		// planned without a client until then.
		return
	}
	endpoint, token := os.Getenv(EnvEndpoint), os.Getenv(EnvToken)
	if !cfg.Endpoint.IsNull() {
		endpoint = cfg.Endpoint.ValueString()
	}
	if !cfg.Token.IsNull() {
		token = cfg.Token.ValueString()
	}
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "No Contrail endpoint",
			"Set endpoint in the provider block or $"+EnvEndpoint+" to the control plane's URL.")
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "No Contrail API token",
			"Set token in the provider block or $"+EnvToken+" to an API token.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := client.New(endpoint, token)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Contrail provider configuration", err.Error())
		return
	}
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *contrailProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newAccountResource, newUserResource, newTokenResource, newStreamResource}
}

func (p *contrailProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newAccountDataSource, newAccountsDataSource, newStreamsDataSource}
}
