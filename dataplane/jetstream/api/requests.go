package api

import (
	"encoding/json"
	"time"
)

// Page sizes nats-server uses; clients page with offset until they have
// total items, so a reply's limit must be what we really returned per page.
const (
	// NamesLimit is the page size of STREAM.NAMES and CONSUMER.NAMES.
	NamesLimit = 1024
	// ListLimit is the page size of STREAM.LIST and CONSUMER.LIST.
	ListLimit = 256
	// MaxSubjectDetails caps subjects_filter results in one STREAM.INFO.
	MaxSubjectDetails = 100_000
	// MaxWaitingDefault is a pull consumer's default max_waiting.
	MaxWaitingDefault = 512
)

// PagedRequest asks for one page of a listing, starting at Offset.
type PagedRequest struct {
	Offset int `json:"offset"`
}

// StreamConfigRequest is the body of STREAM.CREATE and STREAM.UPDATE: a
// config plus the pedantic flag, which asks the server to refuse instead
// of silently adjusting values.
type StreamConfigRequest struct {
	StreamConfig
	Pedantic bool `json:"pedantic,omitempty"`
}

// StreamNamesRequest pages STREAM.NAMES, optionally only streams whose
// subjects overlap Subject (how clients find the stream for a subject).
type StreamNamesRequest struct {
	PagedRequest
	Subject string `json:"subject,omitempty"`
}

// StreamListRequest pages STREAM.LIST, with the same subject filter.
type StreamListRequest struct {
	PagedRequest
	Subject string `json:"subject,omitempty"`
}

// StreamInfoRequest asks STREAM.INFO for the deleted sequences and/or the
// per-subject counts; Offset pages the subject counts.
type StreamInfoRequest struct {
	PagedRequest
	DeletedDetails bool   `json:"deleted_details,omitempty"`
	SubjectsFilter string `json:"subjects_filter,omitempty"`
}

// StreamPurgeRequest narrows STREAM.PURGE (ADR-10): only Subject, only
// below Sequence, or all but the last Keep. Sequence and Keep exclude
// each other.
type StreamPurgeRequest struct {
	Sequence uint64 `json:"seq,omitempty"`
	Subject  string `json:"filter,omitempty"`
	Keep     uint64 `json:"keep,omitempty"`
}

// MsgGetRequest is the body of STREAM.MSG.GET and DIRECT.GET: one of Seq,
// LastFor or NextFor (with Seq as the start), and for direct gets the
// batch and multi-last forms (ADR-31).
type MsgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`

	Batch     int        `json:"batch,omitempty"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`

	MultiLastFor []string   `json:"multi_last,omitempty"`
	UpToSeq      uint64     `json:"up_to_seq,omitempty"`
	UpToTime     *time.Time `json:"up_to_time,omitempty"`
	NoHeaders    bool       `json:"no_hdr,omitempty"`
}

// MsgDeleteRequest is the body of STREAM.MSG.DELETE; NoErase skips
// overwriting the message's bytes on disk.
type MsgDeleteRequest struct {
	Seq     uint64 `json:"seq"`
	NoErase bool   `json:"no_erase,omitempty"`
}

// ConsumerCreateRequest is the body of CONSUMER.CREATE and
// CONSUMER.DURABLE.CREATE. StreamName must equal the stream in the subject.
type ConsumerCreateRequest struct {
	Stream   string         `json:"stream_name"`
	Config   ConsumerConfig `json:"config"`
	Action   ConsumerAction `json:"action"`
	Pedantic bool           `json:"pedantic,omitempty"`
}

// ConsumersRequest pages CONSUMER.NAMES and CONSUMER.LIST.
type ConsumersRequest struct {
	PagedRequest
}

// PullRequest is the body a client publishes to
// CONSUMER.MSG.NEXT.<stream>.<consumer> (ADR-13). A bare number or an
// empty body also mean a pull, with Batch that number or 1.
type PullRequest struct {
	// Expires ends the request after this long with a 408.
	Expires  time.Duration `json:"expires,omitempty"`
	Batch    int           `json:"batch,omitempty"`
	MaxBytes int           `json:"max_bytes,omitempty"`
	// NoWait asks for a 404 right away instead of waiting for messages.
	NoWait bool `json:"no_wait,omitempty"`
	// Heartbeat asks for 100 Idle Heartbeat status messages while waiting.
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
	PriorityGroup
}

// PriorityGroup carries a pull request's priority-group terms (ADR-42).
type PriorityGroup struct {
	Group         string `json:"group,omitempty"`
	MinPending    int64  `json:"min_pending,omitempty"`
	MinAckPending int64  `json:"min_ack_pending,omitempty"`
	ID            string `json:"id,omitempty"`
	Priority      int    `json:"priority,omitempty"`
}

// ConsumerPauseRequest pauses a consumer until PauseUntil; a zero or past
// time resumes it.
type ConsumerPauseRequest struct {
	PauseUntil time.Time `json:"pause_until,omitempty"`
}

// ConsumerUnpinRequest releases the pinned client of one priority group.
type ConsumerUnpinRequest struct {
	Group string `json:"group"`
}

// ConsumerResetRequest moves a consumer to a new starting sequence.
type ConsumerResetRequest struct {
	Seq uint64 `json:"seq,omitempty"`
}

// StreamPeerRequest names a peer for STREAM.PEER.REMOVE and the evacuate
// requests.
type StreamPeerRequest struct {
	Peer string `json:"peer"`
}

// LeaderStepdownRequest optionally steers where a new leader is elected.
type LeaderStepdownRequest struct {
	Placement *Placement `json:"placement,omitempty"`
}

// StreamSnapshotRequest is the body of STREAM.SNAPSHOT: where to send the
// backup's chunks, and how.
type StreamSnapshotRequest struct {
	// DeliverSubject receives the chunks, each with a reply subject the
	// receiver answers to acknowledge it.
	DeliverSubject string `json:"deliver_subject"`
	// NoConsumers leaves the stream's consumers out.
	NoConsumers bool `json:"no_consumers,omitempty"`
	// ChunkSize is the bytes per chunk, clamped to 1 KiB..1 MiB
	// (default 128 KiB).
	ChunkSize int `json:"chunk_size,omitempty"`
	// WindowSize is the bytes sent but not yet acknowledged, clamped to
	// 1 KiB..32 MiB (default 8 MiB), and at least one chunk.
	WindowSize int `json:"window_size,omitempty"`
	// CheckMsgs asks for every message's checksum to be verified first.
	// Contrail verifies each record as it reads it for the backup anyway.
	CheckMsgs bool `json:"jsck,omitempty"`
}

// StreamRestoreRequest is the body of STREAM.RESTORE: the config to
// restore the stream with, and the state the backup recorded. The state
// is the client's copy, shown to users; the backup's own record of it is
// what the restore checks, so any state is accepted here.
type StreamRestoreRequest struct {
	Config StreamConfig    `json:"config"`
	State  json.RawMessage `json:"state,omitempty"`
}
