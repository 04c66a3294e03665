package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// Defaults of a new account's limits, equal to the control plane's
// (tenant.DefaultLimits), so an account that leaves them out plans empty.
const (
	defaultMaxMemory  = 256 << 20
	defaultMaxStorage = 1 << 30
)

// syncTimeout bounds the wait for an account's cell to have its JWT.
const syncTimeout = 30 * time.Second

type accountResource struct{ c *client.Client }

func newAccountResource() resource.Resource { return &accountResource{} }

type accountModel struct {
	ID             types.String `tfsdk:"id"`
	Name           types.String `tfsdk:"name"`
	MaxConnections types.Int64  `tfsdk:"max_connections"`
	MaxPayload     types.Int64  `tfsdk:"max_payload"`
	MaxMemory      types.Int64  `tfsdk:"max_memory"`
	MaxStorage     types.Int64  `tfsdk:"max_storage"`
	MaxStreams     types.Int64  `tfsdk:"max_streams"`
	MaxConsumers   types.Int64  `tfsdk:"max_consumers"`
	MaxAckPending  types.Int64  `tfsdk:"max_ack_pending"`
	Tiers          *tiersModel  `tfsdk:"tiers"`
	PublicKey      types.String `tfsdk:"public_key"`
	NatsURL        types.String `tfsdk:"nats_url"`
	CreatedAt      types.String `tfsdk:"created_at"`
}

func (r *accountResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_account"
}

// limitAttr is an account limit: optional, with the server's default.
func limitAttr(def int64, what string) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def),
		Description: fmt.Sprintf("%s; -1 for unlimited. Defaults to %d. Changed in place.", what, def)}
}

func computedString(desc string) schema.StringAttribute {
	return schema.StringAttribute{Computed: true, Description: desc,
		PlanModifiers: []planmodifier.String{keepState{}}}
}

func (r *accountResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Contrail account: a NATS account with its own JetStream limits. Name and limits change in place; " +
			"create and update wait until the account's cell has applied them.",
		Attributes: map[string]schema.Attribute{
			"id":              computedString("The account's ID."),
			"name":            schema.StringAttribute{Required: true, Description: "The account's name (1 to 64 characters). Changed in place."},
			"max_connections": limitAttr(-1, "Client connections at once"),
			"max_payload":     limitAttr(-1, "Largest message, in bytes"),
			"max_memory": schema.Int64Attribute{Optional: true, Computed: true,
				Default: int64default.StaticInt64(defaultMaxMemory),
				Description: "Bytes of memory storage for streams; -1 for unlimited, 0 (with max_storage 0) turns JetStream off. " +
					"Defaults to 256 MiB. Changed in place."},
			"max_storage": schema.Int64Attribute{Optional: true, Computed: true,
				Default: int64default.StaticInt64(defaultMaxStorage),
				Description: "Bytes of file storage for streams; -1 for unlimited, 0 (with max_memory 0) turns JetStream off. " +
					"Defaults to 1 GiB. Changed in place."},
			"max_streams":     limitAttr(-1, "Streams"),
			"max_consumers":   limitAttr(-1, "Consumers of each stream"),
			"max_ack_pending": limitAttr(-1, "Unacknowledged messages per consumer"),
			"tiers":           tiersAttr(),
			"public_key":      computedString("The account's NATS public key (A...)."),
			"nats_url":        computedString("Where the account's clients connect."),
			"created_at":      computedString("When the account was created (RFC 3339)."),
		},
	}
}

func (r *accountResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (m *accountModel) request() client.AccountRequest {
	return client.AccountRequest{Name: m.Name.ValueString(), Limits: &client.Limits{
		MaxConnections: m.MaxConnections.ValueInt64(),
		MaxPayload:     m.MaxPayload.ValueInt64(),
		JetStream: client.JetStreamLimits{
			MaxMemory:     m.MaxMemory.ValueInt64(),
			MaxStorage:    m.MaxStorage.ValueInt64(),
			MaxStreams:    m.MaxStreams.ValueInt64(),
			MaxConsumers:  m.MaxConsumers.ValueInt64(),
			MaxAckPending: m.MaxAckPending.ValueInt64(),
			Tiers:         m.Tiers.api(),
		},
	}}
}

// set fills every attribute from the API's account.
func (m *accountModel) set(a *client.Account) {
	m.ID = types.StringValue(a.ID)
	m.Name = types.StringValue(a.Name)
	m.MaxConnections = types.Int64Value(a.Limits.MaxConnections)
	m.MaxPayload = types.Int64Value(a.Limits.MaxPayload)
	m.MaxMemory = types.Int64Value(a.Limits.JetStream.MaxMemory)
	m.MaxStorage = types.Int64Value(a.Limits.JetStream.MaxStorage)
	m.MaxStreams = types.Int64Value(a.Limits.JetStream.MaxStreams)
	m.MaxConsumers = types.Int64Value(a.Limits.JetStream.MaxConsumers)
	m.MaxAckPending = types.Int64Value(a.Limits.JetStream.MaxAckPending)
	m.Tiers = tiersOf(a.Limits.JetStream.Tiers)
	m.PublicKey = types.StringValue(a.PublicKey)
	m.NatsURL = types.StringValue(a.NatsURL)
	m.CreatedAt = timeString(a.CreatedAt)
}

// waitInSync waits until the account's cell has its latest JWT (limits
// and revocations), so what Terraform reports applied is what the cell
// enforces.
func waitInSync(ctx context.Context, c *client.Client, id string, diags *diag.Diagnostics) {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		a, err := c.Account(ctx, id)
		if err == nil && a.InSync {
			return
		}
		select {
		case <-ctx.Done():
			detail := fmt.Sprintf("account %s: its cell has not applied the change within %v; the control plane keeps "+
				"retrying, and the next apply checks again", id, syncTimeout)
			if err != nil {
				detail += ": " + err.Error()
			}
			diags.AddError("Contrail: account not in sync with its cell", detail)
			return
		case <-tick.C:
		}
	}
}

// write sends the planned account with call (create or update), stores
// what the API answers, and waits for the cell to have it.
func (r *accountResource) write(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics,
	what string, call func(context.Context, *accountModel) (*client.Account, error)) {
	var m accountModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	a, err := call(ctx, &m)
	if err != nil {
		failed(diags, what+" account", err)
		return
	}
	m.set(a)
	diags.Append(state.Set(ctx, &m)...)
	waitInSync(ctx, r.c, a.ID, diags)
}

func (r *accountResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.write(ctx, req.Plan, &resp.State, &resp.Diagnostics, "creating", func(ctx context.Context, m *accountModel) (*client.Account, error) {
		return r.c.CreateAccount(ctx, m.request())
	})
}

func (r *accountResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m accountModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a, err := r.c.Account(ctx, m.ID.ValueString())
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "reading account", err)
		return
	}
	m.set(a)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *accountResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.write(ctx, req.Plan, &resp.State, &resp.Diagnostics, "updating", func(ctx context.Context, m *accountModel) (*client.Account, error) {
		return r.c.UpdateAccount(ctx, m.ID.ValueString(), m.request())
	})
}

func (r *accountResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m accountModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteAccount(ctx, m.ID.ValueString()); err != nil && !notFound(err) {
		failed(&resp.Diagnostics, "deleting account", err)
	}
}

func (r *accountResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
