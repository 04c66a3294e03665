package api

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/subject"
)

// Consumer defaults nats-server applies.
const (
	// DefaultAckWait is the redelivery timeout of acking consumers.
	DefaultAckWait = 30 * time.Second
	// DefaultMaxAckPending caps unacknowledged messages of acking consumers.
	DefaultMaxAckPending = 1000
	// DefaultEphemeralInactiveThreshold removes an ephemeral consumer after
	// this long without interest.
	DefaultEphemeralInactiveThreshold = 5 * time.Second
	// DefaultPinnedTTL is how long a pinned client may go without pulling.
	DefaultPinnedTTL = 2 * time.Minute
	// AckFlowControlHeartbeat is the only heartbeat the flow_control ack
	// policy allows, as that policy serves stream sourcing.
	AckFlowControlHeartbeat = time.Second
)

var priorityGroupName = regexp.MustCompile(`^[a-zA-Z0-9/_=-]{1,16}$`)

// ConsumerEnv is what the consumer checks need beyond the config.
type ConsumerEnv struct {
	// Stream is the parent stream's normalized config; it must be set.
	Stream *StreamConfig
	// Limits are the account limits of the consumer's tier; nil for none.
	Limits *AccountLimits
	// Pedantic refuses (10157) where defaults would adjust values.
	Pedantic bool
}

// Defaults fills what nats-server fills in a consumer config: -1 max
// deliver, 512 max waiting for pulls, 30s ack wait and 1000 max ack
// pending for acking consumers (or the stream's consumer limits), the
// backoff's first step as ack wait, 2m pinned TTL for pinned groups, and
// 5s inactive threshold for ephemerals. It is idempotent.
func (c *ConsumerConfig) Defaults(stream *StreamConfig) {
	_ = c.fill(ConsumerEnv{Stream: stream})
	c.fillEphemeral()
}

// Validate reports the error nats-server would give for the config as a
// client sent it, against its stream, or nil; the receiver is unchanged.
func (c *ConsumerConfig) Validate(stream *StreamConfig) *Error {
	_, err := c.Normalize(ConsumerEnv{Stream: stream})
	return err
}

// Normalize is nats-server's consumer create check: defaults, then the
// config checks in nats-server's order, then the name checks. It returns a
// defaulted copy or the first error. Checks that need the stream's other
// consumers are CheckWorkQueue and ConsumerAction.Check.
func (c *ConsumerConfig) Normalize(env ConsumerEnv) (*ConsumerConfig, *Error) {
	if env.Stream == nil {
		return nil, NewStreamInvalidError()
	}
	cfg := c.Clone()
	if err := cfg.fill(env); err != nil {
		return nil, err
	}
	if err := cfg.check(env); err != nil {
		return nil, err
	}
	if len(cfg.Durable) > MaxNameLen {
		return nil, NewConsumerNameTooLongError(MaxNameLen)
	}
	if name := cfg.name(); name != "" && !ValidName(name) {
		return nil, NewConsumerBadDurableNameError()
	}
	cfg.fillEphemeral()
	return cfg, nil
}

func (c *ConsumerConfig) name() string {
	if c.Durable != "" {
		return c.Durable
	}
	return c.Name
}

