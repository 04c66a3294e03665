package api

import (
	"errors"
	"maps"
	"reflect"
	"strings"

	"github.com/contrail/contrail/dataplane/subject"
)

// CheckStreamUpdate applies nats-server's update rules to next, the
// normalized config of a STREAM.UPDATE request, against old, the stored
// config. It returns the config to store (a sealed stream is adjusted so
// nothing can leave it) or the first rule broken. Account limits, the
// clustered/single-server replica rule and subject overlap are the
// handler's to check.
func CheckStreamUpdate(old, next *StreamConfig) (*StreamConfig, *Error) {
	cfg := next.Clone()
	switch {
	case cfg.Name != old.Name:
		return nil, invalid("stream configuration name must match original")
	case cfg.Storage != old.Storage:
		return nil, invalid("stream configuration update can not change storage type")
	case cfg.Retention != old.Retention && (old.Retention == WorkQueuePolicy || cfg.Retention == WorkQueuePolicy):
		return nil, invalid("stream configuration update can not change retention policy to/from workqueue")
	case old.Sealed && !cfg.Sealed:
		return nil, invalid("stream configuration update can not unseal a sealed stream")
	case old.DenyDelete && !cfg.DenyDelete:
		return nil, invalid("stream configuration update can not cancel deny message deletes")
	case old.DenyPurge && !cfg.DenyPurge:
		return nil, invalid("stream configuration update can not cancel deny purge")
	case cfg.Mirror != nil && !reflect.DeepEqual(cfg.Mirror, old.Mirror):
		// Removing the mirror is allowed: it promotes the mirror to a stream.
		return nil, NewStreamMirrorNotUpdatableError()
	}
	if cfg.DiscardNewPer {
		if err := checkDiscardNewPer(cfg); err != nil {
			return nil, err
		}
	}
	switch {
	case old.AllowMsgTTL && !cfg.AllowMsgTTL:
		return nil, invalid("message TTL status can not be disabled")
	case cfg.AllowMsgCounter != old.AllowMsgCounter:
		return nil, invalid("stream configuration update can not change message counter setting")
	case old.AllowMsgSchedules && !cfg.AllowMsgSchedules:
		return nil, invalid("message schedules can not be disabled")
	case old.PersistMode != cfg.PersistMode:
		return nil, invalid("stream configuration update can not change persist mode")
	}
	if cfg.Sealed {
		cfg.MaxAge = 0
		cfg.Discard = DiscardNew
		cfg.DenyDelete, cfg.DenyPurge = true, true
		cfg.AllowRollup = false
	}
	return cfg, nil
}

// Check applies the create request's action to the consumer of the same
// name, if there is one (existing nil if not): "create" must not change an
// existing consumer (10148), "update" needs one to exist (10149). Both
// configs are normalized; server-owned metadata keys are ignored.
func (a ConsumerAction) Check(existing, requested *ConsumerConfig) *Error {
	switch {
	case existing == nil && a == ActionUpdate:
		return NewConsumerDoesNotExistError()
	case existing != nil && a == ActionCreate && !sameConsumer(existing, requested):
		return NewConsumerAlreadyExistsError()
	}
	return nil
}

func sameConsumer(a, b *ConsumerConfig) bool {
	ac, bc := *a, *b
	ac.Metadata, bc.Metadata = userMetadata(a.Metadata), userMetadata(b.Metadata)
	return reflect.DeepEqual(&ac, &bc)
}

// userMetadata drops the "_nats." keys, which the server owns.
func userMetadata(m map[string]string) map[string]string {
	out := maps.Clone(m)
	for k := range out {
		if strings.HasPrefix(k, "_nats.") {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// CheckConsumerUpdate applies nats-server's rules for changing an existing
// consumer: what fixes where and how it delivers cannot change. Both
// configs are normalized. deliverBound says whether someone is subscribed
// to the old deliver subject, which makes a push consumer's subject
// unchangeable (10013).
func CheckConsumerUpdate(old, next *ConsumerConfig, deliverBound bool) *Error {
	if reflect.DeepEqual(old, next) {
		return nil
	}
	fixed := func(text string) *Error { return NewConsumerCreateError(errors.New(text)) }
	switch {
	case old.DeliverPolicy != next.DeliverPolicy:
		return fixed("deliver policy can not be updated")
	case old.MemoryStorage != next.MemoryStorage:
		return fixed("storage type can not be updated")
	case old.Direct != next.Direct:
		return fixed("direct can not be updated")
	case old.Sourcing != next.Sourcing:
		return fixed("sourcing can not be updated")
	case old.OptStartSeq != next.OptStartSeq:
		return fixed("start sequence can not be updated")
	case !sameTime(old, next):
		return fixed("start time can not be updated")
	case old.AckPolicy != next.AckPolicy:
		return fixed("ack policy can not be updated")
	case old.ReplayPolicy != next.ReplayPolicy:
		return fixed("replay policy can not be updated")
	case old.Heartbeat != next.Heartbeat:
		return fixed("heart beats can not be updated")
	case old.FlowControl != next.FlowControl:
		return fixed("flow control can not be updated")
	}
	if old.DeliverSubject != next.DeliverSubject {
		switch {
		case old.DeliverSubject == "":
			return fixed("can not update pull consumer to push based")
		case next.DeliverSubject == "":
			return fixed("can not update push consumer to pull based")
		case deliverBound:
			return NewConsumerNameInUseError()
		}
	}
	if old.MaxWaiting != next.MaxWaiting {
		return fixed("max waiting can not be updated")
	}
	if n := len(next.BackOff); n > 0 && next.MaxDeliver != -1 && n > next.MaxDeliver {
		return NewConsumerMaxDeliverBackoffError()
	}
	return nil
}

func sameTime(a, b *ConsumerConfig) bool {
	if a.OptStartTime == nil || b.OptStartTime == nil {
		return a.OptStartTime == nil && b.OptStartTime == nil
	}
	return a.OptStartTime.Equal(*b.OptStartTime)
}

// CheckWorkQueue applies a work-queue stream's rules to a new consumer:
// every message goes to exactly one consumer, so consumers must ack
// explicitly, start at the beginning, and split the subjects between
// them without overlap. others are the stream's other consumers.
func CheckWorkQueue(stream *StreamConfig, cfg *ConsumerConfig, others []*ConsumerConfig) *Error {
	if stream.Retention != WorkQueuePolicy || cfg.Direct || cfg.Sourcing {
		return nil
	}
	if cfg.AckPolicy != AckExplicit && cfg.AckPolicy != AckFlowControl {
		return NewWorkQueueRequiresExplicitAckError()
	}
	if cfg.DeliverPolicy != DeliverAll {
		return NewWorkQueueRequiresDeliverAllError()
	}
	var peers []*ConsumerConfig
	for _, o := range others {
		if !o.Direct && !o.Sourcing {
			peers = append(peers, o)
		}
	}
	if len(peers) == 0 {
		return nil
	}
	mine := cfg.Filters()
	if len(mine) == 0 {
		return NewWorkQueueMultipleUnfilteredError()
	}
	if !partitionUnique(mine, peers) {
		return NewWorkQueueFilterNotUniqueError()
	}
	return nil
}

// partitionUnique reports whether no filter overlaps a peer's filter; an
// unfiltered peer takes everything.
func partitionUnique(filters []string, peers []*ConsumerConfig) bool {
	for _, f := range filters {
		for _, p := range peers {
			theirs := p.Filters()
			if len(theirs) == 0 {
				return false
			}
			for _, t := range theirs {
				if subject.Overlaps(f, t) {
					return false
				}
			}
		}
	}
	return true
}
