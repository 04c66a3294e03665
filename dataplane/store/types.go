package store

// Message is one stored JetStream message. The state machine assigns Seq and
// Time before the message reaches the store; the store never invents either,
// so every replica that applies the same entry stores the same bytes.
type Message struct {
	Seq     uint64
	Subject string
	Header  []byte
	Data    []byte
	// Time is the publish time in Unix nanoseconds.
	Time int64
	// TTL is the per-message time to live in nanoseconds (Nats-TTL). Zero
	// means none; a negative value means "never", which exempts the message
	// from the stream's MaxAge. Only a positive TTL adds an expiry entry.
	TTL int64
	// Cold is set on a message whose header and data live in a tier
	// segment (see tier.go): Header and Data are empty, HdrLen and DataLen
	// are their sizes, and a reader that needs them fetches them.
	Cold            bool
	HdrLen, DataLen int
}

// Expires returns when a message with a positive TTL expires (Unix nanos),
// or zero when it has none.
func (m *Message) Expires() int64 {
	if m.TTL <= 0 {
		return 0
	}
	return m.Time + m.TTL
}

// StreamMeta is what identifies a stream across restarts. Keys use the
// numeric ID, never the name, so renames and long names cost nothing and a
// deleted stream's ID can be reused once its DeleteStream has committed.
type StreamMeta struct {
	ID     uint64
	Name   string
	Config []byte // the stream config as JSON; opaque to the store
}

// StreamState is the summary the state machine writes alongside every change
// so that a restart rebuilds a stream's counters from one record instead of
// scanning its messages.
type StreamState struct {
	FirstSeq  uint64
	LastSeq   uint64
	Msgs      uint64
	Bytes     uint64
	FirstTime int64 // Unix nanos of the first message
	LastTime  int64 // Unix nanos of the last message
	// Deleted counts interior deletes: sequences in [FirstSeq, LastSeq] that
	// hold no message.
	Deleted uint64
}

// StreamInfo is one stream as listed at start-up: its metadata and its last
// written state summary (zero if none was written yet).
type StreamInfo struct {
	StreamMeta
	State StreamState
}

// SubjectState summarises one subject of a stream, derived from the subject
// index: how many messages it holds and its first and last sequence.
type SubjectState struct {
	Subject string
	Msgs    uint64
	First   uint64
	Last    uint64
}

// ConsumerRecord is a consumer's durable form. Config changes rarely and
// State on every ack, so they are separate records written independently.
type ConsumerRecord struct {
	Stream uint64
	Name   string
	Config []byte // consumer config JSON; nil if only state was written
	State  []byte // encoded delivered/ack state; nil if never written
}

// DedupEntry records a Nats-Msg-Id seen by a stream, for the duplicate
// window: the sequence it was stored at and when.
type DedupEntry struct {
	ID   string
	Seq  uint64
	Time int64 // Unix nanos
}
