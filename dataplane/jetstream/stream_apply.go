package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// applyLocked is the stream's one apply function: every change goes
// through it, on its store's applier goroutine, in submission order. It
// decides deterministically from the stream's state and the proposal,
// writes to the applier's batch, and updates the state in memory.
func (s *stream) applyLocked(p *proposal, ap *applier) result {
	if s.mu.removed && p.kind != propCreate {
		return result{err: errStreamGone}
	}
	var r result
	switch p.kind {
	case propCreate:
		// The create counted its commitment when it reserved the stream.
		ap.batch.PutStream(s.recordLocked(p.acct.acc.Name()))
		s.mu.dirty = true
	case propUpdate:
		// The commitment moves with the config (max_bytes set, changed or
		// dropped) before eviction adjusts the bytes under the new one.
		s.commitLocked(-1)
		s.mu.cfg = p.cfg
		s.commitLocked(+1)
		s.mu.tr, _ = compileTransforms(p.cfg)
		ap.batch.PutStream(s.recordLocked(p.acct.acc.Name()))
		r.err = s.enforceLimitsLocked("", ap)
		s.mu.dirty = true
	case propRemove:
		ap.batch.DeleteStream(s.id)
		s.coldPurgedLocked(ap)
		ap.forgetState(s)
		s.commitLocked(-1)
		ap.used.Add(-int64(s.mu.state.Bytes))
		s.mu.removed = true
		if s.mu.timer != nil {
			s.mu.timer.Stop()
		}
		return r
	case propMsg:
		if p.src != nil {
			r = s.storeSourcedLocked(p, ap)
		} else {
			r = s.storeMsgLocked(p, ap)
		}
	case propBatch:
		r = s.storeBatchLocked(p, ap)
	case propFastBatch:
		r = s.fastApplyLocked(p, ap)
	case propRestoreEnd:
		s.restoreEndLocked(p.rst, ap)
	case propRestoreDone:
		s.mu.restoring = false
		ap.batch.PutStream(s.recordLocked(p.acct.acc.Name()))
	case propDelete:
		r = s.deleteMsgLocked(p.seq, ap)
		if p.erase && r.err == nil {
			s.markEraseLocked(p.seq, ap)
		}
	case propPurge:
		r = s.purgeLocked(p.purge, 0, ap)
	case propExpire:
		r.err = s.expireLocked(ap)
	case propAcked:
		r.err = s.removeAckedLocked(p.seqs, ap)
	case propConsumerCreate:
		rec, _ := json.Marshal(consumerRecord{Config: p.cons.config(), Created: p.cons.created})
		ap.batch.PutConsumer(s.id, p.cons.name, rec)
		ap.batch.PutConsumerState(s.id, p.cons.name, p.cons.encodeState())
	case propConsumerState:
		if !p.cons.isDeleted() {
			ap.batch.PutConsumerState(s.id, p.cons.name, p.cons.encodeState())
		}
	case propConsumerDelete:
		ap.batch.DeleteConsumer(s.id, p.cons.name)
	case propInterestCheck:
		r.err = s.dropUninterestedLocked(p.seq, ap)
	case propSubjects:
		_, r.err = s.buildSubjectsLocked(ap, subjectsStep)
	case propColdIntent:
		ap.batch.PutPendingObject(store.PendingObject{Stream: s.id, Key: p.coldKey, Time: s.e.opts.Now().UnixNano()})
	case propColdCommit:
		r.err = s.commitColdLocked(p.cold, ap)
	case propColdRewrite:
		r.err = s.rewriteColdLocked(p.cold, p.coldKey, ap)
	}
	if s.mu.dirty {
		ap.markDirty(s)
	}
	s.armTimerLocked()
	return r
}

// storeSourcedLocked applies a mirrored or sourced message: dropped if
// the source's progress (or, for a mirror, its last sequence) covers it;
// else stored, and the progress moves to it in the same batch, also when
// the stream refuses the message (a limit), as nats-server drops it.
// Progress made from an origin of another identity (deleted and made
// again) covers nothing of the new one.
func (s *stream) storeSourcedLocked(p *proposal, ap *applier) result {
	src := p.src
	if s.sourceCoversLocked(src) {
		return result{dup: true}
	}
	r := s.storeMsgLocked(p, ap)
	var aerr *api.Error
	if r.err == nil || errors.As(r.err, &aerr) {
		s.mu.progress[src.key] = sourceProgress{seq: src.oseq, ident: src.ident}
		ap.batch.PutSourceProgress(s.id, src.key, src.oseq, src.ident)
		r.skipped = r.err != nil
	}
	return r
}

