package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Headers JetStream reads from publishes and writes on deliveries. Clients
// look them up by exact name.
const (
	HeaderMsgID                   = "Nats-Msg-Id"
	HeaderExpectedStream          = "Nats-Expected-Stream"
	HeaderExpectedLastSeq         = "Nats-Expected-Last-Sequence"
	HeaderExpectedLastSubjSeq     = "Nats-Expected-Last-Subject-Sequence"
	HeaderExpectedLastSubjSeqSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
	HeaderExpectedLastMsgID       = "Nats-Expected-Last-Msg-Id"
	HeaderRollup                  = "Nats-Rollup"
	HeaderTTL                     = "Nats-TTL"
	HeaderMarkerReason            = "Nats-Marker-Reason"
	HeaderIncr                    = "Nats-Incr"
	HeaderCounterSources          = "Nats-Counter-Sources"
	HeaderBatchID                 = "Nats-Batch-Id"
	HeaderBatchSeq                = "Nats-Batch-Sequence"
	HeaderBatchCommit             = "Nats-Batch-Commit"
	HeaderStreamSource            = "Nats-Stream-Source"
	HeaderStream                  = "Nats-Stream"
	HeaderSequence                = "Nats-Sequence"
	HeaderTimeStamp               = "Nats-Time-Stamp"
	HeaderSubject                 = "Nats-Subject"
	HeaderLastSequence            = "Nats-Last-Sequence"
	HeaderNumPending              = "Nats-Num-Pending"
	HeaderUpToSequence            = "Nats-UpTo-Sequence"
	HeaderMsgSize                 = "Nats-Msg-Size"
	HeaderLastConsumer            = "Nats-Last-Consumer"
	HeaderLastStream              = "Nats-Last-Stream"
	HeaderConsumerStalled         = "Nats-Consumer-Stalled"
	HeaderPendingMessages         = "Nats-Pending-Messages"
	HeaderPendingBytes            = "Nats-Pending-Bytes"
	HeaderPinID                   = "Nats-Pin-Id"
	HeaderRequiredAPILevel        = "Nats-Required-Api-Level"
	HeaderStreamIdentity          = "Nats-Stream-Identity"
	RollupSubject                 = "sub" // Nats-Rollup value: replace the subject's messages
	RollupAll                     = "all" // Nats-Rollup value: replace the whole stream
)

// Status is a JetStream status message: a header-only message whose first
// line is "NATS/1.0 <Code> <Description>". Pull requests, push consumers
// and direct gets answer with these instead of JSON errors, and clients
// match on the code and, for 409s, on the description.
type Status struct {
	Code        int
	Description string
}

// Line returns the status line, without CRLF.
func (s Status) Line() string {
	if s.Description == "" {
		return "NATS/1.0 " + strconv.Itoa(s.Code)
	}
	return "NATS/1.0 " + strconv.Itoa(s.Code) + " " + s.Description
}

// Status messages as nats-server words them.
var (
	StatusNoMessages          = Status{404, "No Messages"}
	StatusRequestTimeout      = Status{408, "Request Timeout"}
	StatusInterestExpired     = Status{408, "Interest Expired"}
	StatusRequestsPending     = Status{408, "Requests Pending"}
	StatusMaxBytesExceeded    = Status{409, "Message Size Exceeds MaxBytes"}
	StatusBatchCompleted      = Status{409, "Batch Completed"}
	StatusConsumerDeleted     = Status{409, "Consumer Deleted"}
	StatusLeadershipChange    = Status{409, "Leadership Change"}
	StatusExceededMaxWaiting  = Status{409, "Exceeded MaxWaiting"}
	StatusConsumerIsPush      = Status{409, "Consumer is push based"}
	StatusPinIDMismatch       = Status{423, "Nats-Pin-Id mismatch"}
	StatusWrongPinID          = Status{423, "Nats-Wrong-Pin-Id"}
	StatusIdleHeartbeat       = Status{100, "Idle Heartbeat"}
	StatusFlowControl         = Status{100, "FlowControl Request"}
	StatusRequiredAPILevel    = Status{412, "Required Api Level"}
	StatusTooManyRequests     = Status{429, "Too Many Requests"}
	StatusEndOfBatch          = Status{204, "EOB"}
	StatusDirectEmptyRequest  = Status{408, "Empty Request"}
	StatusDirectBadRequest    = Status{408, "Bad Request"}
	StatusDirectMalformed     = Status{408, "Malformed Request"}
	StatusDirectNotFound      = Status{404, "Message Not Found"}
	StatusDirectNoResults     = Status{404, "No Results"}
	StatusDirectTooManyResult = Status{413, "Too Many Results"}
)

// StatusBadPullRequest is the 400 a malformed pull request gets.
func StatusBadPullRequest(err error) Status {
	return Status{400, fmt.Sprintf("Bad Request - %v", err)}
}

// StatusExceededMaxRequestBatch refuses a pull larger than max_batch.
func StatusExceededMaxRequestBatch(limit int) Status {
	return Status{409, fmt.Sprintf("Exceeded MaxRequestBatch of %d", limit)}
}

// StatusExceededMaxRequestExpires refuses a pull longer than max_expires.
func StatusExceededMaxRequestExpires(limit time.Duration) Status {
	return Status{409, fmt.Sprintf("Exceeded MaxRequestExpires of %v", limit)}
}

// StatusExceededMaxRequestMaxBytes refuses a pull above max_bytes.
func StatusExceededMaxRequestMaxBytes(limit int) Status {
	return Status{409, fmt.Sprintf("Exceeded MaxRequestMaxBytes of %v", limit)}
}

// errHeartbeatTooLarge: a heartbeat must fire at least twice per expiry.
var errHeartbeatTooLarge = errors.New("heartbeat value too large")

// ParsePullRequest reads a pull request body the way nats-server does: an
// empty body is a pull of one, a bare integer is a pull of that many, and
// JSON is a PullRequest. Any other body is also a pull of one. An error
// (bad JSON, a heartbeat longer than half the expiry, or a body over
// MaxRequestSize) is answered with StatusBadPullRequest.
func ParsePullRequest(body []byte) (PullRequest, error) {
	if len(body) > MaxRequestSize {
		return PullRequest{}, ErrRequestTooLarge
	}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return PullRequest{Batch: 1}, nil
	case body[0] == '{':
		var req PullRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return PullRequest{}, err
		}
		if req.Heartbeat > 0 && req.Heartbeat*2 > req.Expires {
			return PullRequest{}, errHeartbeatTooLarge
		}
		return req, nil
	default:
		if n, err := strconv.Atoi(string(body)); err == nil {
			return PullRequest{Batch: n}, nil
		}
		return PullRequest{Batch: 1}, nil
	}
}
