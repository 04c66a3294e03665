package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/config/conf"
)

var tlsFields = map[string]field[TLSOptions]{
	"cert_file":       stringField(func(t *TLSOptions) *string { return &t.CertFile }),
	"key_file":        stringField(func(t *TLSOptions) *string { return &t.KeyFile }),
	"ca_file":         stringField(func(t *TLSOptions) *string { return &t.CAFile }),
	"verify":          boolField(func(t *TLSOptions) *bool { return &t.Verify }),
	"verify_and_map":  boolField(func(t *TLSOptions) *bool { return &t.VerifyAndMap }),
	"timeout":         durationField(func(t *TLSOptions) *time.Duration { return &t.Timeout }),
	"handshake_first": handshakeFirstField,
	"first":           handshakeFirstField,
	"immediate":       handshakeFirstField,
}

// tlsUnsupported are nats-server tls keys Contrail does not implement.
var tlsUnsupported = setOf(
	"verify_cert_and_check_known_urls", "insecure",
	"cipher_suites", "curve_preferences", "pinned_certs", "cert_store",
	"cert_match_by", "cert_match", "cert_match_skip_invalid",
	"ca_certs_match", "ocsp_peer", "certs", "min_version",
	"connection_rate_limit",
)

var jetStreamFields = map[string]field[JetStreamOptions]{
	"enabled":          boolField(func(j *JetStreamOptions) *bool { return &j.Enabled }),
	"enable":           boolField(func(j *JetStreamOptions) *bool { return &j.Enabled }),
	"store_dir":        stringField(func(j *JetStreamOptions) *string { return &j.StoreDir }),
	"storedir":         stringField(func(j *JetStreamOptions) *string { return &j.StoreDir }),
	"store":            stringField(func(j *JetStreamOptions) *string { return &j.StoreDir }),
	"max_memory_store": sizeField(func(j *JetStreamOptions) *int64 { return &j.MaxMemory }),
	"max_mem_store":    sizeField(func(j *JetStreamOptions) *int64 { return &j.MaxMemory }),
	"max_mem":          sizeField(func(j *JetStreamOptions) *int64 { return &j.MaxMemory }),
	"max_file_store":   sizeField(func(j *JetStreamOptions) *int64 { return &j.MaxStore }),
	"max_file":         sizeField(func(j *JetStreamOptions) *int64 { return &j.MaxStore }),
	"sync_interval":    syncField,
	"sync":             syncField,
	"domain":           stringField(func(j *JetStreamOptions) *string { return &j.Domain }),

	"max_buffered_msgs": intField(func(j *JetStreamOptions) *int64 { return &j.MaxBufferedMsgs }),
	"max_buffered_size": sizeField(func(j *JetStreamOptions) *int64 { return &j.MaxBufferedSize }),
	// Contrail only: every stream of a node shares one apply path.
	"node_max_buffered_msgs": intField(func(j *JetStreamOptions) *int64 { return &j.NodeMaxBufferedMsgs }),
	"node_max_buffered_size": sizeField(func(j *JetStreamOptions) *int64 { return &j.NodeMaxBufferedSize }),
	// Contrail only: the file store's table compression.
	"store_compression": stringField(func(j *JetStreamOptions) *string { return &j.StoreCompression }),
	// Contrail only: tiered storage, as the --tier-* flags.
	"tier": blockField(tierFields, nil, func() *TierOptions { return &TierOptions{} },
		func(j *JetStreamOptions, t *TierOptions) { j.Tier = t }),
	"limits": blockField(jsLimitsFields, jsLimitsUnsupported, func() *JetStreamOptions { return &JetStreamOptions{} },
		func(j *JetStreamOptions, l *JetStreamOptions) { j.Batch = l.Batch }),
}

// jsLimitsFields is nats-server's jetstream { limits { … } } block, of
// which Contrail takes the atomic batch bounds. It decodes into a scratch
// JetStreamOptions whose Batch is kept.
var jsLimitsFields = map[string]field[JetStreamOptions]{
	"batch": blockField(batchFields, nil, func() *BatchLimits { return &BatchLimits{} },
		func(j *JetStreamOptions, b *BatchLimits) { j.Batch = *b }),
}

// jsLimitsUnsupported are the server-wide caps of nats-server's limits
// block that Contrail does not apply: its tenants' limits come from
// their accounts.
var jsLimitsUnsupported = setOf("max_ack_pending", "max_ha_assets", "max_request_batch",
	"default_max_consumers", "duplicate_window")

var batchFields = map[string]field[BatchLimits]{
	"max_inflight_per_stream": intField(func(b *BatchLimits) *int64 { return &b.MaxInflightPerStream }),
	"max_inflight_total":      intField(func(b *BatchLimits) *int64 { return &b.MaxInflightTotal }),
	"max_msgs":                intField(func(b *BatchLimits) *int64 { return &b.MaxMsgs }),
	"timeout":                 durationField(func(b *BatchLimits) *time.Duration { return &b.Timeout }),
}

var tierFields = map[string]field[TierOptions]{
	"url":           stringField(func(t *TierOptions) *string { return &t.URL }),
	"endpoint":      stringField(func(t *TierOptions) *string { return &t.Endpoint }),
	"segment_bytes": sizeField(func(t *TierOptions) *int64 { return &t.SegmentBytes }),
	"local_bytes":   sizeField(func(t *TierOptions) *int64 { return &t.LocalBytes }),
	"cache_bytes":   sizeField(func(t *TierOptions) *int64 { return &t.CacheBytes }),
	"read_rate":     sizeField(func(t *TierOptions) *int64 { return &t.ReadRate }),
	"read_timeout":  durationField(func(t *TierOptions) *time.Duration { return &t.ReadTimeout }),
}

