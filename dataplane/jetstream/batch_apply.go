package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// prechecked is what a batch's checks found for one of its messages: the
// header values the write needs. A proposal carrying it skips the checks
// in storeMsgLocked that refuse a message, since its batch ran them.
type prechecked struct {
	msgID  string
	ttl    int64
	rollup string
	incr   *big.Int // a counter stream's increment
}

// batchPending is what the messages checked so far stage on one subject.
type batchPending struct {
	msgs, bytes uint64
}

// storeBatchLocked applies a committed atomic batch: first every check
// that could refuse any of its messages, against the stream as it is and
// the batch's earlier messages (as nats-server stages them), and only if
// all pass, the writes. Nothing is written for a refused batch, so the
// group holds the whole batch or none of it.
func (s *stream) storeBatchLocked(p *proposal, ap *applier) result {
	b := p.batch
	pre, err := s.checkBatchLocked(p, ap)
	if err != nil {
		return result{err: err}
	}
	b.seqs = make([]uint64, len(b.msgs))
	b.subjects = make([]string, len(b.msgs))
	var last result
	for i := range b.msgs {
		m := &b.msgs[i]
		mp := &proposal{s: s, kind: propMsg, acct: p.acct, subject: m.subject, hdr: m.hdr, data: m.data, pre: &pre[i]}
		last = s.storeMsgLocked(mp, ap)
		if last.err != nil {
			if i == 0 {
				return last // nothing written yet
			}
			// The checks above rule this out; if it happens anyway the
			// group holds part of a batch, so it must never commit.
			return result{err: ap.partialBatch(fmt.Errorf("atomic batch %q of stream %q failed at message %d after the batch's checks: %w",
				b.id, s.mu.cfg.Name, i+1, last.err))}
		}
		b.seqs[i], b.subjects[i] = last.seq, mp.subject
	}
	return last
}

// partialBatch keeps a group holding part of a batch from committing: a
// node's own store refuses all writes until a restart (as after a failed
// commit); a partition's term ends, so the group is never proposed and
// the next term reloads the streams from what committed.
func (ap *applier) partialBatch(err error) error {
	if ap.group == nil {
		return ap.fail(err)
	}
	ap.e.log.Error("jetstream partition applied part of an atomic batch; leaving the partition", "err", err)
	ap.entryLost(err)
	return errNotAppended
}

