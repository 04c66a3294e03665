package api

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of stream configs, as nats-server has them.
const (
	maxStreamName        = 255
	maxStreamDescription = 4 * 1024
	maxStreamMetadata    = 128 * 1024
	maxStreamReplicas    = 5
	// maxStreamDuration bounds max_age and duplicate_window (a hundred
	// years, in nanoseconds as JetStream counts them).
	maxStreamDuration = int64(100 * 365 * 24 * time.Hour)
)

// streamConfig is the part of a JetStream stream's configuration the
// REST API manages, with JetStream's own field names and units
// (durations in nanoseconds, as `nats stream info --json` prints them).
// Fields left out of a request take nats-server's defaults
// (defaultStreamConfig). What a cell's config holds beyond these fields
// (mirror, sources, subject transform, placement, ...) an update leaves
// as it is.
type streamConfig struct {
	Description          string            `json:"description,omitempty"`
	Subjects             []string          `json:"subjects,omitempty"`
	Retention            string            `json:"retention"`
	MaxConsumers         int64             `json:"max_consumers"`
	MaxMsgs              int64             `json:"max_msgs"`
	MaxBytes             int64             `json:"max_bytes"`
	MaxAge               int64             `json:"max_age"`
	MaxMsgsPerSubject    int64             `json:"max_msgs_per_subject"`
	MaxMsgSize           int64             `json:"max_msg_size"`
	Discard              string            `json:"discard"`
	DiscardNewPerSubject bool              `json:"discard_new_per_subject"`
	Storage              string            `json:"storage"`
	Replicas             int64             `json:"num_replicas"`
	DuplicateWindow      int64             `json:"duplicate_window"`
	Compression          string            `json:"compression"`
	NoAck                bool              `json:"no_ack"`
	AllowRollup          bool              `json:"allow_rollup_hdrs"`
	DenyDelete           bool              `json:"deny_delete"`
	DenyPurge            bool              `json:"deny_purge"`
	AllowDirect          bool              `json:"allow_direct"`
	AllowMsgTTL          bool              `json:"allow_msg_ttl"`
	Metadata             map[string]string `json:"metadata,omitempty"`
	// RePublish sends each stored message on again to another subject.
	RePublish *streamRePublish `json:"republish,omitempty"`
}

// streamRePublish is JetStream's republish rule.
type streamRePublish struct {
	Source      string `json:"src,omitempty"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only,omitempty"`
}

// defaultStreamConfig is what nats-server makes of fields left out; a
// duplicate_window of 0 is its default of two minutes (or max_age, if
// shorter), which the cell fills in.
func defaultStreamConfig() streamConfig {
	return streamConfig{Retention: "limits", MaxConsumers: -1, MaxMsgs: -1, MaxBytes: -1, MaxMsgsPerSubject: -1,
		MaxMsgSize: -1, Discard: "old", Storage: "file", Replicas: 1, Compression: "none"}
}

// check validates a request's config, naming the first field at fault.
// The cell checks the rest (subject overlaps, account limits, ...).
func (c *streamConfig) check() error {
	if len(c.Description) > maxStreamDescription {
		return invalid("description", fmt.Sprintf("must be at most %d bytes", maxStreamDescription))
	}
	if len(c.Subjects) > maxSubjects {
		return invalid("subjects", fmt.Sprintf("at most %d subjects", maxSubjects))
	}
	for i, s := range c.Subjects {
		if err := checkSubject(fmt.Sprintf("subjects[%d]", i), s); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		field, value string
		allowed      []string
	}{
		{"retention", c.Retention, []string{"limits", "interest", "workqueue"}},
		{"discard", c.Discard, []string{"old", "new"}},
		{"storage", c.Storage, []string{"file", "memory"}},
		{"compression", c.Compression, []string{"none", "s2"}},
	} {
		if !slices.Contains(e.allowed, e.value) {
			return invalid(e.field, "must be one of "+strings.Join(e.allowed, ", "))
		}
	}
	for _, l := range []struct {
		field string
		value int64
		max   int64
	}{
		{"max_consumers", c.MaxConsumers, math.MaxInt32},
		{"max_msgs", c.MaxMsgs, math.MaxInt64},
		{"max_bytes", c.MaxBytes, math.MaxInt64},
		{"max_msgs_per_subject", c.MaxMsgsPerSubject, math.MaxInt64},
		{"max_msg_size", c.MaxMsgSize, math.MaxInt32},
	} {
		if l.value < -1 || l.value > l.max {
			return invalid(l.field, fmt.Sprintf("must be -1 (unlimited) to %d", l.max))
		}
	}
	for _, d := range []struct {
		field string
		value int64
	}{{"max_age", c.MaxAge}, {"duplicate_window", c.DuplicateWindow}} {
		if d.value < 0 || d.value > maxStreamDuration {
			return invalid(d.field, fmt.Sprintf("must be 0 to %d nanoseconds (a hundred years)", maxStreamDuration))
		}
	}
	if c.Replicas < 1 || c.Replicas > maxStreamReplicas {
		return invalid("num_replicas", fmt.Sprintf("must be 1 to %d", maxStreamReplicas))
	}
	if c.DiscardNewPerSubject && (c.Discard != "new" || c.MaxMsgsPerSubject <= 0) {
		return invalid("discard_new_per_subject", "needs discard \"new\" and max_msgs_per_subject above 0")
	}
	if err := c.checkRePublish(); err != nil {
		return err
	}
	size := 0
	for k, v := range c.Metadata {
		switch {
		case k == "":
			return invalid("metadata", "keys must not be empty")
		case strings.HasPrefix(k, "_nats."):
			return invalid("metadata."+k, "keys starting with _nats. are the server's")
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return invalid("metadata."+k, "must be valid UTF-8")
		}
		size += len(k) + len(v)
	}
	if size > maxStreamMetadata {
		return invalid("metadata", fmt.Sprintf("keys and values must total at most %d bytes", maxStreamMetadata))
	}
	return nil
}