// fill applies the defaults; in pedantic mode it refuses instead.
func (c *ConsumerConfig) fill(env ConsumerEnv) *Error {
	p := env.Pedantic
	if c.MaxDeliver == 0 || c.MaxDeliver < -1 {
		if p && c.MaxDeliver < -1 {
			return pedantic("max_deliver must be set to -1")
		}
		c.MaxDeliver = -1
	}
	if c.MaxAckPending < -1 {
		if p {
			return pedantic("max_ack_pending must be set to -1")
		}
		c.MaxAckPending = -1
	}
	for _, f := range []struct {
		name     string
		negative bool
		zero     func()
	}{
		{"max_waiting", c.MaxWaiting < 0, func() { c.MaxWaiting = 0 }},
		{"max_batch", c.MaxRequestBatch < 0, func() { c.MaxRequestBatch = 0 }},
		{"max_expires", c.MaxRequestExpires < 0, func() { c.MaxRequestExpires = 0 }},
		{"max_bytes", c.MaxRequestMaxBytes < 0, func() { c.MaxRequestMaxBytes = 0 }},
		{"idle_heartbeat", c.Heartbeat < 0, func() { c.Heartbeat = 0 }},
		{"inactive_threshold", c.InactiveThreshold < 0, func() { c.InactiveThreshold = 0 }},
		{"priority_timeout", c.PinnedTTL < 0, func() { c.PinnedTTL = 0 }},
	} {
		if f.negative {
			if p {
				return pedantic(f.name + " must not be negative")
			}
			f.zero()
		}
	}
	if c.IsPull() && c.MaxWaiting == 0 {
		c.MaxWaiting = MaxWaitingDefault
	}
	if c.AckWait == 0 && (c.AckPolicy == AckExplicit || c.AckPolicy == AckAll) {
		c.AckWait = DefaultAckWait
	}
	if len(c.BackOff) > 0 {
		if p && c.AckWait != c.BackOff[0] {
			return pedantic("first backoff value has to equal batch AckWait")
		}
		c.AckWait = c.BackOff[0]
	}
	lim := env.Stream.ConsumerLimits
	if c.MaxAckPending == 0 {
		if p && lim.MaxAckPending > 0 {
			return pedantic("max_ack_pending must be set if it's configured in stream limits")
		}
		c.MaxAckPending = lim.MaxAckPending
	}
	if c.InactiveThreshold == 0 {
		if p && lim.InactiveThreshold > 0 {
			return pedantic("inactive_threshold must be set if it's configured in stream limits")
		}
		c.InactiveThreshold = lim.InactiveThreshold
	}
	if c.MaxAckPending == 0 && c.AckPolicy != AckNone {
		c.MaxAckPending = DefaultMaxAckPending
		if l := env.Limits; l != nil && l.MaxAckPending > 0 && l.MaxAckPending < c.MaxAckPending {
			c.MaxAckPending = l.MaxAckPending
		}
	}
	if l := env.Limits; l != nil && l.MaxAckPending > 0 && c.MaxAckPending < 0 && c.AckPolicy != AckNone {
		// Unlimited (-1) under the account's ceiling would be a way past
		// it: it gets the ceiling. nats-server keeps -1 here, and so lets
		// one consumer hold more than its account allows. The stream's own
		// consumer_limits are the tenant's to lift, so -1 stays under them.
		if p {
			return NewConsumerMaxAckPendingExcessError(l.MaxAckPending)
		}
		c.MaxAckPending = l.MaxAckPending
	}
	if c.PriorityPolicy == PriorityPinnedClient && c.PinnedTTL == 0 {
		c.PinnedTTL = DefaultPinnedTTL
	}
	if c.AckPolicy == AckFlowControl && !p {
		c.FlowControl = true
		c.Heartbeat = AckFlowControlHeartbeat
	}
	return nil
}

// fillEphemeral gives ephemerals their inactivity threshold, which is how
// a vanished client's consumer gets cleaned up.
func (c *ConsumerConfig) fillEphemeral() {
	if !c.IsDurable() && c.InactiveThreshold <= 0 {
		c.InactiveThreshold = DefaultEphemeralInactiveThreshold
	}
}

// check is nats-server's config check, in its order.
func (c *ConsumerConfig) check(env ConsumerEnv) *Error {
	stream := env.Stream
	for _, step := range []func(*StreamConfig) *Error{c.checkNames, c.checkAcks} {
		if err := step(stream); err != nil {
			return err
		}
	}
	if len(c.Description) > MaxDescriptionLen {
		return NewConsumerDescriptionTooLongError(MaxDescriptionLen)
	}
	var err *Error
	if c.IsPull() {
		err = c.checkPull(stream)
	} else {
		err = c.checkPush(stream)
	}
	if err != nil {
		return err
	}
	if err := c.checkCeilings(env); err != nil {
		return err
	}
	for _, step := range []func(*StreamConfig) *Error{c.checkFilters, c.checkStart, c.checkMisc, c.checkPriority} {
		if err := step(stream); err != nil {
			return err
		}
	}
	if stream.Placement != nil && stream.Placement.Preferred != "" {
		return invalid("preferred server not permitted in placement")
	}
	return nil
}

func (c *ConsumerConfig) checkNames(stream *StreamConfig) *Error {
	if c.Name != "" && !ValidName(c.Name) {
		return invalid(`consumer name can not contain '.', '*', '>', '\', '/'`)
	}
	if c.Durable != "" && !ValidName(c.Durable) {
		return invalid(`consumer durable name can not contain '.', '*', '>', '\', '/'`)
	}
	if c.Replicas > 0 && c.Replicas > stream.Replicas {
		return NewConsumerReplicasExceedsStreamError()
	}
	if c.Replicas < 0 {
		return NewReplicasCountCannotBeNegativeError()
	}
	if stream.Retention != LimitsPolicy && c.Replicas != 0 && c.Replicas != stream.Replicas {
		return NewConsumerReplicasShouldMatchStreamError()
	}
	return nil
}