// checkBatchLocked runs, for every message of the batch in order, the
// checks nats-server runs before it proposes an atomic batch, and the
// limit checks of a single publish for the batch as a whole. It returns
// each message's header values for the write.
func (s *stream) checkBatchLocked(p *proposal, ap *applier) ([]prechecked, error) {
	cfg, st := s.mu.cfg, &s.mu.state
	now := s.e.opts.Now().UnixNano()
	if cfg.Sealed {
		return nil, api.NewStreamSealedError()
	}
	out := make([]prechecked, len(p.batch.msgs))
	ids := map[string]bool{}
	pending := map[string]*batchPending{}
	expected := map[string]uint64{} // subject → last sequence a message expected
	var msgs, bytes uint64
	for i := range p.batch.msgs {
		m := &p.batch.msgs[i]
		subj := m.subject
		if tr := s.mu.tr.input; tr != nil {
			if mapped, ok := tr.Apply(subj); ok {
				subj = mapped
			}
		}
		if cfg.MaxMsgSize > 0 && len(m.hdr)+len(m.data) > int(cfg.MaxMsgSize) {
			return nil, api.NewMessageTooLargeError()
		}
		hv := func(key string) string { return string(headerValue(m.hdr, key)) }
		if hv(api.HeaderExpectedLastMsgID) != "" {
			return nil, api.NewAtomicPublishUnsupportedHeaderBatchError(api.HeaderExpectedLastMsgID)
		}
		if len(m.hdr) > 65535 {
			return nil, api.NewHeaderTooLargeError()
		}
		// Counters first, as for a single publish: each increment
		// applies in order, on the total the batch's earlier ones left.
		incr, err := checkIncr(cfg, m.hdr, m.data)
		if err != nil {
			return nil, err
		}
		if cfg.AllowMsgCounter && incr == nil {
			return nil, api.NewCounterIncrementMissingError()
		}
		if v := hv(api.HeaderExpectedStream); v != "" && v != cfg.Name {
			return nil, api.NewExpectedStreamMismatchError()
		}
		c := &out[i]
		c.incr = incr
		if v := hv(api.HeaderTTL); v != "" {
			ttl, ok := parseTTL(v)
			if (ttl != 0 || !ok) && !cfg.AllowMsgTTL {
				return nil, api.NewMessageTTLDisabledError()
			}
			if !ok {
				return nil, api.NewMessageTTLInvalidError()
			}
			c.ttl = ttl
		}
		if id := hv(api.HeaderMsgID); id != "" {
			if ids[id] {
				return nil, api.NewAtomicPublishContainsDuplicateMessageError()
			}
			if _, ok := s.dupLocked(id, now); ok {
				return nil, api.NewAtomicPublishContainsDuplicateMessageError()
			}
			ids[id] = true
			c.msgID = id
		}
		if hv(api.HeaderStreamSource) != "" {
			return nil, api.NewMessageSourceHdrNotAllowedError()
		}
		if v := hv(api.HeaderExpectedLastSeq); v != "" {
			// Only the first message may expect a last sequence; the
			// ones after it would be checked against the batch itself.
			want := st.LastSeq + uint64(i)
			if n, err := strconv.ParseUint(v, 10, 64); err != nil || n != want {
				return nil, api.NewWrongLastSequenceError(want)
			}
			if i > 0 {
				return nil, api.NewWrongLastSequenceUnsetError()
			}
		}
		if err := s.checkBatchSubjectSeqLocked(hv, subj, pending, expected, ap); err != nil {
			return nil, err
		}
		// A schedule in a batch is checked as a single one is; the
		// check adds its Nats-Rollup: sub, held to the batch's rule below.
		if m.hdr, err = s.checkScheduleLocked(subj, m.hdr, ap); err != nil {
			return nil, err
		}
		if v := hv(api.HeaderRollup); v != "" {
			c.rollup = strings.ToLower(v)
			if !cfg.AllowRollup || cfg.DenyPurge {
				return nil, api.NewStreamRollupFailedError(api.ErrCauseRollupNotPermitted)
			}
			switch c.rollup {
			case api.RollupSubject:
				if pending[subj] != nil {
					return nil, api.NewStreamRollupFailedError(errors.New("batch rollup sub invalid"))
				}
			case api.RollupAll:
				if len(pending) > 0 {
					return nil, api.NewStreamRollupFailedError(errors.New("batch rollup all invalid"))
				}
			default:
				return nil, api.NewStreamRollupFailedError(fmt.Errorf("rollup value invalid: %q", c.rollup))
			}
		}
		size := msgSize(subj, m.hdr, m.data)
		ps := pending[subj]
		if ps == nil {
			ps = &batchPending{}
			pending[subj] = ps
		}
		ps.msgs++
		ps.bytes += size
		msgs++
		bytes += size
		if err := s.checkBatchDiscardNewLocked(subj, c.rollup != "", st.Msgs+msgs, st.Bytes+bytes, ps.msgs, ap); err != nil {
			return nil, err
		}
	}
	// The limits a single publish checks, for the batch's bytes at once,
	// so that no message of it can be refused once the first is written.
	if ap.full() {
		return nil, api.NewInsufficientResourcesError()
	}
	if err := s.checkMsgRoomLocked(p.acct, bytes); err != nil {
		return nil, err
	}
	return out, nil
}

