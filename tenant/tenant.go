// Package tenant is the tenant model both planes share: the operator that
// signs accounts, accounts with their limits, users and their permissions,
// and the creds files users connect with. The control plane issues with it;
// the data plane checks with it, so what one signs the other reads the same
// way. Everything here is nats-io/jwt v2 and nkeys underneath, so an operator
// and accounts made with nsc are understood too.
package tenant

import (
	"errors"
	"fmt"

	"github.com/nats-io/jwt/v2"
)

// Unlimited marks a limit without a bound, as in account JWTs.
const Unlimited = -1

// Limits is what an account may use. Every number is -1 for unlimited.
type Limits struct {
	MaxConnections int64           `json:"max_connections"`
	MaxPayload     int64           `json:"max_payload"`
	JetStream      JetStreamLimits `json:"jetstream"`
}

// JetStreamLimits bound an account's JetStream use. MaxMemory and
// MaxStorage of 0 both mean JetStream is off for the account.
type JetStreamLimits struct {
	MaxMemory     int64 `json:"max_memory"`
	MaxStorage    int64 `json:"max_storage"`
	MaxStreams    int64 `json:"max_streams"`
	MaxConsumers  int64 `json:"max_consumers"`
	MaxAckPending int64 `json:"max_ack_pending"`
	// Tiers, when set, are per replica count limits (the account JWT's
	// tiered limits): R1 governs unreplicated streams, R3 streams of
	// three replicas. They replace the untiered limits above, which are
	// then not written to the JWT. A tier left out allows no stream of
	// its replica count.
	Tiers *JetStreamTiers `json:"tiers,omitempty"`
}

// JetStreamTiers are an account's tiered JetStream limits.
type JetStreamTiers struct {
	R1 *JetStreamTier `json:"R1,omitempty"`
	R3 *JetStreamTier `json:"R3,omitempty"`
}

// JetStreamTier bounds the streams of one replica count. Storage limits
// count each stream once, whatever its replicas (a tier is sized for its
// replication, as NATS counts tiered limits).
type JetStreamTier struct {
	MaxMemory      int64 `json:"max_memory"`
	MaxStorage     int64 `json:"max_storage"`
	MaxStreams     int64 `json:"max_streams"`
	MaxConsumers   int64 `json:"max_consumers"`
	MaxAckPending  int64 `json:"max_ack_pending"`
	MaxStreamBytes int64 `json:"max_stream_bytes"`
}

// each lists the tiers set, by name.
func (t *JetStreamTiers) each() map[string]*JetStreamTier {
	out := map[string]*JetStreamTier{}
	if t == nil {
		return out
	}
	if t.R1 != nil {
		out["R1"] = t.R1
	}
	if t.R3 != nil {
		out["R3"] = t.R3
	}
	return out
}

// jwt is the tier as account JWTs carry it: 0 for "no bound" in the
// ack pending and per-stream limits.
func (t *JetStreamTier) jwt() jwt.JetStreamLimits {
	perStream := max(t.MaxStreamBytes, 0)
	return jwt.JetStreamLimits{
		MemoryStorage: t.MaxMemory, DiskStorage: t.MaxStorage,
		Streams: t.MaxStreams, Consumer: t.MaxConsumers, MaxAckPending: max(t.MaxAckPending, 0),
		MemoryMaxStreamBytes: perStream, DiskMaxStreamBytes: perStream,
	}
}

// DefaultLimits are generous limits for a new account: JetStream on, a GiB
// of file storage, 256 MiB of memory.
func DefaultLimits() Limits {
	return Limits{
		MaxConnections: Unlimited,
		MaxPayload:     Unlimited,
		JetStream: JetStreamLimits{
			MaxMemory:     256 << 20,
			MaxStorage:    1 << 30,
			MaxStreams:    Unlimited,
			MaxConsumers:  Unlimited,
			MaxAckPending: Unlimited,
		},
	}
}

// ErrInvalidLimits is wrapped by Validate's errors.
var ErrInvalidLimits = errors.New("invalid limits")

// FieldError names the field a Validate error is about, as the REST API
// reports it ("limits.jetstream.max_streams").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets callers test for ErrInvalidLimits.
func (e *FieldError) Unwrap() error { return ErrInvalidLimits }