// sourceCoversLocked reports whether the stream has taken src already:
// its source's progress (from the same origin) or, for a mirror, its
// last sequence is at or past src's origin sequence.
func (s *stream) sourceCoversLocked(src *sourcedMsg) bool {
	cur := s.mu.progress[src.key]
	return (cur.ident == src.ident && src.oseq <= cur.seq) || (src.mirror && src.oseq <= s.mu.state.LastSeq)
}

// dupLocked finds the message a publish with Nats-Msg-Id msgID at time
// now duplicates: one stored with that id within the stream's duplicate
// window.
func (s *stream) dupLocked(msgID string, now int64) (dedupRec, bool) {
	d, ok := s.mu.dedup[msgID]
	return d, ok && now-d.ts < int64(s.mu.cfg.Duplicates)
}

// storeMsgLocked applies a publish: the Nats-* header checks, dedup, the
// limits that refuse (discard new), the write, then the limits that evict.
func (s *stream) storeMsgLocked(p *proposal, ap *applier) result {
	cfg := s.mu.cfg
	now := s.e.opts.Now().UnixNano()
	if cfg.Sealed && p.rst == nil {
		return result{err: api.NewStreamSealedError()}
	}
	if tr := s.mu.tr.input; tr != nil && p.rst == nil {
		// (A restored message's subject was mapped when first stored.)
		if mapped, ok := tr.Apply(p.subject); ok {
			p.subject = mapped
		}
	}
	if cfg.MaxMsgSize >= 0 && len(p.hdr)+len(p.data) > int(cfg.MaxMsgSize) && cfg.MaxMsgSize != 0 {
		return result{err: api.NewMessageTooLargeError()}
	}
	var msgID string
	var ttl int64
	var rollup string
	var incr *big.Int
	if p.pre != nil {
		// A member of an atomic batch: its batch ran these checks, and
		// the limit checks below, for all its messages at once.
		msgID, ttl, rollup, incr = p.pre.msgID, p.pre.ttl, p.pre.rollup, p.pre.incr
	} else if p.rst != nil {
		// A restored message passed its checks when it was first
		// stored, and its roll-up and counter total are in the backup
		// already; what its headers set up again is its TTL and, for
		// the duplicate window, its id.
		if v := headerValue(p.hdr, api.HeaderTTL); len(v) > 0 && cfg.AllowMsgTTL {
			if t, ok := parseTTL(string(v)); ok {
				ttl = t
			}
		}
		msgID = string(headerValue(p.hdr, api.HeaderMsgID))
	} else if p.src != nil {
		// A mirrored or sourced message: the origin ran the client's
		// checks; only a source's Nats-Msg-Id is deduplicated here.
		if v := headerValue(p.hdr, api.HeaderMsgID); len(v) > 0 && !p.src.mirror {
			msgID = string(v)
			if d, ok := s.dupLocked(msgID, now); ok {
				return result{seq: d.seq, dup: true}
			}
		}
		// An origin's roll-up applies where this stream allows roll-ups
		// itself (as a KV mirror does); elsewhere it is kept as a header.
		if v := headerValue(p.hdr, api.HeaderRollup); len(v) > 0 && cfg.AllowRollup && !cfg.DenyPurge {
			if r := strings.ToLower(string(v)); r == "sub" || r == "all" {
				rollup = r
			}
		}
		if cfg.AllowMsgCounter {
			var err error
			if incr, err = parseIncr(p.hdr); err != nil {
				return result{err: err}
			}
		}
	} else if len(p.hdr) > 0 {
		// The checks run in nats-server's order, since a request that
		// fails two of them must get the same answer from both; a header
		// with an empty value counts as absent.
		var err error
		if incr, err = checkIncr(cfg, p.hdr, p.data); err != nil {
			return result{err: err}
		}
		if v := headerValue(p.hdr, api.HeaderExpectedStream); len(v) > 0 && string(v) != cfg.Name {
			return result{err: api.NewExpectedStreamMismatchError()}
		}
		var ttlErr bool
		if v := headerValue(p.hdr, api.HeaderTTL); len(v) > 0 {
			var ok bool
			ttl, ok = parseTTL(string(v))
			ttlErr = !ok
			if ttl != 0 && !cfg.AllowMsgTTL {
				return result{err: api.NewMessageTTLDisabledError()}
			}
		}
		if v := headerValue(p.hdr, api.HeaderExpectedLastSubjSeq); len(v) > 0 {
			subj := p.subject
			if alt := headerValue(p.hdr, api.HeaderExpectedLastSubjSeqSubj); len(alt) > 0 {
				subj = string(alt)
			}
			last, err := s.lastForSubjectLocked(subj, ap)
			if err != nil {
				return result{err: err}
			}
			if n, err := strconv.ParseUint(string(v), 10, 64); err != nil || n != last {
				return result{err: api.NewWrongLastSequenceError(last)}
			}
		} else if len(headerValue(p.hdr, api.HeaderExpectedLastSubjSeqSubj)) > 0 {
			return result{err: api.NewExpectedLastSubjectSeqMissingError()}
		}
		if v := headerValue(p.hdr, api.HeaderExpectedLastSeq); len(v) > 0 {
			if n, err := strconv.ParseUint(string(v), 10, 64); err != nil || n != s.mu.state.LastSeq {
				return result{err: api.NewWrongLastSequenceError(s.mu.state.LastSeq)}
			}
		}
		if !p.scheduled {
			if p.hdr, err = s.checkScheduleLocked(p.subject, p.hdr, ap); err != nil {
				return result{err: err}
			}
		}
		if v := headerValue(p.hdr, api.HeaderMsgID); len(v) > 0 {
			msgID = string(v)
			if d, ok := s.dupLocked(msgID, now); ok {
				return result{seq: d.seq, dup: true}
			}
		}
		if v := headerValue(p.hdr, api.HeaderExpectedLastMsgID); len(v) > 0 && string(v) != s.mu.lastMsgID {
			return result{err: api.NewWrongLastMsgIDError(s.mu.lastMsgID)}
		}
		if v := headerValue(p.hdr, api.HeaderRollup); len(v) > 0 {
			rollup = strings.ToLower(string(v))
			if !cfg.AllowRollup || cfg.DenyPurge {
				return result{err: api.NewStreamRollupFailedError(api.ErrCauseRollupNotPermitted)}
			}
			if rollup != "sub" && rollup != "all" {
				return result{err: api.NewStreamRollupFailedError(fmt.Errorf("rollup value invalid: %q", rollup))}
			}
		}
		if ttlErr {
			return result{err: api.NewMessageTTLInvalidError()}
		}
	}
	var val string
	if cfg.AllowMsgCounter && p.rst == nil {
		if incr == nil {
			return result{err: api.NewCounterIncrementMissingError()}
		}
		var err error
		if p.hdr, p.data, val, err = s.applyIncrLocked(p.subject, p.hdr, p.data, incr, ap); err != nil {
			return result{err: err}
		}
	}
	size := msgSize(p.subject, p.hdr, p.data)
	if p.pre == nil {
		if ap.full() {
			return result{err: api.NewInsufficientResourcesError()}
		}
		if err := s.checkMsgRoomLocked(p.acct, size); err != nil {
			return result{err: err}
		}
		if err := s.checkDiscardNewLocked(p.subject, size, ap); err != nil {
			return result{err: err}
		}
	}

	seq := s.mu.state.LastSeq + 1
	if oseq, ots, kept := p.keptOrigin(); kept {
		// A mirrored or restored message keeps its origin's sequence
		// and time; what the origin no longer held between two messages
		// is a gap here too. (A mirror's older ones were dropped as
		// covered, storeSourcedLocked.)
		if oseq < seq {
			return result{err: fmt.Errorf("message %d: %w (stream at %d)", oseq, errSeqOrder, seq-1)}
		}
		if oseq > seq && s.mu.state.Msgs > 0 {
			s.mu.state.Deleted += oseq - seq
		}
		seq, now = oseq, ots
	}
	m := store.Message{Seq: seq, Subject: p.subject, Header: p.hdr, Data: p.data, Time: now, TTL: ttl}
	ap.batch.PutMsg(s.id, &m)
	st := &s.mu.state
	if st.Msgs == 0 {
		st.FirstSeq, st.FirstTime = seq, now
	}
	st.LastSeq, st.LastTime = seq, now
	st.Msgs++
	st.Bytes += size
	s.bytesChangedLocked(ap, int64(size))
	if ss := s.subjectEntryLocked(p.subject, seq); ss != nil {
		if ss.msgs == 0 {
			ss.first = seq
		}
		ss.msgs++
		ss.last = seq
	}
	// The last message's Nats-Msg-Id, "" if it had none, is what
	// Nats-Expected-Last-Msg-Id is checked against.
	s.mu.lastMsgID = msgID
	if msgID != "" {
		s.mu.dedup[msgID] = dedupRec{seq: seq, ts: now}
		if cfg.Duplicates > 0 {
			ap.batch.PutDedup(s.id, store.DedupEntry{ID: msgID, Seq: seq, Time: now})
		}
	}
	if ttl >= 0 && s.mu.ageNext == 0 {
		s.mu.ageNext = now
	}
	if ttl > 0 && (s.mu.nextTTL == 0 || now+ttl < s.mu.nextTTL) {
		s.mu.nextTTL = now + ttl
	}
	s.mu.dirty = true
	s.scheduleStoredLocked(seq, p.subject, p.hdr, now)
	switch rollup {
	case "all":
		if r := s.purgeLocked(api.StreamPurgeRequest{Sequence: seq}, 0, ap); r.err != nil {
			return r
		}
	case "sub":
		if r := s.purgeLocked(api.StreamPurgeRequest{Subject: p.subject, Sequence: seq}, 0, ap); r.err != nil {
			return r
		}
	}
	if p.rst == nil {
		// A restored scheduler purge happened before the backup.
		if err := s.purgeSchedulerLocked(p.hdr, ap); err != nil {
			return result{err: err}
		}
	}
	if err := s.enforceLimitsLocked(p.subject, ap); err != nil {
		return result{err: err}
	}
	interested := false
	for _, c := range s.mu.cons {
		if c.matches(p.subject) {
			c.npend.Add(1)
			interested = true
		}
	}
	if cfg.Retention == api.InterestPolicy && !interested && p.rst == nil {
		// Nobody is interested: the message is acknowledged (it has a
		// sequence) but not kept. A restored message was kept for
		// consumers the restore brings back after the messages.
		if err := s.removeLocked(seq, p.subject, size, ap); err != nil {
			return result{err: err}
		}
	}
	return result{seq: seq, val: val}
}

