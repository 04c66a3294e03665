package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// The account data sources show accountModel, the resource's model:
// the same attributes, all computed.

func summarize(a *client.Account) accountModel {
	var m accountModel
	m.set(a)
	return m
}

// accountAttrs are an account's attributes in a data source; lookup
// names the ones a contrail_account data source is found by.
func accountAttrs(lookup bool) map[string]schema.Attribute {
	out := map[string]schema.Attribute{
		"id":              schema.StringAttribute{Computed: true, Description: "The account's ID."},
		"name":            schema.StringAttribute{Computed: true, Description: "The account's name."},
		"public_key":      schema.StringAttribute{Computed: true, Description: "The account's NATS public key."},
		"nats_url":        schema.StringAttribute{Computed: true, Description: "Where the account's clients connect."},
		"created_at":      schema.StringAttribute{Computed: true, Description: "When the account was created (RFC 3339)."},
		"max_connections": schema.Int64Attribute{Computed: true, Description: "Client connections at once; -1 unlimited."},
		"max_payload":     schema.Int64Attribute{Computed: true, Description: "Largest message in bytes; -1 unlimited."},
		"max_memory":      schema.Int64Attribute{Computed: true, Description: "Bytes of memory storage; -1 unlimited."},
		"max_storage":     schema.Int64Attribute{Computed: true, Description: "Bytes of file storage; -1 unlimited."},
		"max_streams":     schema.Int64Attribute{Computed: true, Description: "Streams; -1 unlimited."},
		"max_consumers":   schema.Int64Attribute{Computed: true, Description: "Consumers of each stream; -1 unlimited."},
		"max_ack_pending": schema.Int64Attribute{Computed: true, Description: "Unacknowledged messages per consumer; -1 unlimited."},
		"tiers":           tiersDataAttr(),
	}
	if lookup {
		out["id"] = schema.StringAttribute{Optional: true, Computed: true, Description: "The account's ID; give this or name."}
		out["name"] = schema.StringAttribute{Optional: true, Computed: true, Description: "The account's name; give this or id. It must be unique in the organization."}
	}
	return out
}

// ---------------------------------------------------------------------
// contrail_account

type accountDataSource struct{ c *client.Client }

func newAccountDataSource() datasource.DataSource { return &accountDataSource{} }

func (d *accountDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_account"
}

func (d *accountDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "One account of the organization, by id or by name.", Attributes: accountAttrs(true)}
}

func (d *accountDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *accountDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m accountModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.ID.IsNull() == m.Name.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("id"), "Contrail: account lookup", "give exactly one of id and name")
		return
	}
	var found *client.Account
	if !m.ID.IsNull() {
		a, err := d.c.Account(ctx, m.ID.ValueString())
		if err != nil {
			failed(&resp.Diagnostics, "reading account "+m.ID.ValueString(), err)
			return
		}
		found = a
	} else {
		all, err := d.c.Accounts(ctx)
		if err != nil {
			failed(&resp.Diagnostics, "listing accounts", err)
			return
		}
		for i := range all {
			if all[i].Name != m.Name.ValueString() {
				continue
			}
			if found != nil {
				resp.Diagnostics.AddAttributeError(path.Root("name"), "Contrail: account lookup",
					"more than one account is named "+m.Name.ValueString()+"; look it up by id")
				return
			}
			found = &all[i]
		}
		if found == nil {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Contrail: account lookup",
				"no account is named "+m.Name.ValueString())
			return
		}
	}
	out := summarize(found)
	resp.Diagnostics.Append(resp.State.Set(ctx, &out)...)
}

// ---------------------------------------------------------------------
// contrail_accounts

type accountsDataSource struct{ c *client.Client }

func newAccountsDataSource() datasource.DataSource { return &accountsDataSource{} }

type accountsModel struct {
	Accounts []accountModel `tfsdk:"accounts"`
}

func (d *accountsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_accounts"
}

func (d *accountsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Every account of the organization.",
		Attributes: map[string]schema.Attribute{
			"accounts": schema.ListNestedAttribute{Computed: true, Description: "The accounts, in the API's order.",
				NestedObject: schema.NestedAttributeObject{Attributes: accountAttrs(false)}},
		},
	}
}

func (d *accountsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *accountsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	all, err := d.c.Accounts(ctx)
	if err != nil {
		failed(&resp.Diagnostics, "listing accounts", err)
		return
	}
	out := accountsModel{Accounts: []accountModel{}}
	for i := range all {
		out.Accounts = append(out.Accounts, summarize(&all[i]))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &out)...)
}

// ---------------------------------------------------------------------
// contrail_streams

type streamsDataSource struct{ c *client.Client }

func newStreamsDataSource() datasource.DataSource { return &streamsDataSource{} }

type streamSummary struct {
	Name     types.String `tfsdk:"name"`
	Subjects types.List   `tfsdk:"subjects"`
	Messages types.Int64  `tfsdk:"messages"`
	Bytes    types.Int64  `tfsdk:"bytes"`
}

type streamsModel struct {
	AccountID types.String    `tfsdk:"account_id"`
	Streams   []streamSummary `tfsdk:"streams"`
}

func (d *streamsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_streams"
}

func (d *streamsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The streams of an account, read from its cell, whoever made them.",
		Attributes: map[string]schema.Attribute{
			"account_id": schema.StringAttribute{Required: true, Description: "The account."},
			"streams": schema.ListNestedAttribute{Computed: true, Description: "The streams, by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":     schema.StringAttribute{Computed: true, Description: "The stream's name."},
					"subjects": schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "Its subjects."},
					"messages": schema.Int64Attribute{Computed: true, Description: "Messages it holds now."},
					"bytes":    schema.Int64Attribute{Computed: true, Description: "Bytes it holds now."},
				}}},
		},
	}
}

func (d *streamsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *streamsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m streamsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	all, err := d.c.Streams(ctx, m.AccountID.ValueString())
	if err != nil {
		failed(&resp.Diagnostics, "listing streams", err)
		return
	}
	m.Streams = []streamSummary{}
	for _, s := range all {
		subjects := stringList(s.Subjects)
		if subjects.IsNull() {
			subjects = types.ListValueMust(types.StringType, nil)
		}
		m.Streams = append(m.Streams, streamSummary{Name: types.StringValue(s.Name), Subjects: subjects,
			Messages: types.Int64Value(int64(s.Messages)), Bytes: types.Int64Value(int64(s.Bytes))})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
