package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

type streamResource struct{ c *client.Client }

func newStreamResource() resource.Resource { return &streamResource{} }

type streamModel struct {
	ID                   types.String `tfsdk:"id"`
	AccountID            types.String `tfsdk:"account_id"`
	Name                 types.String `tfsdk:"name"`
	Description          types.String `tfsdk:"description"`
	Subjects             types.List   `tfsdk:"subjects"`
	Retention            types.String `tfsdk:"retention"`
	Storage              types.String `tfsdk:"storage"`
	Discard              types.String `tfsdk:"discard"`
	DiscardNewPerSubject types.Bool   `tfsdk:"discard_new_per_subject"`
	MaxConsumers         types.Int64  `tfsdk:"max_consumers"`
	MaxMsgs              types.Int64  `tfsdk:"max_msgs"`
	MaxBytes             types.Int64  `tfsdk:"max_bytes"`
	MaxAge               types.Int64  `tfsdk:"max_age"`
	MaxMsgsPerSubject    types.Int64  `tfsdk:"max_msgs_per_subject"`
	MaxMsgSize           types.Int64  `tfsdk:"max_msg_size"`
	Replicas             types.Int64  `tfsdk:"replicas"`
	DuplicateWindow      types.Int64  `tfsdk:"duplicate_window"`
	Compression          types.String `tfsdk:"compression"`
	NoAck                types.Bool   `tfsdk:"no_ack"`
	AllowRollup          types.Bool   `tfsdk:"allow_rollup_hdrs"`
	DenyDelete           types.Bool   `tfsdk:"deny_delete"`
	DenyPurge            types.Bool   `tfsdk:"deny_purge"`
	AllowDirect          types.Bool   `tfsdk:"allow_direct"`
	AllowMsgTTL          types.Bool   `tfsdk:"allow_msg_ttl"`
	Metadata             types.Map    `tfsdk:"metadata"`
	RePublish            *republish   `tfsdk:"republish"`
	CreatedAt            types.String `tfsdk:"created_at"`
}

type republish struct {
	Source      types.String `tfsdk:"source"`
	Destination types.String `tfsdk:"destination"`
	HeadersOnly types.Bool   `tfsdk:"headers_only"`
}

func (r *streamResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_stream"
}

func streamInt(def int64, desc string) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def),
		Description: fmt.Sprintf("%s Defaults to %d.", desc, def)}
}

func streamBool(desc string) schema.BoolAttribute {
	return schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
		Description: desc + " Defaults to false."}
}

func streamEnum(def, desc string) schema.StringAttribute {
	return schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(def),
		Description: fmt.Sprintf("%s Defaults to %q.", desc, def)}
}

func (r *streamResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A JetStream stream in a Contrail account, managed through the control plane (which acts on the " +
			"account's cell as the account). Changes follow nats-server's update rules: what the server changes in place " +
			"is updated in place; only account_id, name, storage, retention to or from workqueue, and turning deny_delete, " +
			"deny_purge or allow_msg_ttl off replace the stream, which deletes its messages (the plan warns).",
		Attributes: map[string]schema.Attribute{
			"id":          computedString("account_id/name."),
			"account_id":  schema.StringAttribute{Required: true, Description: "The account the stream belongs to. Changing it replaces the stream."},
			"name":        schema.StringAttribute{Required: true, Description: "The stream's name. Changing it replaces the stream."},
			"description": schema.StringAttribute{Optional: true, Description: "A description."},
			"subjects": schema.ListAttribute{Optional: true, Computed: true, ElementType: types.StringType,
				// Left out of the config, an update keeps the stream's
				// subjects rather than resetting them to the name.
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
				Description:   "Subjects the stream captures (wildcards allowed); the stream's name if left out at create."},
			"retention":               streamEnum("limits", "limits, interest or workqueue. Changing to or from workqueue replaces the stream."),
			"storage":                 streamEnum("file", "file or memory. Changing it replaces the stream."),
			"discard":                 streamEnum("old", "What a full stream discards: old or new."),
			"discard_new_per_subject": streamBool("Apply discard new per subject (needs discard new and max_msgs_per_subject)."),
			"max_consumers":           streamInt(-1, "Consumers at most; -1 for unlimited."),
			"max_msgs":                streamInt(-1, "Messages kept at most; -1 for unlimited."),
			"max_bytes":               streamInt(-1, "Bytes kept at most; -1 for unlimited."),
			"max_age":                 streamInt(0, "Seconds a message is kept; 0 for ever."),
			"max_msgs_per_subject":    streamInt(-1, "Messages kept per subject; -1 for unlimited."),
			"max_msg_size":            streamInt(-1, "Largest message in bytes; -1 for the account's max_payload."),
			"replicas":                streamInt(1, "Copies of each message (1, or 3 on a clustered cell)."),
			"duplicate_window": schema.Int64Attribute{Optional: true, Computed: true,
				Description: "Seconds within which a repeated Nats-Msg-Id is dropped; the server's default (two minutes, or max_age if shorter) if left out."},
			"compression":       streamEnum("none", "none or s2."),
			"no_ack":            streamBool("Publishes are not acknowledged."),
			"allow_rollup_hdrs": streamBool("Allow the Nats-Rollup header."),
			"deny_delete":       streamBool("Refuse deleting messages. Turning it off replaces the stream."),
			"deny_purge":        streamBool("Refuse purges. Turning it off replaces the stream."),
			"allow_direct":      streamBool("Allow direct get ($JS.API.DIRECT.GET)."),
			"allow_msg_ttl":     streamBool("Honour per-message TTLs (Nats-TTL). Turning it off replaces the stream."),
			"metadata": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "Free-form metadata (keys starting with _nats. are the server's)."},
			"republish": schema.SingleNestedAttribute{Optional: true,
				Description: "Send each stored message on again to another subject.",
				Attributes: map[string]schema.Attribute{
					"source": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(">"),
						Description: "The stored subjects to republish. Defaults to \">\"."},
					"destination": schema.StringAttribute{Required: true, Description: "The subject to republish to (may use the source's wildcards)."},
					"headers_only": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						Description: "Republish headers without the payload. Defaults to false."},
				}},
			"created_at": computedString("When the stream was created (RFC 3339)."),
		},
	}
}

