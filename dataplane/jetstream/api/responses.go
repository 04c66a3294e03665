package api

import "time"

// The `type` string of every JSON API reply. Clients (jsm.go above all)
// pick the schema and Go type to decode with by this string, so each reply
// must carry its own, errors included.
const (
	TypeAccountInfoResponse            = "io.nats.jetstream.api.v1.account_info_response"
	TypeAccountPurgeResponse           = "io.nats.jetstream.api.v1.account_purge_response"
	TypeConsumerCreateResponse         = "io.nats.jetstream.api.v1.consumer_create_response"
	TypeConsumerDeleteResponse         = "io.nats.jetstream.api.v1.consumer_delete_response"
	TypeConsumerEvacuatePeerResponse   = "io.nats.jetstream.api.v1.consumer_evacuate_peer_response"
	TypeConsumerInfoResponse           = "io.nats.jetstream.api.v1.consumer_info_response"
	TypeConsumerLeaderStepdownResponse = "io.nats.jetstream.api.v1.consumer_leader_stepdown_response"
	TypeConsumerListResponse           = "io.nats.jetstream.api.v1.consumer_list_response"
	TypeConsumerNamesResponse          = "io.nats.jetstream.api.v1.consumer_names_response"
	TypeConsumerPauseResponse          = "io.nats.jetstream.api.v1.consumer_pause_response"
	TypeConsumerRemovePeerResponse     = "io.nats.jetstream.api.v1.consumer_remove_peer_response"
	TypeConsumerResetResponse          = "io.nats.jetstream.api.v1.consumer_reset_response"
	TypeConsumerUnpinResponse          = "io.nats.jetstream.api.v1.consumer_unpin_response"
	TypeMetaLeaderStepdownResponse     = "io.nats.jetstream.api.v1.meta_leader_stepdown_response"
	TypeMetaRescueResponse             = "io.nats.jetstream.api.v1.meta_rescue_response"
	TypeMetaServerEvacuateResponse     = "io.nats.jetstream.api.v1.meta_server_evacuate_response"
	TypeMetaServerRemoveResponse       = "io.nats.jetstream.api.v1.meta_server_remove_response"
	TypeStreamCancelMoveResponse       = "io.nats.jetstream.api.v1.stream_cancel_move_response"
	TypeStreamCreateResponse           = "io.nats.jetstream.api.v1.stream_create_response"
	TypeStreamDeleteResponse           = "io.nats.jetstream.api.v1.stream_delete_response"
	TypeStreamEvacuatePeerResponse     = "io.nats.jetstream.api.v1.stream_evacuate_peer_response"
	TypeStreamInfoResponse             = "io.nats.jetstream.api.v1.stream_info_response"
	TypeStreamLeaderStepdownResponse   = "io.nats.jetstream.api.v1.stream_leader_stepdown_response"
	TypeStreamListResponse             = "io.nats.jetstream.api.v1.stream_list_response"
	TypeStreamMsgDeleteResponse        = "io.nats.jetstream.api.v1.stream_msg_delete_response"
	TypeStreamMsgGetResponse           = "io.nats.jetstream.api.v1.stream_msg_get_response"
	TypeStreamNamesResponse            = "io.nats.jetstream.api.v1.stream_names_response"
	TypeStreamPurgeResponse            = "io.nats.jetstream.api.v1.stream_purge_response"
	TypeStreamRemovePeerResponse       = "io.nats.jetstream.api.v1.stream_remove_peer_response"
	TypeStreamRestoreResponse          = "io.nats.jetstream.api.v1.stream_restore_response"
	TypeStreamSnapshotResponse         = "io.nats.jetstream.api.v1.stream_snapshot_response"
	TypeStreamUpdateResponse           = "io.nats.jetstream.api.v1.stream_update_response"
	TypeSystemResponse                 = "io.nats.jetstream.api.v1.system_response"
	TypeSystemOverloaded               = "io.nats.jetstream.api.v1.system_overloaded"
)

// Response is the envelope every JSON API reply starts with. Error is set
// only on failure; the typed replies below embed it so that an error reply
// has exactly the members nats-server's has (some keep non-omitempty
// members such as "purged":0 or "streams":null).
type Response struct {
	Type  string `json:"type"`
	Error *Error `json:"error,omitempty"`
}

