package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// The API cannot change a user: every argument replaces it (a new key
// pair and new creds; the old user is revoked).

type userResource struct{ c *client.Client }

func newUserResource() resource.Resource { return &userResource{} }

type userModel struct {
	ID               types.String `tfsdk:"id"`
	AccountID        types.String `tfsdk:"account_id"`
	Name             types.String `tfsdk:"name"`
	PublishAllow     types.List   `tfsdk:"publish_allow"`
	PublishDeny      types.List   `tfsdk:"publish_deny"`
	SubscribeAllow   types.List   `tfsdk:"subscribe_allow"`
	SubscribeDeny    types.List   `tfsdk:"subscribe_deny"`
	ExpiresInSeconds types.Int64  `tfsdk:"expires_in_seconds"`
	Rotation         types.Map    `tfsdk:"rotation"`
	PublicKey        types.String `tfsdk:"public_key"`
	Creds            types.String `tfsdk:"creds"`
	ExpiresAt        types.String `tfsdk:"expires_at"`
	CreatedAt        types.String `tfsdk:"created_at"`
}

func (r *userResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_user"
}

func subjectsAttr(desc string) schema.ListAttribute {
	return schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: desc + " Changing it replaces the user.",
		PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplaceIf(subjectsChanged,
			"Replaces the user unless the list only changes between left out and [].",
			"Replaces the user unless the list only changes between left out and `[]`.")}}
}

// subjectsChanged asks for a new user unless the list only moves between
// null and [], which mean the same (an imported user reads back null).
func subjectsChanged(_ context.Context, req planmodifier.ListRequest, resp *listplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = req.PlanValue.IsUnknown() || len(req.StateValue.Elements()) != 0 || len(req.PlanValue.Elements()) != 0
}

func (r *userResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A NATS user of a Contrail account, with its creds file. The API cannot change a user, so every " +
			"argument replaces it: a new key pair and creds, and the old user revoked (its connections closed). " +
			"The creds are in the state in plain text: protect the state.",
		Attributes: map[string]schema.Attribute{
			"id":              computedString("The user's ID."),
			"account_id":      schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The account the user belongs to."},
			"name":            schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The user's name."},
			"publish_allow":   subjectsAttr("Subjects the user may publish to (wildcards allowed); all if left out."),
			"publish_deny":    subjectsAttr("Subjects the user may not publish to."),
			"subscribe_allow": subjectsAttr("Subjects the user may subscribe to; all if left out."),
			"subscribe_deny":  subjectsAttr("Subjects the user may not subscribe to."),
			"expires_in_seconds": schema.Int64Attribute{Optional: true, Description: "How long the user's creds work, " +
				"from creation; forever if left out. Changing it replaces the user.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()}},
			"rotation": schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Arbitrary keepers: " +
				"changing any value replaces the user with new creds (rotation without other changes).",
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()}},
			"public_key": computedString("The user's NATS public key (U...)."),
			"creds": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: []planmodifier.String{keepState{}},
				Description: "The creds file (user JWT and seed) for NATS clients. Set at create only: the control plane " +
					"never stores it, so an imported user has none (replace it, for example by changing rotation, to get creds)."},
			"expires_at": computedString("When the creds stop working (RFC 3339); empty if never."),
			"created_at": computedString("When the user was created (RFC 3339)."),
		},
	}
}

