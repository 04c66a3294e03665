package api

import "strconv"

// Reserved metadata keys (ADR-44). nats-server stores the API level an
// asset needs, so an older server refuses to load what it cannot honour,
// and adds its own version and level to every config it reports.
const (
	// MetaRequiredLevel is stored: the API level the asset's features need.
	MetaRequiredLevel = "_nats.req.level"
	// MetaServerVersion is added to replies only: the server's version.
	MetaServerVersion = "_nats.ver"
	// MetaServerLevel is added to replies only: the server's API level.
	MetaServerLevel = "_nats.level"
)

// RequiredAPILevel is the API level the stream's features need: 1 for
// per-message TTLs and delete markers, 2 for counters, atomic batches,
// schedules and async persistence, 4 for fast batch publishing.
func (c *StreamConfig) RequiredAPILevel() int {
	level := 0
	need := func(l int) { level = max(level, l) }
	if c.AllowMsgTTL || c.SubjectDeleteMarkerTTL > 0 {
		need(1)
	}
	if c.AllowMsgCounter || c.AllowAtomicPublish || c.AllowMsgSchedules || c.PersistMode == AsyncPersistMode {
		need(2)
	}
	if c.AllowBatchPublish {
		need(4)
	}
	return level
}

// StampRequiredLevel drops any reply-only keys a client echoed back and
// records the required API level, as nats-server does to every stream
// create and update request before checking it (so the key counts toward
// MaxMetadataLen).
func (c *StreamConfig) StampRequiredLevel() {
	c.Metadata = stampLevel(c.Metadata, c.RequiredAPILevel())
}

// WithServerMetadata returns a copy of c whose metadata also names the
// server version and API level, the form every reply carries.
func (c *StreamConfig) WithServerMetadata(version string, level int) *StreamConfig {
	out := *c
	out.Metadata = withServer(c.Metadata, version, level)
	return &out
}

// RequiredAPILevel is the API level the consumer's features need: 1 for
// pausing and priority groups, 4 for the flow_control ack policy.
func (c *ConsumerConfig) RequiredAPILevel() int {
	level := 0
	if c.PauseUntil != nil && !c.PauseUntil.IsZero() {
		level = 1
	}
	if c.PriorityPolicy != PriorityNone || c.PinnedTTL != 0 || len(c.PriorityGroups) > 0 {
		level = max(level, 1)
	}
	if c.AckPolicy == AckFlowControl {
		level = max(level, 4)
	}
	return level
}

// StampRequiredLevel is the consumer counterpart of
// StreamConfig.StampRequiredLevel.
func (c *ConsumerConfig) StampRequiredLevel() {
	c.Metadata = stampLevel(c.Metadata, c.RequiredAPILevel())
}

// WithServerMetadata returns a copy of c whose metadata also names the
// server version and API level.
func (c *ConsumerConfig) WithServerMetadata(version string, level int) *ConsumerConfig {
	out := *c
	out.Metadata = withServer(c.Metadata, version, level)
	return &out
}

func stampLevel(m map[string]string, level int) map[string]string {
	if m == nil {
		m = make(map[string]string, 1)
	}
	delete(m, MetaServerVersion)
	delete(m, MetaServerLevel)
	m[MetaRequiredLevel] = strconv.Itoa(level)
	return m
}

func withServer(m map[string]string, version string, level int) map[string]string {
	out := make(map[string]string, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	out[MetaServerVersion] = version
	out[MetaServerLevel] = strconv.Itoa(level)
	return out
}
