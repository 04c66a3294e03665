package provider

import (
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/contrail/contrail/terraform/client"
)

// tiersModel is an account's tiered JetStream limits; nil is none.
type tiersModel struct {
	R1 *tierModel `tfsdk:"r1"`
	R3 *tierModel `tfsdk:"r3"`
}

type tierModel struct {
	MaxMemory      types.Int64 `tfsdk:"max_memory"`
	MaxStorage     types.Int64 `tfsdk:"max_storage"`
	MaxStreams     types.Int64 `tfsdk:"max_streams"`
	MaxConsumers   types.Int64 `tfsdk:"max_consumers"`
	MaxAckPending  types.Int64 `tfsdk:"max_ack_pending"`
	MaxStreamBytes types.Int64 `tfsdk:"max_stream_bytes"`
}

// tierFields describe a tier's limits, for both schemas.
var tierFields = map[string]string{
	"max_memory":       "Bytes of memory storage for the tier's streams; -1 unlimited.",
	"max_storage":      "Bytes of file storage; each stream counts once, whatever its replicas; -1 unlimited.",
	"max_streams":      "Streams; -1 unlimited.",
	"max_consumers":    "Consumers of each stream; -1 unlimited.",
	"max_ack_pending":  "Unacknowledged messages per consumer; -1 unlimited.",
	"max_stream_bytes": "The most bytes one stream of the tier may hold; -1 unlimited.",
}

const tiersDesc = "Tiered JetStream limits per replica count, as account JWTs carry them: r1 for unreplicated " +
	"streams, r3 for streams of three replicas (a clustered cell). When set they replace the untiered JetStream " +
	"limits; a tier left out allows no stream of its replica count. Changed in place."

func tiersAttr() schema.SingleNestedAttribute {
	tier := func(what string) schema.SingleNestedAttribute {
		attrs := map[string]schema.Attribute{}
		for name, desc := range tierFields {
			attrs[name] = schema.Int64Attribute{Required: true, Description: desc}
		}
		return schema.SingleNestedAttribute{Optional: true, Description: what, Attributes: attrs}
	}
	return schema.SingleNestedAttribute{Optional: true, Description: tiersDesc, Attributes: map[string]schema.Attribute{
		"r1": tier("Limits of unreplicated streams."), "r3": tier("Limits of streams of three replicas."),
	}}
}

func tiersDataAttr() dschema.SingleNestedAttribute {
	tier := func(what string) dschema.SingleNestedAttribute {
		attrs := map[string]dschema.Attribute{}
		for name, desc := range tierFields {
			attrs[name] = dschema.Int64Attribute{Computed: true, Description: desc}
		}
		return dschema.SingleNestedAttribute{Computed: true, Description: what, Attributes: attrs}
	}
	return dschema.SingleNestedAttribute{Computed: true, Description: tiersDesc, Attributes: map[string]dschema.Attribute{
		"r1": tier("Limits of unreplicated streams."), "r3": tier("Limits of streams of three replicas."),
	}}
}

func (t *tierModel) api() *client.JetStreamTier {
	if t == nil {
		return nil
	}
	return &client.JetStreamTier{MaxMemory: t.MaxMemory.ValueInt64(), MaxStorage: t.MaxStorage.ValueInt64(),
		MaxStreams: t.MaxStreams.ValueInt64(), MaxConsumers: t.MaxConsumers.ValueInt64(),
		MaxAckPending: t.MaxAckPending.ValueInt64(), MaxStreamBytes: t.MaxStreamBytes.ValueInt64()}
}

func (t *tiersModel) api() *client.JetStreamTiers {
	if t == nil {
		return nil
	}
	return &client.JetStreamTiers{R1: t.R1.api(), R3: t.R3.api()}
}

func tierOf(t *client.JetStreamTier) *tierModel {
	if t == nil {
		return nil
	}
	return &tierModel{MaxMemory: types.Int64Value(t.MaxMemory), MaxStorage: types.Int64Value(t.MaxStorage),
		MaxStreams: types.Int64Value(t.MaxStreams), MaxConsumers: types.Int64Value(t.MaxConsumers),
		MaxAckPending: types.Int64Value(t.MaxAckPending), MaxStreamBytes: types.Int64Value(t.MaxStreamBytes)}
}

func tiersOf(t *client.JetStreamTiers) *tiersModel {
	if t == nil {
		return nil
	}
	return &tiersModel{R1: tierOf(t.R1), R3: tierOf(t.R3)}
}
