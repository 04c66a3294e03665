package api

import (
	"errors"
	"fmt"
	"time"
)

// DefaultDuplicateWindow is the Nats-Msg-Id window a stream gets when it
// sets none (capped by max_age).
const DefaultDuplicateWindow = 2 * time.Minute

// StreamEnv is what the stream checks need to know beyond the config: the
// request's pedantic flag, the account's limits for the stream's tier, and
// the other streams of the account (for mirror, source and cycle checks).
// The zero value checks the config on its own.
type StreamEnv struct {
	// Pedantic makes the checks refuse (10157) where they would otherwise
	// adjust a value silently.
	Pedantic bool
	// Limits are the account limits of the stream's tier; nil skips the
	// max_bytes_required and max-stream-bytes checks.
	Limits *AccountLimits
	// Lookup returns another stream of the account by name; nil means the
	// account has no other streams.
	Lookup func(name string) (*StreamConfig, bool)
}

func (env StreamEnv) lookup(name string) (*StreamConfig, bool) {
	if env.Lookup == nil {
		return nil, false
	}
	return env.Lookup(name)
}

// Defaults fills what nats-server fills in a stream config it accepts:
// file storage, one replica, -1 for unset limits, a duplicate window of
// two minutes or max_age if shorter, the subjects default of the stream's
// own name, the markers delete markers and schedules imply, and a ">"
// republish source. It is idempotent. A config that fails Validate may be
// left only partly filled; use Normalize to default and check in one go.
func (c *StreamConfig) Defaults() {
	c.fillLimits()
	c.fillDuplicates()
	c.fillMarkers()
	c.fillSubjects()
	c.fillRepublish()
	c.fillPlacement()
}

// Validate reports the error nats-server would give for the config as a
// client sent it (before Defaults), or nil. It is Normalize without an
// environment, keeping the receiver unchanged.
func (c *StreamConfig) Validate() *Error {
	_, err := c.Normalize(StreamEnv{})
	return err
}

