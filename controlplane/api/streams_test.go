package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

// The stream routes against real cells (ours and nats-server) are in
// cmd/contrail (TestDevStreamRoutes, TestCPStreamRoutesReference); these
// hold the pure rules to nats-server's, case by case.

func TestStreamUpdateRules(t *testing.T) {
	base := defaultStreamConfig()
	for _, c := range []struct {
		name  string
		old   func(*streamConfig)
		next  func(*streamConfig)
		field string // "" for allowed in place
	}{
		{"limits", nil, func(c *streamConfig) { c.MaxMsgs, c.MaxBytes, c.MaxAge = 5, 10, 1e9 }, ""},
		{"subjects", nil, func(c *streamConfig) { c.Subjects = []string{"a", "b"} }, ""},
		{"limits to interest", nil, func(c *streamConfig) { c.Retention = "interest" }, ""},
		{"interest to limits", func(c *streamConfig) { c.Retention = "interest" }, func(c *streamConfig) { c.Retention = "limits" }, ""},
		{"to workqueue", nil, func(c *streamConfig) { c.Retention = "workqueue" }, "retention"},
		{"from workqueue", func(c *streamConfig) { c.Retention = "workqueue" }, nil, "retention"},
		{"storage", nil, func(c *streamConfig) { c.Storage = "memory" }, "storage"},
		{"deny delete on", nil, func(c *streamConfig) { c.DenyDelete = true }, ""},
		{"deny delete off", func(c *streamConfig) { c.DenyDelete = true }, nil, "deny_delete"},
		{"deny purge off", func(c *streamConfig) { c.DenyPurge = true }, nil, "deny_purge"},
		{"ttl on", nil, func(c *streamConfig) { c.AllowMsgTTL = true }, ""},
		{"ttl off", func(c *streamConfig) { c.AllowMsgTTL = true }, nil, "allow_msg_ttl"},
		{"replicas", nil, func(c *streamConfig) { c.Replicas = 3 }, ""},
		{"compression", nil, func(c *streamConfig) { c.Compression = "s2" }, ""},
	} {
		// next is the defaults with c.next applied: what c.old set and
		// c.next does not is turned back off.
		old, next := base, base
		if c.old != nil {
			c.old(&old)
		}
		if c.next != nil {
			c.next(&next)
		}
		err := checkStreamUpdate(&old, &next)
		var p *Problem
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.field != "" && (!errors.As(err, &p) || p.Field != c.field || p.Status != http.StatusBadRequest):
			t.Errorf("%s: %v, want a 400 naming %s", c.name, err, c.field)
		}
	}
}

func TestStreamOverlayKeepsUnmanagedFields(t *testing.T) {
	cur := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(`{"name":"S","subjects":["a"],"max_msgs":5,"description":"old",
		"subject_transform":{"src":">","dest":"x.>"},"sources":[{"name":"X"}],"republish":{"dest":"old.>"},"metadata":{"_nats.ver":"2.12","k":"v"}}`), &cur); err != nil {
		t.Fatal(err)
	}
	cfg := defaultStreamConfig()
	cfg.Subjects = []string{"b"}
	body, err := cfg.overlay(cur, "S")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got["subject_transform"] == nil || got["sources"] == nil {
		t.Errorf("unmanaged fields lost: %s", body)
	}
	if _, ok := got["republish"]; ok {
		t.Errorf("a managed field left out was kept: %s", body)
	}
	if _, ok := got["description"]; ok {
		t.Errorf("a description left out was kept: %s", body)
	}
	if got["max_msgs"] != float64(-1) || got["name"] != "S" {
		t.Errorf("managed fields not replaced: %s", body)
	}
	if m, ok := got["metadata"].(map[string]any); !ok || len(m) != 0 {
		t.Errorf("metadata left out must clear the user's keys: %s", body)
	}
	if got := userMetadata(map[string]string{"_nats.ver": "1", "k": "v"}); len(got) != 1 || got["k"] != "v" {
		t.Errorf("userMetadata = %v", got)
	}
}

func TestStreamNamesAndErrors(t *testing.T) {
	for _, name := range []string{"", "a b", "a.b", "a*", "a>", "a/b", `a\b`, "a\x00", "a\tb", string(make([]byte, 256))} {
		if checkStreamName("name", name) == nil {
			t.Errorf("stream name %q accepted", name)
		}
	}
	for _, name := range []string{"ORDERS", "kv_x-1", "Ünïcode", "50%"} {
		if err := checkStreamName("name", name); err != nil {
			t.Errorf("stream name %q: %v", name, err)
		}
	}
	for _, c := range []struct {
		code, errCode int
		desc          string
		status        int
		field         string
	}{
		{404, 10059, "stream not found", 404, ""},
		{400, 10058, "stream name already in use with a different configuration", 409, ""},
		{400, 10065, "subjects overlap with an existing stream", 400, "subjects"},
		{400, 10027, "maximum number of streams reached", 409, ""},
		{500, 10047, "insufficient storage resources available", 409, ""},
		{500, 10052, "discard new per subject requires discard new policy to be set", 400, "discard_new_per_subject"},
		{500, 10052, "duplicates window can not be larger then max age", 400, "duplicate_window"},
		{500, 10052, "something new", 400, "body"},
		{503, 10039, "JetStream not enabled for account", 409, ""},
		{503, 10008, "JetStream cluster not available", 503, ""},
	} {
		var p *Problem
		if err := jsProblem("S", c.code, c.errCode, c.desc); !errors.As(err, &p) || p.Status != c.status || p.Field != c.field {
			t.Errorf("%d %q: %v, want %d naming %q", c.errCode, c.desc, err, c.status, c.field)
		}
	}
}