// checkBatchSubjectSeqLocked checks a batch message's
// Nats-Expected-Last-Subject-Sequence: against the stream before the
// batch, and refused for a subject an earlier message of the batch wrote.
func (s *stream) checkBatchSubjectSeqLocked(hv func(string) string, subj string, pending map[string]*batchPending,
	expected map[string]uint64, ap *applier) error {
	v := hv(api.HeaderExpectedLastSubjSeq)
	alt := hv(api.HeaderExpectedLastSubjSeqSubj)
	if v == "" {
		if alt != "" {
			return api.NewExpectedLastSubjectSeqMissingError()
		}
		return nil
	}
	if alt != "" {
		subj = alt
	}
	if pending[subj] != nil {
		return api.NewWrongLastSequenceUnsetError()
	}
	last, seen := expected[subj]
	if !seen {
		var err error
		if last, err = s.lastForSubjectLocked(subj, ap); err != nil {
			return err
		}
		expected[subj] = last
	}
	if n, err := strconv.ParseUint(v, 10, 64); err != nil || n != last {
		return api.NewWrongLastSequenceError(last)
	}
	return nil
}

// checkBatchDiscardNewLocked refuses a batch that a discard-new stream has
// no room for: the stream's messages and bytes plus the batch's so far,
// and the subject's count plus the batch's on it (rollups pass, since
// they purge the subject once stored).
func (s *stream) checkBatchDiscardNewLocked(subj string, rollup bool, msgs, bytes, onSubj uint64, ap *applier) error {
	cfg := s.mu.cfg
	if cfg.Discard != api.DiscardNew {
		return nil
	}
	if cfg.MaxMsgs > 0 && msgs > uint64(cfg.MaxMsgs) {
		return api.NewStreamStoreFailedError(api.ErrCauseMaxMsgs)
	}
	if cfg.MaxBytes > 0 && bytes > uint64(cfg.MaxBytes) {
		return api.NewStreamStoreFailedError(api.ErrCauseMaxBytes)
	}
	if cfg.DiscardNewPer && cfg.MaxMsgsPer > 0 && !rollup {
		subs, err := s.subjectsLocked(ap)
		if err != nil {
			return err
		}
		var held uint64
		if ss := subs[subj]; ss != nil {
			held = ss.msgs
		}
		if held+onSubj > uint64(cfg.MaxMsgsPer) {
			return api.NewStreamStoreFailedError(api.ErrCauseMaxMsgsPerSubject)
		}
	}
	return nil
}

// batchDone completes a committed batch once durable: the backlog room
// is given back, each message republished, and the committer answered
// with the last sequence, the batch id and the count.
func batchDone(p *proposal, r result) {
	s, b := p.s, p.batch
	s.e.flow.release(s, p.held)
	if r.err == nil {
		for i := range b.msgs {
			m := &b.msgs[i]
			s.republish(&proposal{s: s, acct: p.acct, subject: b.subjects[i], hdr: m.hdr, data: m.data}, b.seqs[i])
		}
	}
	if p.reply == "" || isFateUnknown(r.err) {
		return
	}
	if isNotAppended(r.err) {
		p.acct.acc.Publish(p.reply, "", noResponders, nil)
		return
	}
	cfg := s.config()
	if cfg.NoAck {
		return
	}
	var out []byte
	if r.err != nil {
		out = errorPubAck(cfg.Name, r.err)
	} else {
		out = appendPubAck(make([]byte, 0, 96+len(cfg.Name)+len(b.id)), cfg.Name, r.seq, false, s.e.opts.Domain)
		out = append(out[:len(out)-1], `,"batch":`...)
		out = strconv.AppendQuote(out, b.id)
		out = append(out, `,"count":`...)
		out = strconv.AppendInt(out, int64(len(b.msgs)), 10)
		out = append(out, '}')
	}
	p.acct.acc.Publish(p.reply, "", nil, out)
}

// errorPubAck is the PubAck refusing a publish: nats-server names the
// stream in it too.
func errorPubAck(stream string, err error) []byte {
	b, _ := json.Marshal(api.PubAckResponse{Error: api.Prefer(err, api.NewStreamStoreFailedError(err)),
		PubAck: &api.PubAck{Stream: stream}})
	return b
}