// ToError returns the reply's error as a Go error, or nil: a typed nil
// *Error would otherwise compare non-nil.
func (r *Response) ToError() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Paged says where a page sits in a listing: Total items in all, this page
// starting at Offset, at most Limit per page.
type Paged struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// AccountInfoResponse answers $JS.API.INFO.
type AccountInfoResponse struct {
	Response
	*AccountInfo
}

// StreamCreateResponse answers STREAM.CREATE. DidCreate is false when an
// identical stream already existed, which is a success, not an error.
type StreamCreateResponse struct {
	Response
	*StreamInfo
	DidCreate bool `json:"did_create,omitempty"`
}

// StreamUpdateResponse answers STREAM.UPDATE and, with its own type
// string, STREAM.PEER.CANCEL_MOVE.
type StreamUpdateResponse struct {
	Response
	*StreamInfo
}

// StreamInfoResponse answers STREAM.INFO. The paging members are always
// sent; they page the subjects map when subjects_filter was given.
type StreamInfoResponse struct {
	Response
	Paged
	*StreamInfo
}

// StreamSnapshotResponse answers STREAM.SNAPSHOT before the chunks
// follow: the stream's config and state as the backup holds them.
type StreamSnapshotResponse struct {
	Response
	Config *StreamConfig `json:"config,omitempty"`
	State  *StreamState  `json:"state,omitempty"`
}

// StreamRestoreResponse answers STREAM.RESTORE: where to send the
// backup's chunks.
type StreamRestoreResponse struct {
	Response
	DeliverSubject string `json:"deliver_subject"`
}

// StreamNamesResponse answers STREAM.NAMES. "streams" is always sent,
// null when there are none, as jsm.go's schema requires the member.
type StreamNamesResponse struct {
	Response
	Paged
	Streams []string `json:"streams"`
}

// StreamListResponse answers STREAM.LIST. Missing names streams whose info
// could not be gathered in time; Offline maps offline streams to reasons.
type StreamListResponse struct {
	Response
	Paged
	Streams []*StreamInfo     `json:"streams"`
	Missing []string          `json:"missing,omitempty"`
	Offline map[string]string `json:"offline,omitempty"`
}

// StreamPurgeResponse answers STREAM.PURGE; "purged" is always sent.
type StreamPurgeResponse struct {
	Response
	Success bool   `json:"success,omitempty"`
	Purged  uint64 `json:"purged"`
}

// SuccessResponse answers the requests whose only result is success:
// STREAM.DELETE, STREAM.MSG.DELETE, CONSUMER.DELETE, the leader stepdowns,
// and the peer remove and evacuate requests, each with its own type.
type SuccessResponse struct {
	Response
	Success bool `json:"success,omitempty"`
}

// MsgGetResponse answers STREAM.MSG.GET.
type MsgGetResponse struct {
	Response
	Message *StoredMsg `json:"message,omitempty"`
}

// ConsumerInfoResponse answers CONSUMER.INFO and, with the create type
// string, CONSUMER.CREATE and CONSUMER.DURABLE.CREATE.
type ConsumerInfoResponse struct {
	Response
	*ConsumerInfo
}

// ConsumerNamesResponse answers CONSUMER.NAMES; "consumers" is always sent.
type ConsumerNamesResponse struct {
	Response
	Paged
	Consumers []string `json:"consumers"`
}

// ConsumerListResponse answers CONSUMER.LIST.
type ConsumerListResponse struct {
	Response
	Paged
	Consumers []*ConsumerInfo   `json:"consumers"`
	Missing   []string          `json:"missing,omitempty"`
	Offline   map[string]string `json:"offline,omitempty"`
}

// ConsumerPauseResponse answers CONSUMER.PAUSE; pause_until is always
// sent, zero when the consumer was resumed.
type ConsumerPauseResponse struct {
	Response
	Paused         bool          `json:"paused"`
	PauseUntil     time.Time     `json:"pause_until"`
	PauseRemaining time.Duration `json:"pause_remaining,omitempty"`
}

// ConsumerResetResponse answers CONSUMER.RESET: the consumer's info and
// the sequence it now starts from.
type ConsumerResetResponse struct {
	Response
	*ConsumerInfo
	ResetSeq uint64 `json:"reset_seq"`
}

// AccountPurgeResponse answers ACCOUNT.PURGE, which runs asynchronously.
type AccountPurgeResponse struct {
	Response
	Initiated bool `json:"initiated,omitempty"`
}