func (r *streamResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// replaceReasons lists what in plan, against the state, nats-server
// cannot change on an existing stream, and why. This is the one place
// the provider holds the update rules; the control plane holds them too
// and refuses what slips through.
func replaceReasons(state, plan *streamModel) map[string]string {
	out := map[string]string{}
	if !plan.AccountID.Equal(state.AccountID) {
		out["account_id"] = "a stream cannot move between accounts"
	}
	if !plan.Name.Equal(state.Name) {
		out["name"] = "a stream cannot be renamed"
	}
	if known(plan.Storage) && !plan.Storage.Equal(state.Storage) {
		out["storage"] = "nats-server cannot change a stream's storage"
	}
	if known(plan.Retention) && !plan.Retention.Equal(state.Retention) &&
		(plan.Retention.ValueString() == "workqueue" || state.Retention.ValueString() == "workqueue") {
		out["retention"] = "nats-server cannot change retention to or from workqueue"
	}
	for attr, v := range map[string][2]types.Bool{
		"deny_delete": {state.DenyDelete, plan.DenyDelete}, "deny_purge": {state.DenyPurge, plan.DenyPurge},
		"allow_msg_ttl": {state.AllowMsgTTL, plan.AllowMsgTTL},
	} {
		if v[0].ValueBool() && known(v[1]) && !v[1].ValueBool() {
			out[attr] = "nats-server cannot turn " + attr + " off"
		}
	}
	return out
}

func known(v interface{ IsUnknown() bool }) bool { return !v.IsUnknown() }

// ModifyPlan forces replacement only where nats-server cannot update in
// place, and warns that replacing a stream deletes its messages.
func (r *streamResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var state, plan streamModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	reasons := replaceReasons(&state, &plan)
	if len(reasons) == 0 {
		return
	}
	var why []string
	for _, attr := range []string{"account_id", "name", "storage", "retention", "deny_delete", "deny_purge", "allow_msg_ttl"} {
		if reason, ok := reasons[attr]; ok {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root(attr))
			why = append(why, attr+" ("+reason+")")
		}
	}
	resp.Diagnostics.AddWarning("Contrail: stream "+state.Name.ValueString()+" will be replaced, deleting its messages",
		"Replacing a stream deletes it, with every message and consumer it holds, and creates it anew empty. Forced by: "+
			strings.Join(why, ", ")+".")
}

// config is the API's config for the planned stream.
func (m *streamModel) config(ctx context.Context, diagsOut *[]string) client.StreamConfig {
	cfg := client.StreamConfig{
		Description:          m.Description.ValueString(),
		Retention:            m.Retention.ValueString(),
		MaxConsumers:         m.MaxConsumers.ValueInt64(),
		MaxMsgs:              m.MaxMsgs.ValueInt64(),
		MaxBytes:             m.MaxBytes.ValueInt64(),
		MaxAge:               int64(time.Duration(m.MaxAge.ValueInt64()) * time.Second),
		MaxMsgsPerSubject:    m.MaxMsgsPerSubject.ValueInt64(),
		MaxMsgSize:           m.MaxMsgSize.ValueInt64(),
		Discard:              m.Discard.ValueString(),
		DiscardNewPerSubject: m.DiscardNewPerSubject.ValueBool(),
		Storage:              m.Storage.ValueString(),
		Replicas:             m.Replicas.ValueInt64(),
		Compression:          m.Compression.ValueString(),
		NoAck:                m.NoAck.ValueBool(),
		AllowRollup:          m.AllowRollup.ValueBool(),
		DenyDelete:           m.DenyDelete.ValueBool(),
		DenyPurge:            m.DenyPurge.ValueBool(),
		AllowDirect:          m.AllowDirect.ValueBool(),
		AllowMsgTTL:          m.AllowMsgTTL.ValueBool(),
	}
	if r := m.RePublish; r != nil {
		cfg.RePublish = &client.RePublish{Source: r.Source.ValueString(), Destination: r.Destination.ValueString(),
			HeadersOnly: r.HeadersOnly.ValueBool()}
	}
	if known(m.DuplicateWindow) && !m.DuplicateWindow.IsNull() {
		cfg.DuplicateWindow = int64(time.Duration(m.DuplicateWindow.ValueInt64()) * time.Second)
	}
	if known(m.Subjects) && !m.Subjects.IsNull() {
		if d := m.Subjects.ElementsAs(ctx, &cfg.Subjects, false); d.HasError() {
			*diagsOut = append(*diagsOut, "subjects: not a list of strings")
		}
	}
	if !m.Metadata.IsNull() && known(m.Metadata) {
		if d := m.Metadata.ElementsAs(ctx, &cfg.Metadata, false); d.HasError() {
			*diagsOut = append(*diagsOut, "metadata: not a map of strings")
		}
	}
	return cfg
}

