package api

import (
	"maps"
	"time"
)

// ConsumerConfig is a consumer's configuration as clients send it in
// CONSUMER.CREATE and as consumer info echoes it. deliver_policy,
// ack_policy, replay_policy and num_replicas are always sent; everything
// else only when set, as nats-server does.
type ConsumerConfig struct {
	// Durable is the legacy way to name a durable consumer; when both are
	// set they must agree with Name.
	Durable       string        `json:"durable_name,omitempty"`
	Name          string        `json:"name,omitempty"`
	Description   string        `json:"description,omitempty"`
	DeliverPolicy DeliverPolicy `json:"deliver_policy"`
	OptStartSeq   uint64        `json:"opt_start_seq,omitempty"`
	OptStartTime  *time.Time    `json:"opt_start_time,omitempty"`
	AckPolicy     AckPolicy     `json:"ack_policy"`
	AckWait       time.Duration `json:"ack_wait,omitempty"`
	// MaxDeliver is -1 for unlimited once defaulted.
	MaxDeliver int `json:"max_deliver,omitempty"`
	// BackOff, when set, replaces AckWait with a redelivery schedule.
	BackOff        []time.Duration `json:"backoff,omitempty"`
	FilterSubject  string          `json:"filter_subject,omitempty"`
	FilterSubjects []string        `json:"filter_subjects,omitempty"`
	ReplayPolicy   ReplayPolicy    `json:"replay_policy"`
	// RateLimit is in bits per second, push consumers only.
	RateLimit       uint64 `json:"rate_limit_bps,omitempty"`
	SampleFrequency string `json:"sample_freq,omitempty"`
	// MaxWaiting caps outstanding pull requests (512 by default).
	MaxWaiting    int  `json:"max_waiting,omitempty"`
	MaxAckPending int  `json:"max_ack_pending,omitempty"`
	FlowControl   bool `json:"flow_control,omitempty"`
	HeadersOnly   bool `json:"headers_only,omitempty"`

	// Pull limits: the largest batch, expiry and max_bytes one pull may ask.
	MaxRequestBatch    int           `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int           `json:"max_bytes,omitempty"`

	// Push delivery.
	DeliverSubject string        `json:"deliver_subject,omitempty"`
	DeliverGroup   string        `json:"deliver_group,omitempty"`
	Heartbeat      time.Duration `json:"idle_heartbeat,omitempty"`

	// InactiveThreshold removes the consumer after this long without
	// interest; ephemerals get 5s when they leave it unset.
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`

	// Replicas 0 means inherit the stream's.
	Replicas      int  `json:"num_replicas"`
	MemoryStorage bool `json:"mem_storage,omitempty"`

	// Direct and Sourcing mark the server's own mirror/source consumers.
	Direct   bool `json:"direct,omitempty"`
	Sourcing bool `json:"sourcing,omitempty"`

	Metadata map[string]string `json:"metadata,omitempty"`

	// PauseUntil suspends delivery until the deadline.
	PauseUntil *time.Time `json:"pause_until,omitempty"`

	// Priority groups (ADR-42).
	PriorityGroups []string       `json:"priority_groups,omitempty"`
	PriorityPolicy PriorityPolicy `json:"priority_policy,omitempty"`
	PinnedTTL      time.Duration  `json:"priority_timeout,omitempty"`
}

// Clone returns a deep copy, so defaulting a request never edits a stored
// config through a shared slice or map.
func (c *ConsumerConfig) Clone() *ConsumerConfig {
	if c == nil {
		return nil
	}
	out := *c
	if c.OptStartTime != nil {
		t := *c.OptStartTime
		out.OptStartTime = &t
	}
	if c.PauseUntil != nil {
		t := *c.PauseUntil
		out.PauseUntil = &t
	}
	out.BackOff = cloneSlice(c.BackOff)
	out.FilterSubjects = cloneSlice(c.FilterSubjects)
	out.PriorityGroups = cloneSlice(c.PriorityGroups)
	if c.Metadata != nil {
		out.Metadata = maps.Clone(c.Metadata)
	}
	return &out
}

// IsDurable reports whether the consumer outlives its clients: only a
// durable_name makes it so; a bare name is still ephemeral.
func (c *ConsumerConfig) IsDurable() bool { return c.Durable != "" }

// IsPull reports whether clients fetch with pull requests rather than
// receiving pushes on a deliver subject.
func (c *ConsumerConfig) IsPull() bool { return c.DeliverSubject == "" }

// Filters returns the consumer's subject filters as one list, whichever of
// filter_subject and filter_subjects carried them; nil means everything.
func (c *ConsumerConfig) Filters() []string {
	if c.FilterSubject != "" {
		return append(cloneSlice(c.FilterSubjects), c.FilterSubject)
	}
	return c.FilterSubjects
}

// ConsumerInfo is what CONSUMER.INFO, CREATE and LIST report about a
// consumer. Created and TimeStamp are always sent.
type ConsumerInfo struct {
	Stream  string          `json:"stream_name"`
	Name    string          `json:"name"`
	Created time.Time       `json:"created"`
	Config  *ConsumerConfig `json:"config,omitempty"`
	// Delivered is the last message handed out; AckFloor the highest
	// contiguously acknowledged one.
	Delivered      SequenceInfo  `json:"delivered"`
	AckFloor       SequenceInfo  `json:"ack_floor"`
	NumAckPending  int           `json:"num_ack_pending"`
	NumRedelivered int           `json:"num_redelivered"`
	NumWaiting     int           `json:"num_waiting"`
	NumPending     uint64        `json:"num_pending"`
	Cluster        *ClusterInfo  `json:"cluster,omitempty"`
	PushBound      bool          `json:"push_bound,omitempty"`
	Paused         bool          `json:"paused,omitempty"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
	// TimeStamp is when the info was gathered.
	TimeStamp      time.Time            `json:"ts"`
	PriorityGroups []PriorityGroupState `json:"priority_groups,omitempty"`
}

// SequenceInfo pairs a consumer sequence with the stream sequence it
// delivered, and when that last happened. jsm.go's schema forbids unknown
// members here.
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

// SequencePair is the timeless form of SequenceInfo that consumer state
// records use.
type SequencePair struct {
	Consumer uint64 `json:"consumer_seq"`
	Stream   uint64 `json:"stream_seq"`
}

// PriorityGroupState reports which client, if any, a pinned priority
// group is pinned to. PinnedTS is always sent, zero when nothing is pinned,
// as nats-server does.
type PriorityGroupState struct {
	Group          string    `json:"group"`
	PinnedClientID string    `json:"pinned_client_id,omitempty"`
	PinnedTS       time.Time `json:"pinned_ts"`
}
