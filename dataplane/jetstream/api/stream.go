package api

import "time"

// StreamConfig is a stream's configuration as clients send it in
// $JS.API.STREAM.CREATE/UPDATE (decode with DecodeRequest) and as every
// stream info reply echoes it.
// The omitempty rules follow nats-server: limits, policies and the
// sealed/deny/allow flags are always sent, the rest only when set. jsm.go's
// schema rejects unknown members here, so nothing may be added that
// nats-server does not send.
type StreamConfig struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Subjects     []string        `json:"subjects,omitempty"`
	Retention    RetentionPolicy `json:"retention"`
	MaxConsumers int             `json:"max_consumers"`
	MaxMsgs      int64           `json:"max_msgs"`
	MaxBytes     int64           `json:"max_bytes"`
	// MaxAge is the oldest a message may get; 0 means no limit.
	MaxAge time.Duration `json:"max_age"`
	// MaxMsgsPer is the per-subject message limit (KV history).
	MaxMsgsPer int64         `json:"max_msgs_per_subject"`
	MaxMsgSize int32         `json:"max_msg_size,omitempty"`
	Discard    DiscardPolicy `json:"discard"`
	Storage    StorageType   `json:"storage"`
	Replicas   int           `json:"num_replicas"`
	NoAck      bool          `json:"no_ack,omitempty"`
	// There is deliberately no template_owner: stream templates are gone
	// from nats-server, its strict decoding refuses the member (10025),
	// and jsm.go's schema forbids it in replies.
	// Duplicates is the Nats-Msg-Id deduplication window.
	Duplicates  time.Duration   `json:"duplicate_window,omitempty"`
	Placement   *Placement      `json:"placement,omitempty"`
	Mirror      *StreamSource   `json:"mirror,omitempty"`
	Sources     []*StreamSource `json:"sources,omitempty"`
	Compression Compression     `json:"compression"`
	FirstSeq    uint64          `json:"first_seq,omitempty"`
	// SubjectTransform rewrites subjects of incoming messages before storing.
	SubjectTransform *SubjectTransform `json:"subject_transform,omitempty"`
	// RePublish re-sends each stored message on another subject.
	RePublish *RePublish `json:"republish,omitempty"`
	// AllowDirect enables $JS.API.DIRECT.GET, which KV relies on.
	AllowDirect  bool `json:"allow_direct"`
	MirrorDirect bool `json:"mirror_direct"`
	// DiscardNewPer applies discard-new per subject (KV create semantics).
	DiscardNewPer bool `json:"discard_new_per_subject,omitempty"`
	Sealed        bool `json:"sealed"`
	DenyDelete    bool `json:"deny_delete"`
	DenyPurge     bool `json:"deny_purge"`
	// AllowRollup permits the Nats-Rollup header.
	AllowRollup bool `json:"allow_rollup_hdrs"`
	// ConsumerLimits caps, and defaults, what this stream's consumers set.
	ConsumerLimits StreamConsumerLimits `json:"consumer_limits"`
	// AllowMsgTTL honours the Nats-TTL header (ADR-43).
	AllowMsgTTL bool `json:"allow_msg_ttl"`
	// SubjectDeleteMarkerTTL leaves a marker with this TTL when a subject's
	// last message ages out or is purged.
	SubjectDeleteMarkerTTL time.Duration `json:"subject_delete_marker_ttl,omitempty"`
	AllowMsgCounter        bool          `json:"allow_msg_counter,omitempty"`
	AllowAtomicPublish     bool          `json:"allow_atomic,omitempty"`
	AllowMsgSchedules      bool          `json:"allow_msg_schedules,omitempty"`
	PersistMode            PersistMode   `json:"persist_mode,omitempty"`
	AllowBatchPublish      bool          `json:"allow_batched,omitempty"`
	// Metadata is free-form; keys starting with "_nats." are the server's.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Clone returns a deep copy, so a stored config can be defaulted or
// edited without aliasing the caller's slices and maps.
func (c *StreamConfig) Clone() *StreamConfig {
	if c == nil {
		return nil
	}
	out := *c
	out.Subjects = cloneSlice(c.Subjects)
	if c.Placement != nil {
		p := *c.Placement
		p.Tags = cloneSlice(p.Tags)
		out.Placement = &p
	}
	out.Mirror = c.Mirror.clone()
	if c.Sources != nil {
		out.Sources = make([]*StreamSource, len(c.Sources))
		for i, s := range c.Sources {
			out.Sources[i] = s.clone()
		}
	}
	if c.SubjectTransform != nil {
		t := *c.SubjectTransform
		out.SubjectTransform = &t
	}
	if c.RePublish != nil {
		r := *c.RePublish
		out.RePublish = &r
	}
	out.Metadata = cloneMap(c.Metadata)
	return &out
}

// StreamConsumerLimits are per-stream ceilings on consumer settings, which
// also serve as defaults for consumers that leave them unset.
type StreamConsumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`
	MaxAckPending     int           `json:"max_ack_pending,omitempty"`
}

// Placement steers which cluster and tagged servers host a stream.
type Placement struct {
	Cluster   string   `json:"cluster,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Preferred string   `json:"preferred,omitempty"`
}

// SubjectTransform maps subjects from Source to Destination; it appears on
// streams and, as a list, on mirrors and sources.
type SubjectTransform struct {
	Source      string `json:"src"`
	Destination string `json:"dest"`
}

// RePublish is the republish rule of a stream.
type RePublish struct {
	Source      string `json:"src,omitempty"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only,omitempty"`
}

// StreamSource names a stream to mirror or source from, with the point to
// start at and the subset to take.
type StreamSource struct {
	Name              string               `json:"name"`
	OptStartSeq       uint64               `json:"opt_start_seq,omitempty"`
	OptStartTime      *time.Time           `json:"opt_start_time,omitempty"`
	FilterSubject     string               `json:"filter_subject,omitempty"`
	SubjectTransforms []SubjectTransform   `json:"subject_transforms,omitempty"`
	External          *ExternalStream      `json:"external,omitempty"`
	Consumer          *StreamSourceDurable `json:"consumer,omitempty"`
}

func (s *StreamSource) clone() *StreamSource {
	if s == nil {
		return nil
	}
	out := *s
	if s.OptStartTime != nil {
		t := *s.OptStartTime
		out.OptStartTime = &t
	}
	out.SubjectTransforms = cloneSlice(s.SubjectTransforms)
	if s.External != nil {
		e := *s.External
		out.External = &e
	}
	if s.Consumer != nil {
		c := *s.Consumer
		out.Consumer = &c
	}
	return &out
}

// StreamSourceDurable asks a mirror or source to read through a named
// durable consumer instead of an ephemeral one.
type StreamSourceDurable struct {
	Name           string `json:"name,omitempty"`
	DeliverSubject string `json:"deliver_subject,omitempty"`
}

// ExternalStream reaches a source stream in another account or domain
// through an imported API prefix.
type ExternalStream struct {
	APIPrefix     string `json:"api"`
	DeliverPrefix string `json:"deliver"`
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