// Normalize is nats-server's stream create check: it returns a defaulted
// copy of the config, or the first error in the order nats-server finds
// them. Defaulting and checking interleave there (a check may look at a
// value before or after it was defaulted), so they interleave here too.
// Subject overlap with other streams is the account's to check, against
// its stream index (10065).
func (c *StreamConfig) Normalize(env StreamEnv) (*StreamConfig, *Error) {
	if err := c.checkIdentity(); err != nil {
		return nil, err
	}
	cfg := c.Clone()
	steps := []func(*StreamConfig, StreamEnv) *Error{
		checkPolicies, checkLimits, checkDuplicates, checkFlags,
		checkMirror, checkFirstSeq, checkSources, checkCycles, checkSubjects,
		checkMaxBytes, checkTransform, checkRepublish, checkPlacement,
	}
	for _, step := range steps {
		if err := step(cfg, env); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func invalid(format string, args ...any) *Error {
	return NewStreamInvalidConfigError(fmt.Errorf(format, args...))
}

func pedantic(text string) *Error { return NewPedanticError(errors.New(text)) }

// checkIdentity covers the checks nats-server makes before copying the config.
func (c *StreamConfig) checkIdentity() *Error {
	switch {
	case !ValidName(c.Name):
		return invalid(`stream name is required and can not contain '.', '*', '>', '\', '/'`)
	case len(c.Name) > MaxNameLen:
		return invalid("stream name is too long, maximum allowed is %d", MaxNameLen)
	case len(c.Description) > MaxDescriptionLen:
		return invalid("stream description is too long, maximum allowed is %d", MaxDescriptionLen)
	case metadataLen(c.Metadata) > MaxMetadataLen:
		return invalid("stream metadata exceeds maximum size of %d bytes", MaxMetadataLen)
	}
	return nil
}

func checkPolicies(c *StreamConfig, _ StreamEnv) *Error {
	if _, err := c.Retention.MarshalJSON(); err != nil {
		return invalid("invalid retention")
	}
	if _, err := c.Discard.MarshalJSON(); err != nil {
		return invalid("invalid discard policy")
	}
	if _, err := c.Compression.MarshalJSON(); err != nil {
		return invalid("invalid compression")
	}
	if _, err := c.Storage.MarshalJSON(); err != nil {
		return invalid("invalid storage type")
	}
	return nil
}

// checkFirstSeq keeps a stream's sequence space from starting so near
// its end that the next publishes wrap to 0.
func checkFirstSeq(c *StreamConfig, _ StreamEnv) *Error {
	if c.FirstSeq > MaxRequestSeq {
		return NewStreamInvalidConfigError(errFirstSeqTooLarge)
	}
	return nil
}

func checkLimits(c *StreamConfig, env StreamEnv) *Error {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas > MaxReplicas {
		return invalid("maximum replicas is %d", MaxReplicas)
	}
	if c.Replicas < 0 {
		return NewReplicasCountCannotBeNegativeError()
	}
	if env.Pedantic {
		for _, l := range []struct {
			name string
			v    int64
		}{
			{"max_msgs", c.MaxMsgs}, {"max_msgs_per_subject", c.MaxMsgsPer}, {"max_bytes", c.MaxBytes},
			{"max_msg_size", int64(c.MaxMsgSize)}, {"max_consumers", int64(c.MaxConsumers)},
		} {
			if l.v < -1 {
				return pedantic(l.name + " must be set to -1")
			}
		}
	}
	c.fillLimits()
	if c.MaxAge < 0 {
		return invalid("max age can not be negative")
	}
	if c.MaxAge != 0 && c.MaxAge < 100*time.Millisecond {
		return invalid("max age needs to be >= 100ms")
	}
	return nil
}

// fillLimits turns unset (0) or nonsensical (< -1) limits into -1, unlimited.
func (c *StreamConfig) fillLimits() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	unlimited := func(v int64) int64 {
		if v == 0 || v < -1 {
			return -1
		}
		return v
	}
	c.MaxMsgs = unlimited(c.MaxMsgs)
	c.MaxMsgsPer = unlimited(c.MaxMsgsPer)
	c.MaxBytes = unlimited(c.MaxBytes)
	c.MaxMsgSize = int32(unlimited(int64(c.MaxMsgSize)))
	c.MaxConsumers = int(unlimited(int64(c.MaxConsumers)))
}

func checkDuplicates(c *StreamConfig, env StreamEnv) *Error {
	if env.Pedantic && c.dupsWouldDefault() && c.MaxAge != 0 && c.MaxAge < DefaultDuplicateWindow {
		return pedantic("duplicate window cannot be bigger than max age")
	}
	c.fillDuplicates()
	switch {
	case c.Duplicates < 0:
		return invalid("duplicates window can not be negative")
	case c.MaxAge != 0 && c.Duplicates > c.MaxAge:
		return invalid("duplicates window can not be larger then max age")
	case c.Duplicates > 0 && c.Duplicates < 100*time.Millisecond:
		return invalid("duplicates window needs to be >= 100ms")
	}
	return nil
}

// dupsWouldDefault: mirrors and sourcing streams keep a zero window.
func (c *StreamConfig) dupsWouldDefault() bool {
	return c.Duplicates == 0 && c.Mirror == nil && len(c.Sources) == 0
}

func (c *StreamConfig) fillDuplicates() {
	if !c.dupsWouldDefault() {
		return
	}
	c.Duplicates = DefaultDuplicateWindow
	if c.MaxAge > 0 && c.MaxAge < DefaultDuplicateWindow {
		c.Duplicates = c.MaxAge
	}
}

// checkFlags covers the feature flags that exclude or imply each other.
func checkFlags(c *StreamConfig, env StreamEnv) *Error {
	if c.DenyPurge && c.AllowRollup {
		return invalid("roll-ups require the purge permission")
	}
	if c.AllowMsgCounter {
		switch {
		case c.Discard == DiscardNew:
			return invalid("counter stream cannot use discard new")
		case c.AllowMsgTTL:
			return invalid("counter stream cannot use message TTLs")
		case c.AllowMsgSchedules:
			return invalid("counter stream cannot use message schedules")
		case c.Retention != LimitsPolicy:
			return invalid("counter stream can only use limits retention")
		}
	}
	if c.DiscardNewPer {
		if err := checkDiscardNewPer(c); err != nil {
			return err
		}
	}
	if c.SubjectDeleteMarkerTTL > 0 {
		switch {
		case c.SubjectDeleteMarkerTTL < time.Second:
			return invalid("subject delete marker TTL must be at least 1 second")
		case env.Pedantic && !c.AllowMsgTTL:
			return invalid("subject delete marker cannot be set if message TTLs are disabled")
		case env.Pedantic && !c.AllowRollup:
			return invalid("subject delete marker cannot be set if roll-ups are disabled")
		}
	} else if c.SubjectDeleteMarkerTTL < 0 {
		return invalid("subject delete marker TTL must not be negative")
	}
	if c.AllowMsgSchedules {
		if c.Discard == DiscardNew {
			return invalid("message scheduling cannot use discard new")
		}
		if env.Pedantic && !c.AllowRollup {
			return invalid("message scheduling cannot be set if roll-ups are disabled")
		}
	}
	c.fillMarkers()
	if c.PersistMode == AsyncPersistMode {
		switch {
		case c.Storage != FileStorage:
			return invalid("async persist mode is only supported on file storage")
		case c.Replicas > 1:
			return invalid("async persist mode is not supported on replicated streams")
		case c.AllowAtomicPublish:
			return invalid("async persist mode is not supported with atomic batch publish")
		}
	}
	return nil
}

func checkDiscardNewPer(c *StreamConfig) *Error {
	if c.Discard != DiscardNew {
		return invalid("discard new per subject requires discard new policy to be set")
	}
	if c.MaxMsgsPer <= 0 {
		return invalid("discard new per subject requires max msgs per subject > 0")
	}
	return nil
}

// fillMarkers turns on what delete markers and schedules need: markers are
// messages with a TTL, and both work by rolling up a subject.
func (c *StreamConfig) fillMarkers() {
	if c.SubjectDeleteMarkerTTL >= time.Second {
		c.AllowMsgTTL = true
		if !c.AllowRollup {
			c.AllowRollup, c.DenyPurge = true, false
		}
	}
	if c.AllowMsgSchedules && !c.AllowRollup {
		c.AllowRollup, c.DenyPurge = true, false
	}
}

func checkMaxBytes(c *StreamConfig, env StreamEnv) *Error {
	required, ceiling := env.Limits.maxStreamBytes(c.Storage)
	if required && c.MaxBytes <= 0 {
		return NewStreamMaxBytesRequiredError()
	}
	if ceiling > 0 && c.MaxBytes > ceiling {
		return NewStreamMaxBytesExceededError()
	}
	return nil
}

func checkPlacement(c *StreamConfig, _ StreamEnv) *Error {
	c.fillPlacement()
	if c.Placement != nil && c.Placement.Preferred != "" {
		return invalid("preferred server not permitted in placement")
	}
	return nil
}

// fillPlacement drops an empty placement, which means "anywhere".
func (c *StreamConfig) fillPlacement() {
	if p := c.Placement; p != nil && p.Cluster == "" && len(p.Tags) == 0 && p.Preferred == "" {
		c.Placement = nil
	}
}