func (r *userResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// listStrings reads a list of strings: nil for null and for an empty
// list, which the API treats alike.
func listStrings(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	if len(out) == 0 {
		return nil
	}
	return out
}

// keepEmpty is got, unless got is null and prior an empty list: then
// prior. A permission list written [] means what one left out means (the
// direction is unrestricted), and the API keeps no difference between
// them, so [] in a config must read back as [] for plans to stay empty.
func keepEmpty(prior, got types.List) types.List {
	if got.IsNull() && !prior.IsNull() && !prior.IsUnknown() && len(prior.Elements()) == 0 {
		return prior
	}
	return got
}

// stringList is a list attribute's value: null for none, so a list left
// out of the config reads back as it was written.
func stringList(v []string) types.List {
	if len(v) == 0 {
		return types.ListNull(types.StringType)
	}
	elems := make([]attr.Value, len(v))
	for i, s := range v {
		elems[i] = types.StringValue(s)
	}
	return types.ListValueMust(types.StringType, elems)
}

// set fills the attributes the API returns. Rotation is the config's
// (the API has no such field) and stays as it is; creds only the create
// answer has.
func (m *userModel) set(accountID string, u *client.User) {
	prior := *m
	m.ID = types.StringValue(u.ID)
	m.AccountID = types.StringValue(accountID)
	m.Name = types.StringValue(u.Name)
	var p client.Permissions
	if u.Permissions != nil {
		p = *u.Permissions
	}
	m.PublishAllow, m.PublishDeny = stringList(p.Publish.Allow), stringList(p.Publish.Deny)
	m.SubscribeAllow, m.SubscribeDeny = stringList(p.Subscribe.Allow), stringList(p.Subscribe.Deny)
	m.PublishAllow, m.PublishDeny = keepEmpty(prior.PublishAllow, m.PublishAllow), keepEmpty(prior.PublishDeny, m.PublishDeny)
	m.SubscribeAllow = keepEmpty(prior.SubscribeAllow, m.SubscribeAllow)
	m.SubscribeDeny = keepEmpty(prior.SubscribeDeny, m.SubscribeDeny)
	m.PublicKey = types.StringValue(u.PublicKey)
	m.ExpiresAt = types.StringValue("")
	m.ExpiresInSeconds = types.Int64Null()
	if u.ExpiresAt != nil {
		m.ExpiresAt = timeString(*u.ExpiresAt)
		// The API keeps no ttl: it is the span the user was made for.
		m.ExpiresInSeconds = types.Int64Value(int64(u.ExpiresAt.Sub(u.CreatedAt).Seconds()))
	}
	m.CreatedAt = timeString(u.CreatedAt)
}

func (r *userResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m userModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ureq := client.UserRequest{Name: m.Name.ValueString()}
	perms := client.Permissions{
		Publish: client.Permission{Allow: listStrings(ctx, m.PublishAllow, &resp.Diagnostics),
			Deny: listStrings(ctx, m.PublishDeny, &resp.Diagnostics)},
		Subscribe: client.Permission{Allow: listStrings(ctx, m.SubscribeAllow, &resp.Diagnostics),
			Deny: listStrings(ctx, m.SubscribeDeny, &resp.Diagnostics)},
	}
	if perms.Publish.Allow != nil || perms.Publish.Deny != nil || perms.Subscribe.Allow != nil || perms.Subscribe.Deny != nil {
		ureq.Permissions = &perms
	}
	if !m.ExpiresInSeconds.IsNull() {
		v := m.ExpiresInSeconds.ValueInt64()
		ureq.ExpiresInSeconds = &v
	}
	if resp.Diagnostics.HasError() {
		return
	}
	u, err := r.c.CreateUser(ctx, m.AccountID.ValueString(), ureq)
	if err != nil {
		failed(&resp.Diagnostics, "creating user", err)
		return
	}
	m.set(m.AccountID.ValueString(), u)
	m.Creds = types.StringValue(u.Creds)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m userModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	u, err := r.c.User(ctx, m.AccountID.ValueString(), m.ID.ValueString())
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "reading user", err)
		return
	}
	m.set(m.AccountID.ValueString(), u)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update only carries config-only values into state: every argument the
// API holds replaces the user.
func (r *userResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m userModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m userModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.c.DeleteUser(ctx, m.AccountID.ValueString(), m.ID.ValueString())
	if notFound(err) {
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "revoking user", err)
		return
	}
	// The revocation is in the account's JWT: done once the cell has it
	// (and has closed the user's connections).
	waitInSync(ctx, r.c, m.AccountID.ValueString(), &resp.Diagnostics)
}

func (r *userResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	acc, id, err := splitID(req.ID, "account_id/user_id")
	if err != nil {
		resp.Diagnostics.AddError("Contrail: importing user", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("account_id"), acc)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.AddWarning("Contrail: imported user has no creds",
		"The control plane never stores a user's creds, so an imported contrail_user has creds = null. "+
			"Replace the user (for example by setting or changing rotation) to get new creds.")
}
