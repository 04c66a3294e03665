package jetstream

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

func init() {
	apiRoutes["CONSUMER.RESET"] = apiRoute{(*jsAccount).consumerReset, func(err *api.Error) any {
		return &api.ConsumerResetResponse{Response: api.Response{Type: api.TypeConsumerResetResponse, Error: err}}
	}}
}

// The reasons a reset is refused, in nats-server's words (they follow
// "invalid reset: " in error 10204).
var (
	errResetBelowStartSeq  = errors.New("below start seq")
	errResetBelowStartTime = errors.New("below start time")
	errResetNotAllowed     = errors.New("not allowed")
)

// consumerReset serves CONSUMER.RESET.<stream>.<consumer>: with no body
// (or seq 0) the consumer starts again just above its ack floor, with a
// sequence it starts there. Everything outstanding is forgotten and the
// delivered and ack floors drop to just below the new start, with the
// consumer sequence back at 0, as nats-server resets them.
func (a *jsAccount) consumerReset(req apiRequest, rest string) any {
	const typ = api.TypeConsumerResetResponse
	var rreq api.ConsumerResetRequest
	if len(req.body) > 0 {
		// Read as nats-server reads it (plain json.Unmarshal), so a bad
		// body gets its words.
		if err := json.Unmarshal(req.body, &rreq); err != nil {
			return &api.ConsumerResetResponse{Response: api.Response{Type: typ, Error: api.NewInvalidJSONError(err)}}
		}
	}
	c, aerr := a.consumerFor(rest)
	if aerr != nil {
		// The reset subject is the consumer's own on nats-server: for a
		// missing consumer or stream nobody answers (the API's own
		// subscription takes the request, so it is not "no responders").
		return nil
	}
	var startTimeSeq uint64
	if cfg := c.config(); rreq.Seq > 0 && cfg.DeliverPolicy == api.DeliverByStartTime && cfg.OptStartTime != nil {
		seq, err := c.s.firstAtOrAfter(cfg.OptStartTime.UnixNano())
		if err != nil {
			return &api.ConsumerResetResponse{Response: api.Response{Type: typ, Error: api.NewConsumerInvalidResetError(err)}}
		}
		startTimeSeq = seq
	}
	seq, oldFloor, err := c.reset(rreq.Seq, startTimeSeq)
	if err != nil {
		return &api.ConsumerResetResponse{Response: api.Response{Type: typ, Error: api.NewConsumerInvalidResetError(err)}}
	}
	if c.s.config().Retention == api.InterestPolicy && seq > oldFloor+1 {
		// What the reset skipped no longer holds this consumer's interest.
		c.s.ap.submit(&proposal{s: c.s, acct: a, kind: propInterestCheck, seq: oldFloor + 1, done: func(*proposal, result) {}})
	}
	if c.s.keepsConsumer(c.config()) {
		// Answered once the reset state is durable: a reset the client
		// heard of survives a restart or a change of leader.
		if r := c.s.ap.apply(&proposal{s: c.s, acct: a, kind: propConsumerState, cons: c}); r.err != nil {
			return nil // the client's wait times out, as for a double ack
		}
	}
	c.wake()
	resp := &api.ConsumerResetResponse{Response: api.Response{Type: typ}, ConsumerInfo: c.info(), ResetSeq: seq}
	if hasHeader(req.hdr, api.HeaderStreamIdentity) {
		// A source reading through this consumer asks for the stream's
		// identity (its own is only a hint): the answer carries it, as
		// a create's does, so the source knows which origin it reads.
		return withHeader{resp: resp, hdr: appendHeaderBlock(nil, "", api.HeaderStreamIdentity, api.StreamIdentity(c.s.created))}
	}
	return resp
}

// reset moves the consumer to start at seq (0: just above its ack
// floor); startTimeSeq is the first sequence at its opt_start_time, for
// by_start_time consumers. It returns the sequence it starts from and the
// ack floor it had.
func (c *consumer) reset(seq, startTimeSeq uint64) (uint64, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.mu.cfg
	oldFloor := c.mu.ackS
	switch {
	case seq == 0:
		seq = c.mu.ackS + 1
	case cfg.DeliverPolicy == api.DeliverAll:
	case cfg.DeliverPolicy == api.DeliverByStartSequence:
		if seq < cfg.OptStartSeq {
			return 0, 0, errResetBelowStartSeq
		}
	case cfg.DeliverPolicy == api.DeliverByStartTime:
		if seq < startTimeSeq {
			return 0, 0, errResetBelowStartTime
		}
	default:
		return 0, 0, errResetNotAllowed
	}
	seq = max(seq, 1)
	clear(c.mu.pending)
	c.mu.order, c.mu.rdq, c.mu.maxed, c.mu.lps = nil, nil, nil, nil
	c.mu.nextDue = 0
	c.recycleAheadLocked()
	c.mu.aheadTo = 0
	c.setSSeqLocked(seq)
	c.mu.dseq, c.mu.delivered = 0, seq-1
	c.mu.ackC, c.mu.ackS = 0, seq-1
	c.mu.lastDel, c.mu.lastAck = time.Time{}, time.Time{}
	c.mu.dirty = true
	if err := c.countPendingLocked(); err != nil {
		return 0, 0, err
	}
	return seq, oldFloor, nil
}
