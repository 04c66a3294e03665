package config

import (
	"errors"
	"fmt"
	"strings"
)

// Validate checks the options as a whole, after the file and any
// command-line overrides are applied, and reports every problem at once.
func (o *Options) Validate() error {
	if o == nil {
		return errors.New("config: no options")
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	checkPort(add, "port", o.Port)
	checkPort(add, "http_port", o.HTTPPort)
	if o.MaxPayload <= 0 || o.MaxPayload > MaxPayloadLimit {
		add("max_payload: %d is out of range [1, %d]", o.MaxPayload, MaxPayloadLimit)
	}
	if o.MaxControlLine <= 0 {
		add("max_control_line: %d must be positive", o.MaxControlLine)
	}
	if o.MaxConnections <= 0 {
		add("max_connections: %d must be positive", o.MaxConnections)
	}
	if o.MaxPending <= 0 {
		add("max_pending: %d must be positive", o.MaxPending)
	} else if int64(o.MaxPayload) > o.MaxPending {
		add("max_payload (%d) cannot be larger than max_pending (%d)", o.MaxPayload, o.MaxPending)
	}
	if o.MaxAccountSubs <= 0 {
		add("max_account_subscriptions: %d must be positive", o.MaxAccountSubs)
	}
	if o.PingInterval <= 0 {
		add("ping_interval: %v must be positive", o.PingInterval)
	}
	if o.PingMax < 1 {
		add("ping_max: %d must be at least 1", o.PingMax)
	}
	if o.WriteDeadline <= 0 {
		add("write_deadline: %v must be positive", o.WriteDeadline)
	}
	if strings.ContainsAny(o.ServerName, " \t\r\n") {
		add("server_name: %q cannot contain white space", o.ServerName)
	}
	errs = append(errs, o.TLS.validate("tls")...)
	errs = append(errs, o.JetStream.validate()...)
	errs = append(errs, o.Cluster.validate(o.ServerName)...)
	return errors.Join(errs...)
}

// checkPort allows -1, nats-server's "pick a random port".
func checkPort(add func(string, ...any), name string, port int) {
	if port < -1 || port > 65535 {
		add("%s: %d is out of range [-1, 65535]", name, port)
	}
}

// validate checks a tls block; path is where it is ("tls",
// "cluster.tls").
func (t *TLSOptions) validate(path string) []error {
	if t == nil {
		return nil
	}
	var errs []error
	switch {
	case t.CertFile == "" && t.KeyFile == "":
		errs = append(errs, fmt.Errorf("%s: cert_file and key_file are required", path))
	case t.KeyFile == "":
		errs = append(errs, fmt.Errorf("%s: cert_file is set but key_file is not", path))
	case t.CertFile == "":
		errs = append(errs, fmt.Errorf("%s: key_file is set but cert_file is not", path))
	}
	if t.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout: %v cannot be negative", path, t.Timeout))
	}
	if t.HandshakeFirstFallback < 0 {
		errs = append(errs, fmt.Errorf("%s.handshake_first: fallback %v cannot be negative", path, t.HandshakeFirstFallback))
	}
	return errs
}

func (j *JetStreamOptions) validate() []error {
	if j == nil {
		return nil
	}
	var errs []error
	if j.MaxMemory < -1 {
		errs = append(errs, fmt.Errorf("jetstream.max_memory_store: %d cannot be negative", j.MaxMemory))
	}
	if j.MaxStore < -1 {
		errs = append(errs, fmt.Errorf("jetstream.max_file_store: %d cannot be negative", j.MaxStore))
	}
	if j.SyncInterval < 0 {
		errs = append(errs, fmt.Errorf("jetstream.sync_interval: %v cannot be negative", j.SyncInterval))
	}
	errs = append(errs, negatives("jetstream.", setting{"max_buffered_msgs", j.MaxBufferedMsgs}, setting{"max_buffered_size", j.MaxBufferedSize},
		setting{"node_max_buffered_msgs", j.NodeMaxBufferedMsgs}, setting{"node_max_buffered_size", j.NodeMaxBufferedSize})...)
	errs = append(errs, negatives("jetstream.limits.batch.", setting{"max_inflight_per_stream", j.Batch.MaxInflightPerStream},
		setting{"max_inflight_total", j.Batch.MaxInflightTotal}, setting{"max_msgs", j.Batch.MaxMsgs})...)
	switch j.StoreCompression {
	case "", "none", "snappy":
	default:
		errs = append(errs, fmt.Errorf("jetstream.store_compression: %q is not none or snappy", j.StoreCompression))
	}
	if j.Batch.Timeout < 0 {
		errs = append(errs, fmt.Errorf("jetstream.limits.batch.timeout: %v cannot be negative", j.Batch.Timeout))
	}
	if t := j.Tier; t != nil {
		errs = append(errs, negatives("jetstream.tier.", setting{"segment_bytes", t.SegmentBytes}, setting{"local_bytes", t.LocalBytes},
			setting{"cache_bytes", t.CacheBytes}, setting{"read_rate", t.ReadRate})...)
		if t.SegmentBytes > 0 && t.SegmentBytes < 64<<10 {
			errs = append(errs, fmt.Errorf("jetstream.tier.segment_bytes: %d is below the minimum of 64KiB", t.SegmentBytes))
		}
		if t.SegmentBytes > 4<<30 {
			errs = append(errs, fmt.Errorf("jetstream.tier.segment_bytes: %d is above the maximum of 4GiB", t.SegmentBytes))
		}
		if t.URL == "" {
			errs = append(errs, errors.New("jetstream.tier.url: required (s3://bucket/prefix or file:///dir)"))
		} else if !strings.HasPrefix(t.URL, "s3://") && !strings.HasPrefix(t.URL, "file:///") {
			errs = append(errs, fmt.Errorf("jetstream.tier.url: %q must be s3://bucket/prefix or file:///dir", t.URL))
		}
		if t.ReadTimeout < 0 {
			errs = append(errs, fmt.Errorf("jetstream.tier.read_timeout: %v cannot be negative", t.ReadTimeout))
		}
	}
	if strings.ContainsAny(j.Domain, " \t\r\n*>") {
		errs = append(errs, fmt.Errorf("jetstream.domain: %q cannot contain white space, '*' or '>'", j.Domain))
	}
	return errs
}

// setting is one numeric key of a block, for negatives.
type setting struct {
	key string
	v   int64
}

// negatives refuses the negative ones of settings: sizes and counts where
// zero means the default and below it means nothing.
func negatives(prefix string, settings ...setting) []error {
	var errs []error
	for _, st := range settings {
		if st.v < 0 {
			errs = append(errs, fmt.Errorf("%s%s: %d cannot be negative", prefix, st.key, st.v))
		}
	}
	return errs
}