// Validate checks every number is -1 or positive (0 is allowed for the
// JetStream storage limits, where it turns JetStream off, and for nothing
// else: a zero connection limit would lock the account out).
func (l Limits) Validate() error {
	check := func(field string, v int64, zeroOK bool) error {
		if v == Unlimited || v > 0 || (zeroOK && v == 0) {
			return nil
		}
		want := "-1 (unlimited) or a positive number"
		if zeroOK {
			want = "-1 (unlimited), 0 (off) or a positive number"
		}
		return &FieldError{Field: field, Reason: fmt.Sprintf("must be %s, got %d", want, v)}
	}
	js := l.JetStream
	for _, c := range []struct {
		field  string
		v      int64
		zeroOK bool
	}{
		{"limits.max_connections", l.MaxConnections, false},
		{"limits.max_payload", l.MaxPayload, false},
		{"limits.jetstream.max_memory", js.MaxMemory, true},
		{"limits.jetstream.max_storage", js.MaxStorage, true},
		{"limits.jetstream.max_streams", js.MaxStreams, false},
		{"limits.jetstream.max_consumers", js.MaxConsumers, false},
		{"limits.jetstream.max_ack_pending", js.MaxAckPending, false},
	} {
		if err := check(c.field, c.v, c.zeroOK); err != nil {
			return err
		}
	}
	if js.Tiers != nil && js.Tiers.R1 == nil && js.Tiers.R3 == nil {
		return &FieldError{Field: "limits.jetstream.tiers", Reason: "must set R1, R3 or both"}
	}
	for _, name := range []string{"R1", "R3"} {
		t := js.Tiers.each()[name]
		if t == nil {
			continue
		}
		f := "limits.jetstream.tiers." + name + "."
		for _, c := range []struct {
			field  string
			v      int64
			zeroOK bool
		}{
			{"max_memory", t.MaxMemory, true},
			{"max_storage", t.MaxStorage, true},
			{"max_streams", t.MaxStreams, false},
			{"max_consumers", t.MaxConsumers, false},
			{"max_ack_pending", t.MaxAckPending, false},
			{"max_stream_bytes", t.MaxStreamBytes, false},
		} {
			if err := check(f+c.field, c.v, c.zeroOK); err != nil {
				return err
			}
		}
	}
	return nil
}

// Apply writes l into account claims. JetStream limits go into the claims'
// untiered JetStream limits, which nats-server and Contrail treat as the R1
// tier; both storage limits 0 leave JetStream off.
func (l Limits) Apply(ac *jwt.AccountClaims) {
	ac.Limits.Conn = l.MaxConnections
	ac.Limits.Payload = l.MaxPayload
	ac.Limits.Subs = Unlimited
	ac.Limits.Data = Unlimited
	ac.Limits.Imports = Unlimited
	ac.Limits.Exports = Unlimited
	ac.Limits.WildcardExports = true
	ac.Limits.LeafNodeConn = Unlimited
	ac.Limits.JetStreamTieredLimits = nil
	js := l.JetStream
	if js.Tiers != nil {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{}
		ac.Limits.JetStreamTieredLimits = jwt.JetStreamTieredLimits{}
		for name, t := range js.Tiers.each() {
			ac.Limits.JetStreamTieredLimits[name] = t.jwt()
		}
		return
	}
	if js.MaxMemory == 0 && js.MaxStorage == 0 {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{}
		return
	}
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		MemoryStorage: js.MaxMemory,
		DiskStorage:   js.MaxStorage,
		Streams:       js.MaxStreams,
		Consumer:      js.MaxConsumers,
		MaxAckPending: js.MaxAckPending,
	}
}

// LimitsOf reads the limits back out of account claims: the inverse of
// Apply for claims Apply wrote.
func LimitsOf(ac *jwt.AccountClaims) Limits {
	js := ac.Limits.JetStreamLimits
	if r1, ok := ac.Limits.JetStreamTieredLimits["R1"]; ok && len(ac.Limits.JetStreamTieredLimits) > 0 {
		js = r1
	}
	maxAck := js.MaxAckPending
	if maxAck == 0 {
		maxAck = Unlimited
	}
	if js.MemoryStorage == 0 && js.DiskStorage == 0 {
		js.Streams, js.Consumer = Unlimited, Unlimited
	}
	l := Limits{
		MaxConnections: ac.Limits.Conn,
		MaxPayload:     ac.Limits.Payload,
		JetStream: JetStreamLimits{
			MaxMemory:     js.MemoryStorage,
			MaxStorage:    js.DiskStorage,
			MaxStreams:    js.Streams,
			MaxConsumers:  js.Consumer,
			MaxAckPending: maxAck,
		},
	}
	if _, r3 := ac.Limits.JetStreamTieredLimits["R3"]; r3 {
		l.JetStream = JetStreamLimits{Tiers: &JetStreamTiers{}}
		unbounded := func(v int64) int64 {
			if v == 0 {
				return Unlimited
			}
			return v
		}
		for name, t := range ac.Limits.JetStreamTieredLimits {
			tier := &JetStreamTier{MaxMemory: t.MemoryStorage, MaxStorage: t.DiskStorage, MaxStreams: t.Streams,
				MaxConsumers: t.Consumer, MaxAckPending: unbounded(t.MaxAckPending), MaxStreamBytes: unbounded(t.DiskMaxStreamBytes)}
			switch name {
			case "R1":
				l.JetStream.Tiers.R1 = tier
			case "R3":
				l.JetStream.Tiers.R3 = tier
			}
		}
	}
	return l
}
