package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The policy enums below are ints in Go and fixed lower-case strings on the
// wire. Unmarshalling anything else fails, which a handler reports as
// invalid JSON (10025), as nats-server does; marshalling an out-of-range
// value fails too, so a corrupted config is never sent half-right.

// enumSpelling is the wire spelling of each value of one enum, by index.
type enumSpelling struct {
	kind  string
	names []string
	fold  bool // accept any letter case, as nats-server does for discard
	// bad formats the error for a value that is not one of names, from
	// the raw JSON, in nats-server's words (it reaches clients inside the
	// 10025 description); empty means `can not unmarshal "<raw>"`.
	bad string
}

// badValue is the error for the raw JSON value b.
func (s enumSpelling) badValue(b []byte) error {
	switch {
	case s.bad == "":
		return fmt.Errorf("can not unmarshal %q", b)
	case strings.Contains(s.bad, "%"):
		return fmt.Errorf(s.bad, b)
	default:
		return errors.New(s.bad)
	}
}

func (s enumSpelling) marshal(v int) ([]byte, error) {
	if v < 0 || v >= len(s.names) {
		return nil, fmt.Errorf("can not marshal %s %d", s.kind, v)
	}
	return json.Marshal(s.names[v])
}

func (s enumSpelling) unmarshal(b []byte) (int, error) {
	var str string
	if inner, ok := plainString(b); ok {
		// The usual spelling needs no decoder: every stream and consumer
		// config has several enums, and start-up decodes them all.
		str = string(inner)
	} else if bytes.Equal(b, []byte("null")) || json.Unmarshal(b, &str) != nil {
		return 0, s.badValue(b)
	}
	if s.fold {
		str = strings.ToLower(str)
	}
	for i, n := range s.names {
		if n == str {
			return i, nil
		}
	}
	return 0, s.badValue(b)
}

// plainString returns the contents of a JSON string without escapes; ok
// is false for anything else. b is a JSON value the decoder validated.
func plainString(b []byte) (inner []byte, ok bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return nil, false
	}
	inner = b[1 : len(b)-1]
	return inner, bytes.IndexByte(inner, '\\') < 0
}

func (s enumSpelling) text(v int) string {
	if v < 0 || v >= len(s.names) {
		return fmt.Sprintf("unknown %s %d", s.kind, v)
	}
	return s.names[v]
}

// RetentionPolicy decides when a stream may drop a message.
type RetentionPolicy int

// Retention policies; limits is the zero value and the default.
const (
	LimitsPolicy RetentionPolicy = iota
	InterestPolicy
	WorkQueuePolicy
)

var retentionSpelling = enumSpelling{kind: "retention", names: []string{"limits", "interest", "workqueue"}}

// String returns the wire spelling.
func (p RetentionPolicy) String() string { return retentionSpelling.text(int(p)) }

// MarshalJSON writes "limits", "interest" or "workqueue".
func (p RetentionPolicy) MarshalJSON() ([]byte, error) { return retentionSpelling.marshal(int(p)) }

// UnmarshalJSON accepts only the three wire spellings.
func (p *RetentionPolicy) UnmarshalJSON(b []byte) error {
	v, err := retentionSpelling.unmarshal(b)
	*p = RetentionPolicy(v)
	return err
}

// DiscardPolicy decides what a full stream gives up: old messages or the new one.
type DiscardPolicy int

// Discard policies; old is the zero value and the default.
const (
	DiscardOld DiscardPolicy = iota
	DiscardNew
)

var discardSpelling = enumSpelling{kind: "discard policy", names: []string{"old", "new"}, fold: true}

// String returns the wire spelling.
func (p DiscardPolicy) String() string { return discardSpelling.text(int(p)) }

// MarshalJSON writes "old" or "new".
func (p DiscardPolicy) MarshalJSON() ([]byte, error) { return discardSpelling.marshal(int(p)) }

// UnmarshalJSON accepts "old" or "new" in any letter case.
func (p *DiscardPolicy) UnmarshalJSON(b []byte) error {
	v, err := discardSpelling.unmarshal(b)
	*p = DiscardPolicy(v)
	return err
}

// StorageType says whether a stream lives on disk or only in memory.
type StorageType int

// Storage types; file is the zero value, matching nats-server's default
// when "storage" is absent.
const (
	FileStorage StorageType = iota
	MemoryStorage
)

var storageSpelling = enumSpelling{kind: "storage type", names: []string{"file", "memory"}}

// String returns the wire spelling.
func (t StorageType) String() string { return storageSpelling.text(int(t)) }

// MarshalJSON writes "file" or "memory".
func (t StorageType) MarshalJSON() ([]byte, error) { return storageSpelling.marshal(int(t)) }

// UnmarshalJSON accepts only "file" or "memory".
func (t *StorageType) UnmarshalJSON(b []byte) error {
	v, err := storageSpelling.unmarshal(b)
	*t = StorageType(v)
	return err
}

// Compression is the on-disk compression a stream asks for.
type Compression int

// Compression algorithms; none is the zero value.
const (
	NoCompression Compression = iota
	S2Compression
)

var compressionSpelling = enumSpelling{kind: "compression", names: []string{"none", "s2"}, bad: "unknown compression algorithm"}

// String returns the wire spelling.
func (c Compression) String() string { return compressionSpelling.text(int(c)) }

// MarshalJSON writes "none" or "s2"; nats-server always sends the field.
func (c Compression) MarshalJSON() ([]byte, error) { return compressionSpelling.marshal(int(c)) }

// UnmarshalJSON accepts only "none" or "s2".
func (c *Compression) UnmarshalJSON(b []byte) error {
	v, err := compressionSpelling.unmarshal(b)
	*c = Compression(v)
	return err
}

