package provider

import (
	"sort"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestReplaceReasons holds the stream's replacement rules to
// nats-server's update rules: replaced only for what it cannot change.
func TestReplaceReasons(t *testing.T) {
	base := func() streamModel {
		return streamModel{AccountID: types.StringValue("acc"), Name: types.StringValue("S"),
			Storage: types.StringValue("file"), Retention: types.StringValue("limits"),
			DenyDelete: types.BoolValue(false), DenyPurge: types.BoolValue(false), AllowMsgTTL: types.BoolValue(false),
			MaxMsgs: types.Int64Value(-1)}
	}
	for _, c := range []struct {
		name        string
		state, plan func(*streamModel)
		want        []string
	}{
		{"in place", nil, func(m *streamModel) { m.MaxMsgs = types.Int64Value(5) }, nil},
		{"limits to interest", nil, func(m *streamModel) { m.Retention = types.StringValue("interest") }, nil},
		{"to workqueue", nil, func(m *streamModel) { m.Retention = types.StringValue("workqueue") }, []string{"retention"}},
		{"from workqueue", func(m *streamModel) { m.Retention = types.StringValue("workqueue") }, nil, []string{"retention"}},
		{"storage", nil, func(m *streamModel) { m.Storage = types.StringValue("memory") }, []string{"storage"}},
		{"storage unknown", nil, func(m *streamModel) { m.Storage = types.StringUnknown() }, nil},
		{"deny delete on", nil, func(m *streamModel) { m.DenyDelete = types.BoolValue(true) }, nil},
		{"deny delete off", func(m *streamModel) { m.DenyDelete = types.BoolValue(true) }, nil, []string{"deny_delete"}},
		{"deny purge off", func(m *streamModel) { m.DenyPurge = types.BoolValue(true) }, nil, []string{"deny_purge"}},
		{"ttl off", func(m *streamModel) { m.AllowMsgTTL = types.BoolValue(true) }, nil, []string{"allow_msg_ttl"}},
		{"renamed", nil, func(m *streamModel) { m.Name = types.StringValue("T") }, []string{"name"}},
		{"moved", nil, func(m *streamModel) { m.AccountID = types.StringValue("other") }, []string{"account_id"}},
	} {
		state, plan := base(), base()
		if c.state != nil {
			c.state(&state)
		}
		if c.plan != nil {
			c.plan(&plan)
		}
		var got []string
		for attr := range replaceReasons(&state, &plan) {
			got = append(got, attr)
		}
		sort.Strings(got)
		if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: replaced for %v, want %v", c.name, got, c.want)
		}
	}
}