func (c *ConsumerConfig) checkAcks(_ *StreamConfig) *Error {
	if _, err := c.AckPolicy.MarshalJSON(); err != nil {
		return NewConsumerAckPolicyInvalidError()
	}
	if _, err := c.ReplayPolicy.MarshalJSON(); err != nil {
		return NewConsumerReplayPolicyInvalidError()
	}
	for _, b := range c.BackOff {
		if b < 0 {
			return NewConsumerBackOffNegativeError()
		}
	}
	if c.AckWait < 0 {
		return NewConsumerAckWaitNegativeError()
	}
	if c.AckPolicy == AckFlowControl {
		switch {
		case c.IsPull():
			return NewAckFlowControlRequiresPushError()
		case !c.FlowControl:
			return NewAckFlowControlRequiresFlowControlError()
		case c.Heartbeat != AckFlowControlHeartbeat:
			return invalid("flow control ack policy heartbeat needs to be 1s")
		case c.MaxAckPending <= 0:
			return NewAckFlowControlRequiresMaxAckPendingError()
		case c.AckWait != 0 || len(c.BackOff) > 0:
			return NewAckFlowControlForbidsAckWaitError()
		case c.MaxDeliver > 0:
			return NewAckFlowControlForbidsMaxDeliverError()
		}
	}
	if n := len(c.BackOff); n > 0 && c.MaxDeliver != -1 && n > c.MaxDeliver {
		return NewConsumerMaxDeliverBackoffError()
	}
	return nil
}

func (c *ConsumerConfig) checkPush(stream *StreamConfig) *Error {
	switch {
	case !subject.IsLiteral(c.DeliverSubject):
		return NewConsumerDeliverSubjectWildcardsError()
	case !validSubject(c.DeliverSubject):
		return NewConsumerInvalidDeliverSubjectError()
	case deliveryFormsCycle(stream, c.DeliverSubject):
		return NewConsumerDeliverCycleError()
	case c.MaxWaiting != 0:
		return NewConsumerPushMaxWaitingError()
	case c.MaxAckPending > 0 && c.AckPolicy == AckNone:
		return NewConsumerMaxAckPendingNeedsAckPolicyError()
	case c.Heartbeat > 0 && c.Heartbeat < 100*time.Millisecond:
		return NewConsumerSmallHeartbeatError()
	}
	return nil
}

// deliveryFormsCycle: pushing into the stream's own subjects would store
// every delivery again.
func deliveryFormsCycle(stream *StreamConfig, deliver string) bool {
	for _, s := range stream.Subjects {
		if subject.SubsetOf(deliver, s) {
			return true
		}
	}
	return false
}

func (c *ConsumerConfig) checkPull(stream *StreamConfig) *Error {
	switch {
	case c.AckPolicy == AckNone && stream.Retention == WorkQueuePolicy:
		return NewConsumerPullRequiresAckError()
	case c.RateLimit > 0:
		return NewConsumerPullWithRateLimitError()
	case c.MaxWaiting < 0:
		return NewConsumerMaxWaitingNegativeError()
	case c.Heartbeat > 0:
		return NewConsumerHeartbeatRequiresPushError()
	case c.FlowControl:
		return NewConsumerFlowControlRequiresPushError()
	case c.MaxRequestBatch < 0:
		return NewConsumerMaxRequestBatchNegativeError()
	case c.MaxRequestExpires != 0 && c.MaxRequestExpires < time.Millisecond:
		return NewConsumerMaxRequestExpiresTooSmallError()
	}
	return nil
}