// PersistMode says when a publish may be acknowledged relative to the
// write reaching disk. Contrail's default mode acknowledges only durable
// writes; async is the explicit, weaker opt-in.
type PersistMode int

// Persist modes; default is the zero value and is omitted on the wire.
const (
	DefaultPersistMode PersistMode = iota
	AsyncPersistMode
)

var persistSpelling = enumSpelling{kind: "persist mode", names: []string{"default", "async"}}

// String returns the wire spelling.
func (m PersistMode) String() string { return persistSpelling.text(int(m)) }

// MarshalJSON writes "default" or "async".
func (m PersistMode) MarshalJSON() ([]byte, error) { return persistSpelling.marshal(int(m)) }

// UnmarshalJSON accepts "default", "async", and "" for default.
func (m *PersistMode) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte(`""`)) {
		*m = DefaultPersistMode
		return nil
	}
	v, err := persistSpelling.unmarshal(b)
	*m = PersistMode(v)
	return err
}

// DeliverPolicy is where in the stream a new consumer starts.
type DeliverPolicy int

// Deliver policies; all is the zero value and the default.
const (
	DeliverAll DeliverPolicy = iota
	DeliverLast
	DeliverNew
	DeliverByStartSequence
	DeliverByStartTime
	DeliverLastPerSubject
)

var deliverSpelling = enumSpelling{kind: "deliver policy", names: []string{
	"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"}}

// String returns the wire spelling.
func (p DeliverPolicy) String() string { return deliverSpelling.text(int(p)) }

// MarshalJSON writes the policy's wire spelling.
func (p DeliverPolicy) MarshalJSON() ([]byte, error) { return deliverSpelling.marshal(int(p)) }

// UnmarshalJSON accepts the six spellings, and "undefined" for all, which
// older clients send.
func (p *DeliverPolicy) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte(`"undefined"`)) {
		*p = DeliverAll
		return nil
	}
	v, err := deliverSpelling.unmarshal(b)
	*p = DeliverPolicy(v)
	return err
}

// AckPolicy is what a consumer expects clients to acknowledge.
type AckPolicy int

// Ack policies; none is the zero value.
const (
	AckNone AckPolicy = iota
	AckAll
	AckExplicit
	AckFlowControl
)

var ackSpelling = enumSpelling{kind: "ack policy", names: []string{"none", "all", "explicit", "flow_control"}}

// String returns the wire spelling.
func (p AckPolicy) String() string { return ackSpelling.text(int(p)) }

// MarshalJSON writes the policy's wire spelling.
func (p AckPolicy) MarshalJSON() ([]byte, error) { return ackSpelling.marshal(int(p)) }

// UnmarshalJSON accepts only the four wire spellings.
func (p *AckPolicy) UnmarshalJSON(b []byte) error {
	v, err := ackSpelling.unmarshal(b)
	*p = AckPolicy(v)
	return err
}

// ReplayPolicy is whether a consumer replays at full speed or at the
// original publish pace.
type ReplayPolicy int

// Replay policies; instant is the zero value and the default.
const (
	ReplayInstant ReplayPolicy = iota
	ReplayOriginal
)

var replaySpelling = enumSpelling{kind: "replay policy", names: []string{"instant", "original"}}

// String returns the wire spelling.
func (p ReplayPolicy) String() string { return replaySpelling.text(int(p)) }

// MarshalJSON writes "instant" or "original".
func (p ReplayPolicy) MarshalJSON() ([]byte, error) { return replaySpelling.marshal(int(p)) }

// UnmarshalJSON accepts only "instant" or "original".
func (p *ReplayPolicy) UnmarshalJSON(b []byte) error {
	v, err := replaySpelling.unmarshal(b)
	*p = ReplayPolicy(v)
	return err
}

// PriorityPolicy is how a pull consumer chooses among waiting clients
// (ADR-42 priority groups).
type PriorityPolicy int

// Priority policies; none is the zero value and is omitted on the wire.
const (
	PriorityNone PriorityPolicy = iota
	PriorityOverflow
	PriorityPinnedClient
	PriorityPrioritized
)

var prioritySpelling = enumSpelling{kind: "priority policy", names: []string{
	"none", "overflow", "pinned_client", "prioritized"}, bad: "unknown priority policy: %s"}

// String returns the wire spelling.
func (p PriorityPolicy) String() string { return prioritySpelling.text(int(p)) }

// MarshalJSON writes the policy's wire spelling.
func (p PriorityPolicy) MarshalJSON() ([]byte, error) { return prioritySpelling.marshal(int(p)) }

// UnmarshalJSON accepts only the four wire spellings.
func (p *PriorityPolicy) UnmarshalJSON(b []byte) error {
	v, err := prioritySpelling.unmarshal(b)
	*p = PriorityPolicy(v)
	return err
}

// ConsumerAction is what a consumer create request allows: create only,
// update only, or either (the empty string, which older clients imply).
type ConsumerAction int

// Consumer actions; create-or-update is the zero value.
const (
	ActionCreateOrUpdate ConsumerAction = iota
	ActionUpdate
	ActionCreate
)

var actionSpelling = enumSpelling{kind: "consumer action", names: []string{"", "update", "create"}, bad: "unknown consumer action: %s"}

// String returns the wire spelling.
func (a ConsumerAction) String() string { return actionSpelling.text(int(a)) }

// MarshalJSON writes "", "update" or "create".
func (a ConsumerAction) MarshalJSON() ([]byte, error) { return actionSpelling.marshal(int(a)) }

// UnmarshalJSON accepts only "", "update" or "create".
func (a *ConsumerAction) UnmarshalJSON(b []byte) error {
	v, err := actionSpelling.unmarshal(b)
	*a = ConsumerAction(v)
	return err
}
