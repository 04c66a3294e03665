package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// defaultTokenTTL is the control plane's default API token lifetime (30
// days), so a token that leaves ttl_seconds out plans empty.
const defaultTokenTTL = 30 * 24 * 60 * 60

type tokenResource struct{ c *client.Client }

func newTokenResource() resource.Resource { return &tokenResource{} }

type tokenModel struct {
	ID         types.String `tfsdk:"id"`
	Name       types.String `tfsdk:"name"`
	TTLSeconds types.Int64  `tfsdk:"ttl_seconds"`
	Token      types.String `tfsdk:"token"`
	CreatedAt  types.String `tfsdk:"created_at"`
	ExpiresAt  types.String `tfsdk:"expires_at"`
}

func (r *tokenResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_api_token"
}

func (r *tokenResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "An API token of the person whose token configures the provider (for CI, scripts, another " +
			"provider block). The API cannot change a token: name and ttl_seconds replace it. The secret is in the " +
			"state in plain text: protect the state. An expired or revoked token leaves the state, and the next apply makes a new one.",
		Attributes: map[string]schema.Attribute{
			"id": computedString("The token's ID."),
			"name": schema.StringAttribute{Required: true, Description: "The token's name. Changing it replaces the token.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"ttl_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultTokenTTL),
				Description:   "Lifetime in seconds, at most a year; 30 days if left out. Changing it replaces the token.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()}},
			"token": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: []planmodifier.String{keepState{}},
				Description: "The bearer token. Set at create only: an imported token has none."},
			"created_at": computedString("When the token was made (RFC 3339)."),
			"expires_at": computedString("When the token stops working (RFC 3339)."),
		},
	}
}

func (r *tokenResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (m *tokenModel) set(t *client.Token) {
	m.ID = types.StringValue(t.ID)
	m.Name = types.StringValue(t.Name)
	m.CreatedAt = timeString(t.CreatedAt)
	m.ExpiresAt = timeString(t.ExpiresAt)
	// The API keeps no ttl: it is the span the token was made for.
	m.TTLSeconds = types.Int64Value(int64(t.ExpiresAt.Sub(t.CreatedAt).Seconds()))
}

func (r *tokenResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ttl := m.TTLSeconds.ValueInt64()
	t, err := r.c.CreateToken(ctx, client.TokenRequest{Name: m.Name.ValueString(), TTLSeconds: &ttl})
	if err != nil {
		failed(&resp.Diagnostics, "creating API token", err)
		return
	}
	m.set(t)
	m.Token = types.StringValue(t.Token)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *tokenResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, err := r.c.Token(ctx, m.ID.ValueString())
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "reading API token", err)
		return
	}
	m.set(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update is never needed (every argument replaces the token) but is part
// of the interface: it keeps the plan.
func (r *tokenResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *tokenResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteToken(ctx, m.ID.ValueString()); err != nil && !notFound(err) {
		failed(&resp.Diagnostics, "revoking API token", err)
	}
}

func (r *tokenResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
