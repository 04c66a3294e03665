package api

import "errors"

// Causes are the texts nats-server puts in the {err} of its generic
// errors (10077 store failed, 10057 delete failed, 10110 purge failed,
// 10111 rollup failed). Users and tools match on them, so they are wire
// facts like the table's descriptions, kept here so handlers and the
// store share one spelling: NewStreamStoreFailedError(ErrCauseMaxMsgs).
var (
	// ErrCauseMaxMsgs: discard-new stream at max_msgs.
	ErrCauseMaxMsgs = errors.New("maximum messages exceeded")
	// ErrCauseMaxBytes: discard-new stream at max_bytes.
	ErrCauseMaxBytes = errors.New("maximum bytes exceeded")
	// ErrCauseMaxMsgsPerSubject: discard-new-per-subject stream at the
	// subject's limit (a KV create racing another).
	ErrCauseMaxMsgsPerSubject = errors.New("maximum messages per subject exceeded")
	// ErrCauseMsgTooLarge: a message the store cannot hold at all.
	ErrCauseMsgTooLarge = errors.New("message too large")
	// ErrCauseNoMessage: the store has no message at the sequence asked.
	ErrCauseNoMessage = errors.New("no message found")
	// ErrCauseRollupNotPermitted: Nats-Rollup on a stream without
	// allow_rollup_hdrs (or a subject rollup of another subject).
	ErrCauseRollupNotPermitted = errors.New("rollup not permitted")
	// ErrCauseMsgDeleteNotPermitted: STREAM.MSG.DELETE on a deny_delete stream.
	ErrCauseMsgDeleteNotPermitted = errors.New("message delete not permitted")
	// ErrCausePurgeNotPermitted: STREAM.PURGE on a deny_purge stream.
	ErrCausePurgeNotPermitted = errors.New("stream purge not permitted")
)