// parseTTL reads a Nats-TTL value as nats-server does: "never" (any
// case) is -1; a Go duration of at least a second, or a whole number of
// seconds, counts in whole seconds; "0" means no TTL. ok is false for
// anything else (ADR-43).
func parseTTL(v string) (ttl int64, ok bool) {
	if strings.EqualFold(v, "never") {
		return -1, true
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < time.Second {
			return 0, false
		}
		return int64(d/time.Second) * int64(time.Second), true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/int64(time.Second) {
		return 0, false
	}
	return n * int64(time.Second), true
}

// checkDiscardNewLocked refuses a write that a discard-new stream has no
// room for.
func (s *stream) checkDiscardNewLocked(subj string, size uint64, ap *applier) error {
	cfg, st := s.mu.cfg, &s.mu.state
	if cfg.Discard == api.DiscardNew {
		if cfg.MaxMsgs > 0 && st.Msgs >= uint64(cfg.MaxMsgs) {
			return api.NewStreamStoreFailedError(api.ErrCauseMaxMsgs)
		}
		if cfg.MaxBytes > 0 && st.Bytes+size > uint64(cfg.MaxBytes) {
			return api.NewStreamStoreFailedError(api.ErrCauseMaxBytes)
		}
	}
	if cfg.Discard == api.DiscardNew && cfg.DiscardNewPer && cfg.MaxMsgsPer > 0 {
		if _, err := s.subjectsLocked(ap); err != nil {
			return err
		}
		if ss := s.mu.subjects[subj]; ss != nil && ss.msgs >= uint64(cfg.MaxMsgsPer) {
			return api.NewStreamStoreFailedError(api.ErrCauseMaxMsgsPerSubject)
		}
	}
	return nil
}

// enforceLimitsLocked evicts the oldest messages past max_msgs, max_bytes
// and max_msgs_per_subject: per subject only for subj when a write named one
// (only its count changed), else for every subject (after a config update).
func (s *stream) enforceLimitsLocked(subj string, ap *applier) error {
	cfg, st := s.mu.cfg, &s.mu.state
	// Only discard old evicts for max_msgs and max_bytes: a discard new
	// stream refuses writes instead, and keeps what it holds when an
	// update lowers a limit below it, as nats-server's stores do.
	old := cfg.Discard == api.DiscardOld
	for old && cfg.MaxMsgs > 0 && st.Msgs > uint64(cfg.MaxMsgs) {
		if err := s.removeFirstLocked(ap); err != nil {
			return err
		}
	}
	for old && cfg.MaxBytes > 0 && st.Bytes > uint64(cfg.MaxBytes) && st.Msgs > 0 {
		if err := s.removeFirstLocked(ap); err != nil {
			return err
		}
	}
	if cfg.MaxMsgsPer > 0 {
		subs, err := s.subjectsLocked(ap)
		if err != nil {
			return err
		}
		evict := func(subj string, ss *subjectState) error {
			for ss.msgs > uint64(cfg.MaxMsgsPer) {
				if err := s.removeSeqLocked(ss.first, subj, ap); err != nil {
					return err
				}
			}
			return nil
		}
		if subj != "" {
			if ss := subs[subj]; ss != nil {
				return evict(subj, ss)
			}
			return nil
		}
		for subj, ss := range subs {
			if err := evict(subj, ss); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeFirstLocked drops the stream's oldest message.
func (s *stream) removeFirstLocked(ap *applier) error {
	if o := s.mu.oldest; o != nil && o.seq == s.mu.state.FirstSeq {
		return s.removeLocked(o.seq, o.subject, o.size, ap)
	}
	m, err := s.firstFromLocked(s.mu.state.FirstSeq, ap)
	if err != nil {
		return err
	}
	return s.removeMsgLocked(&m, ap)
}

// removeSeqLocked drops one message known to exist.
func (s *stream) removeSeqLocked(seq uint64, subj string, ap *applier) error {
	// A committed message can be read as is; a newer one may still be in
	// a group on its way to disk.
	if seq > s.durable.Load() {
		if err := ap.visible(); err != nil {
			return err
		}
	}
	m, err := ap.rd.LoadMsgOn(s.id, seq, subj)
	if err != nil {
		return api.NewStreamStoreFailedError(fmt.Errorf("stream %q subject %q: %w", s.mu.cfg.Name, subj, err))
	}
	return s.removeMsgLocked(&m, ap)
}

// firstFromLocked reads the first message at or after seq, seeing every
// write of the current group, where seq is almost always the answer: the
// stream's first sequence (which names its oldest message), or the one
// after the oldest, which a stream written in order holds. So it tries a
// point read of seq, and scans only when seq holds nothing. Why: a scan
// opens an iterator over every level of the store and seeks each one,
// while the message sought is usually in the newest memtable; a stream at
// its max_msgs or max_bytes does this twice per message it stores, and
// scanning made such a stream store at a third of an uncapped one's rate.
//
// The point read waits for the groups in flight only when the store may
// not hold seq's current state (committedLiveLocked): a capped stream
// evicts at every message, and that wait kept each group from being
// applied while the one before it was synced.
func (s *stream) firstFromLocked(seq uint64, ap *applier) (store.Message, error) {
	if !s.committedLiveLocked(seq, ap) {
		if err := ap.visible(); err != nil {
			return store.Message{}, err
		}
	}
	m, err := ap.rd.LoadMsg(s.id, seq)
	switch {
	case err == nil:
		return m, nil
	case !errors.Is(err, store.ErrNotFound):
		return m, api.NewStreamStoreFailedError(err)
	}
	return s.nextMsgLocked(seq+1, "", ap)
}

// committedLiveLocked reports whether what the store holds at seq (seq
// at least the stream's first sequence) is the stream's current state,
// with no wait for the groups in flight: seq was committed (at most the
// durable sequence), and every group that removed one of the stream's
// messages other than its oldest has committed too. Why that suffices:
// sequences are never reused, and a message at or after the first
// sequence that a group still in flight (or this one) removed was not the
// oldest when it went (an older one, still here, came before it), so it
// made holeGen that group. A hit is then the message as it stands; a
// miss still goes the slow way.
func (s *stream) committedLiveLocked(seq uint64, ap *applier) bool {
	return seq <= s.durable.Load() && s.mu.holeGen <= ap.doneGen.Load()
}

// nextMsgLocked reads the first message at or after seq matching filter,
// seeing every write of the current group.
func (s *stream) nextMsgLocked(seq uint64, filter string, ap *applier) (store.Message, error) {
	if err := ap.visible(); err != nil {
		return store.Message{}, err
	}
	m, err := ap.rd.NextMsg(s.id, seq, filter)
	if err != nil {
		return m, api.NewStreamStoreFailedError(err)
	}
	return m, nil
}

// removeMsgLocked deletes m and fixes the state.
func (s *stream) removeMsgLocked(m *store.Message, ap *applier) error {
	return s.removeLocked(m.Seq, m.Subject, storedSize(m), ap)
}

// removeLocked deletes message seq (on subj, counting size) and fixes the
// state: counts, the first sequence and time, and the subject's summary.
func (s *stream) removeLocked(seq uint64, subj string, size uint64, ap *applier) error {
	m := &store.Message{Seq: seq, Subject: subj}
	ap.batch.DeleteMsg(s.id, m.Seq, m.Subject)
	if seq != s.mu.state.FirstSeq {
		s.mu.holeGen = ap.gen
	}
	if s.mu.sched != nil {
		s.unscheduleLocked(subj, seq)
	}
	for _, c := range s.mu.cons {
		if seq >= c.sseqA.Load() && c.matches(subj) {
			c.npend.Add(-1)
		}
		c.msgRemoved(seq)
	}
	st := &s.mu.state
	size = min(st.Bytes, size)
	st.Msgs--
	st.Bytes -= size
	s.bytesChangedLocked(ap, -int64(size))
	s.coldRemovedLocked(seq, size, ap)
	s.mu.dirty = true
	// next is the stream's new oldest message when m was the oldest.
	var next *store.Message
	if st.Msgs > 0 && m.Seq == st.FirstSeq {
		n, err := s.firstFromLocked(m.Seq+1, ap)
		if err != nil {
			return err
		}
		next = &n
	}
	subs := s.summariesForLocked(m.Subject, m.Seq)
	if ss := subs[m.Subject]; ss != nil {
		ss.msgs--
		switch {
		case ss.msgs == 0:
			delete(subs, m.Subject)
		case next != nil && next.Subject == m.Subject && ss.first == m.Seq:
			// Nothing lies between m and the stream's next message, so
			// that one is its subject's next too: no index scan (the
			// common case of a capped stream of one subject).
			ss.first = next.Seq
		default:
			if err := s.subjectEndsLocked(m.Subject, m.Seq, ss, ap); err != nil {
				return err
			}
		}
	}
	if st.Msgs == 0 {
		st.FirstSeq, st.FirstTime = st.LastSeq+1, 0
		return nil
	}
	if next != nil {
		st.FirstSeq, st.FirstTime = next.Seq, next.Time
		if s.mu.oldest == nil {
			s.mu.oldest = new(oldestMsg)
		}
		*s.mu.oldest = oldestMsg{seq: next.Seq, size: storedSize(next), subject: next.Subject}
	}
	return nil
}

func (s *stream) advanceSubjectFirstLocked(subj string, ss *subjectState, ap *applier) error {
	if ss.msgs == 1 {
		ss.first = ss.last // the one message left is the newest
		return nil
	}
	if err := ap.visible(); err != nil {
		return err
	}
	errFound := errors.New("found")
	err := ap.rd.SubjectSeqs(s.id, subj, ss.first+1, func(seq uint64) error {
		ss.first = seq
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return api.NewStreamStoreFailedError(err)
	}
	return nil
}

// subjectsLocked returns the per-subject summaries, building them from the
// subject index the first time a stream needs them.
func (s *stream) subjectsLocked(ap *applier) (map[string]*subjectState, error) {
	if _, err := s.buildSubjectsLocked(ap, 0); err != nil {
		return nil, err
	}
	return s.mu.subjects, nil
}

// subjectEntryLocked returns the summary to update for a new message on
// subj at seq, or nil when summaries are not being kept.
func (s *stream) subjectEntryLocked(subj string, seq uint64) *subjectState {
	subs := s.summariesForLocked(subj, seq)
	if subs == nil {
		return nil
	}
	ss := subs[subj]
	if ss == nil {
		ss = &subjectState{}
		subs[subj] = ss
	}
	return ss
}

func (s *stream) lastForSubjectLocked(subj string, ap *applier) (uint64, error) {
	subs, err := s.subjectsLocked(ap)
	if err != nil {
		return 0, err
	}
	if ss := subs[subj]; ss != nil {
		return ss.last, nil
	}
	return 0, nil
}

// errStoreEOF is nats-server's file store error for a sequence past the end.
var errStoreEOF = errors.New("stream store EOF")

// deleteMsgLocked applies STREAM.MSG.DELETE.
func (s *stream) deleteMsgLocked(seq uint64, ap *applier) result {
	cfg, st := s.mu.cfg, &s.mu.state
	if cfg.Sealed {
		return result{err: api.NewStreamSealedError()}
	}
	if cfg.DenyDelete {
		return result{err: api.NewStreamMsgDeleteFailedError(api.ErrCauseMsgDeleteNotPermitted)}
	}
	// No such message: nats-server's memory store says "sequence N not
	// found" (10043) whatever the reason; its file store, the default,
	// says so only inside the stream's range, and otherwise reports the
	// store's own error (10057). Both are matched, by storage type.
	if cfg.Storage == api.FileStorage {
		switch {
		case seq > st.LastSeq:
			return result{err: api.NewStreamMsgDeleteFailedError(errStoreEOF)}
		case seq == 0 || seq < st.FirstSeq:
			return result{err: api.NewStreamMsgDeleteFailedError(api.ErrCauseNoMessage)}
		}
	}
	if st.Msgs == 0 || seq < st.FirstSeq || seq > st.LastSeq {
		return result{err: api.NewSequenceNotFoundError(seq)}
	}
	if err := ap.visible(); err != nil {
		return result{err: err}
	}
	m, err := ap.rd.LoadMsg(s.id, seq)
	if errors.Is(err, store.ErrNotFound) {
		return result{err: api.NewSequenceNotFoundError(seq)}
	}
	if err != nil {
		return result{err: api.NewStreamStoreFailedError(err)}
	}
	if err := s.removeMsgLocked(&m, ap); err != nil {
		return result{err: err}
	}
	return result{}
}

// purgeLocked applies STREAM.PURGE (and rollups): with no options it
// empties the stream; with filter, seq (exclusive upper bound) and keep
// (newest matches to leave) it removes what they select.
func (s *stream) purgeLocked(req api.StreamPurgeRequest, _ int, ap *applier) result {
	st := &s.mu.state
	all := req.Subject == "" || req.Subject == ">"
	if all && req.Keep == 0 && req.Sequence > st.LastSeq+1 {
		// Purging up to a sequence past the end empties the stream and
		// moves it there: the next message gets that sequence, as on
		// nats-server (whose stores compact to it).
		n := st.Msgs
		if n > 0 {
			ap.batch.PurgeAll(s.id)
			s.coldPurgedLocked(ap)
		}
		freed := st.Bytes
		st.Msgs, st.Bytes = 0, 0
		s.bytesChangedLocked(ap, -int64(freed))
		st.LastSeq = req.Sequence - 1
		st.FirstSeq, st.FirstTime = req.Sequence, 0
		s.subjectsPurgedLocked()
		s.schedulesPurgedLocked()
		for _, c := range s.mu.cons {
			c.purged(st.LastSeq+1, true)
		}
		s.mu.dirty = true
		return result{purged: n}
	}
	if st.Msgs == 0 {
		return result{}
	}
	if req.Subject == "" && req.Sequence == 0 && req.Keep == 0 {
		n := st.Msgs
		ap.batch.PurgeAll(s.id)
		s.coldPurgedLocked(ap)
		freed := st.Bytes
		st.Msgs, st.Bytes = 0, 0
		s.bytesChangedLocked(ap, -int64(freed))
		st.FirstSeq, st.FirstTime = st.LastSeq+1, 0
		s.subjectsPurgedLocked()
		s.schedulesPurgedLocked()
		for _, c := range s.mu.cons {
			c.purged(st.LastSeq+1, true)
		}
		s.mu.dirty = true
		return result{purged: n}
	}
	victims, err := s.purgeVictimsLocked(req, ap)
	if err != nil {
		return result{err: err}
	}
	for i := range victims {
		if err := s.removeMsgLocked(&victims[i], ap); err != nil {
			return result{err: err}
		}
	}
	if err := s.purgedConsumersLocked(req.Subject, ap); err != nil {
		return result{err: err}
	}
	return result{purged: uint64(len(victims))}
}

// purgedConsumersLocked moves consumers past a partial purge, as
// nats-server does: without a subject, or for a consumer seeing more than
// the subject, to the stream's new first sequence; for one seeing only
// within the subject, to the subject's first message left.
func (s *stream) purgedConsumersLocked(subj string, ap *applier) error {
	if err := ap.visible(); err != nil {
		return err
	}
	st := &s.mu.state
	first := st.FirstSeq
	if st.Msgs == 0 {
		first = st.LastSeq + 1
	}
	if subj == ">" {
		subj = ""
	}
	var subjFirst uint64 // the subject's first message left; 0 until looked up
	for _, c := range s.mu.cons {
		next := first
		if subj != "" {
			filters := *c.filt.Load()
			within := len(filters) > 0
			sees := len(filters) == 0
			for _, f := range filters {
				within = within && subject.SubsetOf(f, subj)
				sees = sees || subject.SubsetOf(subj, f)
			}
			switch {
			case within:
				if subjFirst == 0 {
					subjFirst = st.LastSeq + 1
					if m, err := ap.rd.NextMsg(s.id, first, subj); err == nil {
						subjFirst = m.Seq
					}
				}
				next = subjFirst
			case !sees:
				continue
			}
		}
		c.purged(next, false)
	}
	return nil
}

// purgeVictimsLocked lists the messages a filtered purge removes.
func (s *stream) purgeVictimsLocked(req api.StreamPurgeRequest, ap *applier) ([]store.Message, error) {
	if err := ap.visible(); err != nil {
		return nil, err
	}
	st := s.mu.state
	upTo := st.LastSeq + 1
	if req.Sequence > 0 {
		upTo = min(upTo, req.Sequence)
	}
	var out []store.Message
	collect := func(m *store.Message) error {
		if req.Subject == "" || subject.Matches(req.Subject, m.Subject) {
			out = append(out, store.Message{Seq: m.Seq, Subject: m.Subject, Header: m.Header, Data: m.Data,
				Cold: m.Cold, HdrLen: m.HdrLen, DataLen: m.DataLen})
		}
		return nil
	}
	if err := ap.rd.ScanMsgs(s.id, st.FirstSeq, upTo, collect); err != nil {
		return nil, api.NewStreamStoreFailedError(err)
	}
	if req.Keep > 0 {
		out = keepNewest(out, req.Keep)
	}
	return out, nil
}

// keepNewest drops from victims the newest keep messages of the whole
// selection: nats-server's purge keeps the newest keep messages matching
// the filter, not keep per subject.
func keepNewest(victims []store.Message, keep uint64) []store.Message {
	if uint64(len(victims)) <= keep {
		return nil
	}
	return victims[:uint64(len(victims))-keep]
}

// removeAckedLocked applies retention to acknowledged messages: a work
// queue drops a message once acknowledged; an interest stream once every
// consumer whose filter matches it is done with it.
func (s *stream) removeAckedLocked(seqs []uint64, ap *applier) error {
	if s.mu.detached {
		// The consumers are parked: without them retention cannot
		// decide, so it waits (see stream.hold).
		return nil
	}
	if err := ap.visible(); err != nil {
		return err
	}
	for _, seq := range seqs {
		m, err := ap.rd.LoadMsg(s.id, seq)
		if err != nil {
			continue // already gone
		}
		if s.mu.cfg.Retention == api.InterestPolicy {
			done := true
			for _, c := range s.mu.cons {
				if !c.doneWith(seq, m.Subject) {
					done = false
					break
				}
			}
			if !done {
				continue
			}
		}
		if err := s.removeMsgLocked(&m, ap); err != nil {
			return err
		}
	}
	return nil
}

// dropUninterestedLocked applies interest retention after a consumer went
// away: from seq on, every message no remaining consumer needs is
// removed, and with no consumer left every message is (as nats-server
// does).
func (s *stream) dropUninterestedLocked(from uint64, ap *applier) error {
	st := &s.mu.state
	if s.mu.cfg.Retention != api.InterestPolicy || st.Msgs == 0 || s.mu.detached {
		return nil
	}
	if len(s.mu.cons) == 0 {
		return s.purgeLocked(api.StreamPurgeRequest{}, 0, ap).err
	}
	if err := ap.visible(); err != nil {
		return err
	}
	type victim struct {
		seq  uint64
		subj string
		size uint64
	}
	var victims []victim
	err := ap.rd.ScanMsgs(s.id, max(from, st.FirstSeq), st.LastSeq+1, func(m *store.Message) error {
		for _, c := range s.mu.cons {
			if !c.doneWith(m.Seq, m.Subject) {
				return nil
			}
		}
		victims = append(victims, victim{m.Seq, strings.Clone(m.Subject), storedSize(m)})
		return nil
	})
	if err != nil {
		return api.NewStreamStoreFailedError(err)
	}
	for _, v := range victims {
		if err := s.removeLocked(v.seq, v.subj, v.size, ap); err != nil {
			return err
		}
	}
	return nil
}