// checkRePublish checks the republish rule's subjects.
func (c *streamConfig) checkRePublish() error {
	r := c.RePublish
	if r == nil {
		return nil
	}
	if r.Source != "" {
		if err := checkSubject("republish.src", r.Source); err != nil {
			return err
		}
	}
	return checkSubject("republish.dest", r.Destination)
}

// checkStreamName checks a stream name as nats-server does: it becomes
// a subject token of the JetStream API.
func checkStreamName(field, name string) error {
	switch {
	case name == "" || len(name) > maxStreamName:
		return invalid(field, fmt.Sprintf("must be 1 to %d bytes", maxStreamName))
	case strings.ContainsAny(name, " \t\r\n\f.*>/\\") || strings.ContainsFunc(name, func(r rune) bool {
		return r < 0x20 || r == 0x7f || r == utf8.RuneError
	}):
		return invalid(field, "must not contain whitespace, control characters, '.', '*', '>', '/' or '\\'")
	}
	return nil
}

// checkStreamUpdate applies nats-server's update rules to the fields the
// API manages: what the server cannot change in place is refused here
// with the field named, before the cell is asked (which would refuse it
// too, in words that name no field).
func checkStreamUpdate(old, next *streamConfig) error {
	cannot := func(field, from, to string) error {
		return invalid(field, fmt.Sprintf("cannot change from %s to %s on an existing stream (nats-server refuses it); "+
			"delete and re-create the stream, which deletes its messages", from, to))
	}
	switch {
	case old.Storage != next.Storage:
		return cannot("storage", old.Storage, next.Storage)
	case old.Retention != next.Retention && (old.Retention == "workqueue" || next.Retention == "workqueue"):
		return cannot("retention", old.Retention, next.Retention)
	case old.DenyDelete && !next.DenyDelete:
		return cannot("deny_delete", "true", "false")
	case old.DenyPurge && !next.DenyPurge:
		return cannot("deny_purge", "true", "false")
	case old.AllowMsgTTL && !next.AllowMsgTTL:
		return cannot("allow_msg_ttl", "true", "false")
	}
	return nil
}

// userMetadata drops the keys nats-server owns ("_nats.*"), which it
// stamps on every stream: they are not the user's to manage.
func userMetadata(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if !strings.HasPrefix(k, "_nats.") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// overlay returns the cell's config cur with the managed fields replaced
// by c's (a field c leaves empty is removed, so the cell defaults it) and
// the name set: an update changes what the API manages and keeps the rest.
func (c *streamConfig) overlay(cur map[string]json.RawMessage, name string) ([]byte, error) {
	out := map[string]json.RawMessage{}
	for k, v := range cur {
		out[k] = v
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var mine map[string]json.RawMessage
	if err := json.Unmarshal(data, &mine); err != nil {
		return nil, err
	}
	for field := range jsonFields(reflect.TypeFor[streamConfig]()) {
		if v, ok := mine[field]; ok {
			out[field] = v
		} else {
			delete(out, field)
		}
	}
	// An update without metadata keeps the old (nats-server copies it
	// over), so no metadata is sent as an empty object; the server
	// re-stamps its own keys either way.
	if c.Metadata == nil {
		out["metadata"] = json.RawMessage("{}")
	}
	out["name"], _ = json.Marshal(name)
	return json.Marshal(out)
}
