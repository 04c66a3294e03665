package api

import "time"

// StreamInfo is what STREAM.INFO, CREATE, UPDATE and LIST report about a
// stream. Created and TimeStamp are always sent (nats-server has no
// omitempty on them), so they must be real UTC times.
type StreamInfo struct {
	Config     StreamConfig        `json:"config"`
	Created    time.Time           `json:"created"`
	State      StreamState         `json:"state"`
	Domain     string              `json:"domain,omitempty"`
	Cluster    *ClusterInfo        `json:"cluster,omitempty"`
	Mirror     *StreamSourceInfo   `json:"mirror,omitempty"`
	Sources    []*StreamSourceInfo `json:"sources,omitempty"`
	Alternates []StreamAlternate   `json:"alternates,omitempty"`
	// TimeStamp is when the info was gathered.
	TimeStamp time.Time `json:"ts"`
}

// StreamState is a stream's contents summary. first_ts and last_ts are
// always sent, as the zero time "0001-01-01T00:00:00Z" for an empty
// stream, exactly as nats-server does. jsm.go's schema forbids unknown
// members here.
type StreamState struct {
	Msgs      uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	FirstTime time.Time `json:"first_ts"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_ts"`
	// NumSubjects counts distinct subjects; Subjects is filled only when a
	// STREAM.INFO request asked with subjects_filter.
	NumSubjects int               `json:"num_subjects,omitempty"`
	Subjects    map[string]uint64 `json:"subjects,omitempty"`
	// NumDeleted counts interior gaps; Deleted lists them only when a
	// STREAM.INFO request asked with deleted_details.
	NumDeleted int             `json:"num_deleted,omitempty"`
	Deleted    []uint64        `json:"deleted,omitempty"`
	Lost       *LostStreamData `json:"lost,omitempty"`
	Consumers  int             `json:"consumer_count"`
}

// LostStreamData reports messages found damaged and dropped, so users see
// loss instead of silently missing sequences.
type LostStreamData struct {
	Msgs  []uint64 `json:"msgs"`
	Bytes uint64   `json:"bytes"`
}

// ClusterInfo describes the replica group behind a stream or consumer.
type ClusterInfo struct {
	Name        string              `json:"name,omitempty"`
	RaftGroup   string              `json:"raft_group,omitempty"`
	Leader      string              `json:"leader,omitempty"`
	LeaderSince *time.Time          `json:"leader_since,omitempty"`
	SystemAcc   bool                `json:"system_account,omitempty"`
	TrafficAcc  string              `json:"traffic_account,omitempty"`
	Replicas    []*PeerInfo         `json:"replicas,omitempty"`
	Desired     *DesiredClusterInfo `json:"desired,omitempty"`
}

// PeerInfo is one non-leader replica as the leader sees it.
type PeerInfo struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline,omitempty"`
	// Active is how long ago the peer was last heard from.
	Active  time.Duration `json:"active"`
	Lag     uint64        `json:"lag,omitempty"`
	Peer    string        `json:"peer"`
	Pending bool          `json:"pending,omitempty"`
}

// DesiredClusterInfo is the replica set a group is moving toward during a
// scale or move.
type DesiredClusterInfo struct {
	Created  time.Time                 `json:"created"`
	Name     string                    `json:"name,omitempty"`
	Replicas []*DesiredPeerInfo        `json:"replicas,omitempty"`
	Origin   *DesiredClusterInfoOrigin `json:"origin,omitempty"`
	Status   *DesiredClusterInfoStatus `json:"status,omitempty"`
}

// DesiredPeerInfo is a member of the desired replica set.
type DesiredPeerInfo struct {
	Name    string `json:"name"`
	Offline bool   `json:"offline,omitempty"`
	Peer    string `json:"peer"`
}

// DesiredClusterInfoOrigin is what a cancelled reconfiguration rolls back to.
type DesiredClusterInfoOrigin struct {
	Replicas  int              `json:"replicas"`
	Placement *Placement       `json:"placement,omitempty"`
	Retention *RetentionPolicy `json:"retention,omitempty"`
}

// DesiredClusterInfoStatus says what a reconfiguration is doing or waiting
// on; Type is one of meta, membership, snapshot, catchup, quorum, blocked,
// unavailable.
type DesiredClusterInfoStatus struct {
	Description string `json:"description"`
	Type        string `json:"type"`
	Err         string `json:"err,omitempty"`
}

// StreamSourceInfo is the progress of a mirror or of one source.
type StreamSourceInfo struct {
	Name     string          `json:"name"`
	External *ExternalStream `json:"external,omitempty"`
	// Lag is how many messages the origin is ahead.
	Lag uint64 `json:"lag"`
	Seq uint64 `json:"seq,omitempty"`
	// Active is the time since the last activity, -1 if there was none.
	Active            time.Duration      `json:"active"`
	Error             *Error             `json:"error,omitempty"`
	FilterSubject     string             `json:"filter_subject,omitempty"`
	SubjectTransforms []SubjectTransform `json:"subject_transforms,omitempty"`
}

// StreamAlternate is another place (a mirror) clients may read a stream from.
type StreamAlternate struct {
	Name    string `json:"name"`
	Domain  string `json:"domain,omitempty"`
	Cluster string `json:"cluster"`
}

// StoredMsg is one message as STREAM.MSG.GET returns it. Header and Data
// are raw bytes and so travel base64-encoded, as clients expect.
type StoredMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

// PubAck is the reply to a publish a stream captured. It carries no "type"
// member: clients decode it as a bare object. On failure the reply is
// {"error":{…},"stream":<name>,"seq":0}, as nats-server sends it (see
// PubAckResponse).
type PubAck struct {
	Stream   string `json:"stream"`
	Sequence uint64 `json:"seq"`
	Domain   string `json:"domain,omitempty"`
	// Duplicate marks a publish deduplicated by Nats-Msg-Id: nothing was
	// stored and Sequence is the original message's.
	Duplicate bool `json:"duplicate,omitempty"`
	// Value is a counter stream's total after this increment.
	Value string `json:"val,omitempty"`
	// BatchID and BatchSize report an atomic batch commit.
	BatchID   string `json:"batch,omitempty"`
	BatchSize uint64 `json:"count,omitempty"`
}

// PubAckResponse is the full publish reply: a PubAck or an error.
type PubAckResponse struct {
	Error *Error `json:"error,omitempty"`
	*PubAck
}