// set fills every attribute from the API's stream.
func (m *streamModel) set(accountID string, s *client.Stream) {
	c := s.Config
	m.ID = types.StringValue(accountID + "/" + s.Name)
	m.AccountID = types.StringValue(accountID)
	m.Name = types.StringValue(s.Name)
	m.Description = types.StringNull()
	if c.Description != "" {
		m.Description = types.StringValue(c.Description)
	}
	subjects := stringList(c.Subjects)
	if subjects.IsNull() {
		subjects = types.ListValueMust(types.StringType, nil)
	}
	m.Subjects = subjects
	m.Retention = types.StringValue(c.Retention)
	m.Storage = types.StringValue(c.Storage)
	m.Discard = types.StringValue(c.Discard)
	m.DiscardNewPerSubject = types.BoolValue(c.DiscardNewPerSubject)
	m.MaxConsumers = types.Int64Value(c.MaxConsumers)
	m.MaxMsgs = types.Int64Value(c.MaxMsgs)
	m.MaxBytes = types.Int64Value(c.MaxBytes)
	m.MaxAge = types.Int64Value(int64(time.Duration(c.MaxAge) / time.Second))
	m.MaxMsgsPerSubject = types.Int64Value(c.MaxMsgsPerSubject)
	m.MaxMsgSize = types.Int64Value(c.MaxMsgSize)
	m.Replicas = types.Int64Value(c.Replicas)
	m.DuplicateWindow = types.Int64Value(int64(time.Duration(c.DuplicateWindow) / time.Second))
	m.Compression = types.StringValue(c.Compression)
	m.NoAck = types.BoolValue(c.NoAck)
	m.AllowRollup = types.BoolValue(c.AllowRollup)
	m.DenyDelete = types.BoolValue(c.DenyDelete)
	m.DenyPurge = types.BoolValue(c.DenyPurge)
	m.AllowDirect = types.BoolValue(c.AllowDirect)
	m.AllowMsgTTL = types.BoolValue(c.AllowMsgTTL)
	m.Metadata = types.MapNull(types.StringType)
	if len(c.Metadata) > 0 {
		m.Metadata, _ = types.MapValueFrom(context.Background(), types.StringType, c.Metadata)
	}
	m.RePublish = nil
	if r := c.RePublish; r != nil {
		src := r.Source
		if src == "" {
			src = ">"
		}
		m.RePublish = &republish{Source: types.StringValue(src), Destination: types.StringValue(r.Destination),
			HeadersOnly: types.BoolValue(r.HeadersOnly)}
	}
	m.CreatedAt = timeString(s.Created)
}

// write sends the planned config with call (create or update) and
// stores the stream the API answers.
func (r *streamResource) write(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics,
	what string, call func(context.Context, string, string, client.StreamConfig) (*client.Stream, error)) {
	var m streamModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	var bad []string
	cfg := m.config(ctx, &bad)
	if len(bad) > 0 {
		diags.AddError("Contrail: stream config", strings.Join(bad, "; "))
		return
	}
	s, err := call(ctx, m.AccountID.ValueString(), m.Name.ValueString(), cfg)
	if err != nil {
		failed(diags, what+" stream "+m.Name.ValueString(), err)
		return
	}
	m.set(m.AccountID.ValueString(), s)
	diags.Append(state.Set(ctx, &m)...)
}

func (r *streamResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.write(ctx, req.Plan, &resp.State, &resp.Diagnostics, "creating", r.c.CreateStream)
}

func (r *streamResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m streamModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	s, err := r.c.Stream(ctx, m.AccountID.ValueString(), m.Name.ValueString())
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		failed(&resp.Diagnostics, "reading stream "+m.Name.ValueString(), err)
		return
	}
	m.set(m.AccountID.ValueString(), s)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *streamResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.write(ctx, req.Plan, &resp.State, &resp.Diagnostics, "updating", r.c.UpdateStream)
}

func (r *streamResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m streamModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteStream(ctx, m.AccountID.ValueString(), m.Name.ValueString()); err != nil && !notFound(err) {
		failed(&resp.Diagnostics, "deleting stream "+m.Name.ValueString(), err)
	}
}

func (r *streamResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	acc, name, err := splitID(req.ID, "account_id/stream_name")
	if err != nil {
		resp.Diagnostics.AddError("Contrail: importing stream", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("account_id"), acc)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