// checkCeilings holds the consumer to the account's and the stream's caps.
func (c *ConsumerConfig) checkCeilings(env ConsumerEnv) *Error {
	if l := env.Limits; l != nil && l.MaxAckPending > 0 && c.MaxAckPending > l.MaxAckPending {
		return NewConsumerMaxAckPendingExcessError(l.MaxAckPending)
	}
	lim := env.Stream.ConsumerLimits
	if lim.MaxAckPending > 0 && c.MaxAckPending > lim.MaxAckPending {
		return NewConsumerMaxAckPendingExcessError(lim.MaxAckPending)
	}
	if lim.InactiveThreshold > 0 && c.InactiveThreshold > lim.InactiveThreshold {
		return NewConsumerInactiveThresholdExcessError(lim.InactiveThreshold)
	}
	if c.Direct {
		if c.IsPull() {
			return NewConsumerDirectRequiresPushError()
		}
		if c.IsDurable() {
			return NewConsumerDirectRequiresEphemeralError()
		}
	}
	return nil
}

func (c *ConsumerConfig) checkFilters(_ *StreamConfig) *Error {
	if c.FilterSubject != "" && len(c.FilterSubjects) > 0 {
		return NewConsumerDuplicateFilterSubjectsError()
	}
	if c.FilterSubject != "" && !validSubject(c.FilterSubject) {
		return NewStreamInvalidConfigError(errBadSubject)
	}
	for _, f := range c.FilterSubjects {
		if f == "" {
			return NewConsumerEmptyFilterError()
		}
	}
	filters := c.Filters()
	if len(filters) > MaxConsumerFilters {
		return NewStreamInvalidConfigError(errTooManyFilters)
	}
	return firstBadFilter(filters)
}

// checkStart refuses start options that contradict the deliver policy.
func (c *ConsumerConfig) checkStart(_ *StreamConfig) *Error {
	bad := func(policy, opt string) *Error {
		return NewConsumerInvalidPolicyError(fmt.Errorf(
			"consumer delivery policy is deliver %s, but optional start %s is also set", policy, opt))
	}
	missing := func(policy, opt string) *Error {
		return NewConsumerInvalidPolicyError(fmt.Errorf(
			"consumer delivery policy is deliver %s, but optional %s is not set", policy, opt))
	}
	seq, tm := c.OptStartSeq > 0, c.OptStartTime != nil
	switch c.DeliverPolicy {
	case DeliverAll, DeliverLast, DeliverNew, DeliverLastPerSubject:
		name := map[DeliverPolicy]string{DeliverAll: "all", DeliverLast: "last", DeliverNew: "new",
			DeliverLastPerSubject: "last per subject"}[c.DeliverPolicy]
		if seq {
			return bad(name, "sequence")
		}
		if tm {
			return bad(name, "time")
		}
		if c.DeliverPolicy == DeliverLastPerSubject && len(c.Filters()) == 0 {
			return missing(name, "filter subject")
		}
	case DeliverByStartSequence:
		if !seq {
			return missing("by start sequence", "start sequence")
		}
		if tm {
			return bad("by start sequence", "time")
		}
	case DeliverByStartTime:
		if !tm {
			return missing("by start time", "start time")
		}
		if seq {
			return bad("by start time", "start sequence")
		}
	}
	return nil
}

func (c *ConsumerConfig) checkMisc(_ *StreamConfig) *Error {
	if c.SampleFrequency != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(c.SampleFrequency, "%"))
		if err != nil || n < 0 {
			return NewConsumerInvalidSamplingError(err)
		}
	}
	if c.FlowControl && c.Heartbeat == 0 {
		return NewConsumerFlowControlNeedsHeartbeatError()
	}
	if c.Durable != "" && c.Name != "" && c.Durable != c.Name {
		return NewConsumerCreateDurableAndNameMismatchError()
	}
	if metadataLen(c.Metadata) > MaxMetadataLen {
		return NewConsumerMetadataLengthError(fmt.Sprintf("%dKB", MaxMetadataLen/1024))
	}
	return nil
}

func (c *ConsumerConfig) checkPriority(_ *StreamConfig) *Error {
	if c.PriorityPolicy == PriorityNone {
		if len(c.PriorityGroups) > 0 {
			return NewConsumerGroupsWithoutPolicyError()
		}
		if c.PinnedTTL > 0 {
			return NewConsumerPinnedTTLWithoutPolicyError()
		}
		return nil
	}
	if !c.IsPull() {
		return NewConsumerPushWithPriorityGroupError()
	}
	if len(c.PriorityGroups) == 0 {
		return NewConsumerPolicyWithoutGroupsError()
	}
	for _, g := range c.PriorityGroups {
		if g == "" {
			return NewConsumerEmptyGroupNameError()
		}
		if !priorityGroupName.MatchString(g) {
			return NewConsumerInvalidGroupNameError()
		}
	}
	return nil
}