// jetStreamUnsupported are nats-server jetstream keys Contrail does not
// implement.
var jetStreamUnsupported = setOf(
	"key", "ek", "encryption_key", "prev_key", "prev_ek",
	"prev_encryption_key", "cipher", "extension_hint",
	"unique_tag", "max_outstanding_catchup", "request_queue_limit",
	"strict", "tpm",
	"max_catchup", "max_ha_assets",
)

var tlsField = blockField(tlsFields, tlsUnsupported,
	func() *TLSOptions { return &TLSOptions{Timeout: DefaultTLSTimeout} },
	func(o *Options, t *TLSOptions) { o.TLS = t })

// handshakeFirstField takes nats-server's forms: a boolean, "auto" (TLS
// first with the default fallback delay), or a fallback duration.
func handshakeFirstField(d *decoder, t *TLSOptions, path string, v *conf.Value) {
	switch v.Kind {
	case conf.KindBool:
		t.HandshakeFirst, t.HandshakeFirstFallback = v.Bool, 0
		return
	case conf.KindString:
		switch strings.ToLower(v.Str) {
		case "true", "on":
			t.HandshakeFirst, t.HandshakeFirstFallback = true, 0
		case "false", "off":
			t.HandshakeFirst, t.HandshakeFirstFallback = false, 0
		case "auto", "auto_fallback":
			t.HandshakeFirst, t.HandshakeFirstFallback = true, DefaultHandshakeFirstFallback
		default:
			dur, err := time.ParseDuration(v.Str)
			if err != nil {
				d.fail(v.Pos, nil, "%s: invalid value %q (want a boolean, \"auto\" or a duration)", path, v.Str)
				return
			}
			t.HandshakeFirst, t.HandshakeFirstFallback = true, dur
		}
		return
	}
	d.typeErr(path, v, `boolean, "auto" or duration`)
}

// jetStreamField takes a boolean, "enabled"/"disabled", or a block, which
// enables JetStream unless it says `enabled: false`.
func jetStreamField(d *decoder, o *Options, path string, v *conf.Value) {
	js := o.jetStream()
	switch v.Kind {
	case conf.KindBool:
		js.Enabled = v.Bool
	case conf.KindString:
		switch strings.ToLower(v.Str) {
		case "enabled", "enable":
			js.Enabled = true
		case "disabled", "disable":
			js.Enabled = false
		default:
			d.fail(v.Pos, nil, "%s: expected \"enabled\" or \"disabled\", got %q", path, v.Str)
		}
	case conf.KindMap:
		js.Enabled = true
		decodeMap(d, js, path, v.Map, jetStreamFields, jetStreamUnsupported)
	default:
		d.typeErr(path, v, "boolean, \"enabled\" or map")
	}
}

// topStoreDirField handles the top-level store_dir nats-server also takes.
func topStoreDirField(d *decoder, o *Options, path string, v *conf.Value) {
	stringField(func(j *JetStreamOptions) *string { return &j.StoreDir })(d, o.jetStream(), path, v)
}

func (o *Options) jetStream() *JetStreamOptions {
	if o.JetStream == nil {
		o.JetStream = &JetStreamOptions{}
	}
	return o.JetStream
}

// syncField takes "always", a duration, or seconds.
func syncField(d *decoder, j *JetStreamOptions, path string, v *conf.Value) {
	if v.Kind == conf.KindString && strings.EqualFold(v.Str, "always") {
		j.SyncAlways = true
		return
	}
	if dur, ok := d.duration(path, v); ok {
		j.SyncInterval, j.SyncAlways = dur, false
	}
}

// sizeField takes an integer (suffixes as the parser reads them: 1G is
// 10^9, 1GB is 2^30) or, as nats-server's JetStream limits also allow, a
// string such as "1G" where K, M, G and T are powers of 1024.
func sizeField[T any](sel func(*T) *int64) field[T] {
	return func(d *decoder, j *T, path string, v *conf.Value) {
		switch v.Kind {
		case conf.KindInt:
			*sel(j) = v.Int
		case conf.KindString:
			n, err := int64(0), error(nil)
			if v.Str != "" {
				n, err = ParseSize(v.Str)
			}
			if err != nil {
				d.fail(v.Pos, nil, "%s: invalid size %q (want e.g. 512M or 1G)", path, v.Str)
				return
			}
			*sel(j) = n
		default:
			d.typeErr(path, v, "size")
		}
	}
}

// ParseSize reads a size as the --tier-*-bytes flags take it: bytes, or
// a number with K, M, G or T, optionally followed by B or iB (KiB, MB,
// 64MiB), each a power of 1024 as in nats-server's JetStream limits.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q cannot be negative", s)
		}
		return n, nil
	}
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B")
	if n, ok := storageSize(u); ok && u != "" && n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("invalid size %q (want e.g. 64MiB, 512M or 1G)", s)
}

func storageSize(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	shift, ok := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}[s[len(s)-1]&^0x20]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n > math.MaxInt64>>shift || n < math.MinInt64>>shift {
		return 0, false
	}
	return n << shift, true
}
