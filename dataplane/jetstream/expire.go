package jetstream

import (
	"errors"
	"math"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// armTimerLocked schedules the stream's next expiry work: max_age of the
// oldest message, the earliest per-message TTL, and pruning of the
// duplicate window. Expiry runs on a timer, not on the next write, so an
// idle stream still ages out. A detached stream arms nothing: its account
// is not enabled, and nats-server does not age out a stopped stream.
func (s *stream) armTimerLocked() {
	if s.mu.removed || s.mu.detached {
		return
	}
	cfg, st := s.mu.cfg, &s.mu.state
	var target int64
	consider := func(t int64) {
		if t > 0 && (target == 0 || t < target) {
			target = t
		}
	}
	if cfg.MaxAge > 0 && st.Msgs > 0 {
		// ageNext is the oldest message that can age out (messages with
		// Nats-TTL "never" cannot); zero means "not known", so use the first.
		oldest := s.mu.ageNext
		if oldest == 0 || oldest < st.FirstTime {
			oldest = st.FirstTime
		}
		consider(oldest + int64(cfg.MaxAge))
	}
	consider(s.mu.nextTTL)
	consider(s.nextScheduleLocked())
	if len(s.mu.dedup) > 0 && cfg.Duplicates > 0 {
		if s.mu.dedupPruneAt == 0 {
			s.mu.dedupPruneAt = s.e.opts.Now().Add(cfg.Duplicates).UnixNano()
		}
		consider(s.mu.dedupPruneAt)
	}
	if target == 0 || (s.mu.timerAt != 0 && s.mu.timerAt <= target) {
		return
	}
	d := time.Duration(target - s.e.opts.Now().UnixNano())
	s.mu.timerAt = target
	if s.mu.timer == nil {
		s.mu.timer = time.AfterFunc(max(d, 0), s.expire)
	} else {
		s.mu.timer.Reset(max(d, 0))
	}
}

// expire hands the expiry work to the apply path.
func (s *stream) expire() {
	s.mu.Lock()
	s.mu.timerAt = 0
	s.mu.Unlock()
	s.ap.submit(&proposal{s: s, kind: propExpire, done: func(_ *proposal, r result) {
		if r.err == nil {
			s.republishScheduled()
		}
	}})
}

// expireLocked removes what has aged out.
func (s *stream) expireLocked(ap *applier) error {
	cfg, st := s.mu.cfg, &s.mu.state
	now := s.e.opts.Now().UnixNano()
	if cfg.MaxAge > 0 && st.Msgs > 0 {
		if err := s.expireAgedLocked(now-int64(cfg.MaxAge), ap); err != nil {
			return err
		}
	}
	if s.mu.nextTTL != 0 && s.mu.nextTTL <= now {
		if err := s.expireTTLLocked(now, ap); err != nil {
			return err
		}
	}
	if err := s.fireSchedulesLocked(now, ap); err != nil {
		return err
	}
	if s.mu.dedupPruneAt != 0 && s.mu.dedupPruneAt <= now {
		cutoff := now - int64(cfg.Duplicates)
		for id, d := range s.mu.dedup {
			if d.ts < cutoff {
				delete(s.mu.dedup, id)
			}
		}
		if err := ap.visible(); err != nil {
			return err
		}
		if _, err := ap.st.ExpireDedup(ap.batch, s.id, cutoff); err != nil {
			return api.NewStreamStoreFailedError(err)
		}
		s.mu.dedupPruneAt = 0
	}
	return nil
}

// expireAgedLocked removes messages older than cutoff, except those
// published with Nats-TTL "never", and leaves a delete marker where a
// subject lost its last message and the stream asks for markers.
func (s *stream) expireAgedLocked(cutoff int64, ap *applier) error {
	if err := ap.visible(); err != nil {
		return err
	}
	type victim struct {
		seq     uint64
		subject string
		size    uint64
	}
	var victims []victim
	stop := errors.New("stop")
	s.mu.ageNext = 0
	err := ap.rd.ScanMsgs(s.id, s.mu.state.FirstSeq, s.mu.state.LastSeq+1, func(m *store.Message) error {
		if m.TTL < 0 {
			return nil // exempt from max_age
		}
		if m.Time > cutoff {
			s.mu.ageNext = m.Time
			return stop
		}
		victims = append(victims, victim{m.Seq, m.Subject, storedSize(m)})
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return api.NewStreamStoreFailedError(err)
	}
	markers := s.mu.cfg.SubjectDeleteMarkerTTL
	if markers > 0 && len(victims) > 0 {
		if _, err := s.subjectsLocked(ap); err != nil {
			return err
		}
	}
	for _, v := range victims {
		if err := s.removeLocked(v.seq, v.subject, v.size, ap); err != nil {
			return err
		}
		if markers > 0 && s.mu.subjects[v.subject] == nil {
			if err := s.storeMarkerLocked(v.subject, markers, ap); err != nil {
				return err
			}
		}
	}
	return nil
}

// storeMarkerLocked writes a subject delete marker: an empty message that
// tells watchers (KV) the subject's last value aged out, itself kept for
// the marker TTL.
func (s *stream) storeMarkerLocked(subj string, ttl time.Duration, ap *applier) error {
	hdr := appendHeaderBlock(nil, "", api.HeaderMarkerReason, "MaxAge", api.HeaderTTL, ttl.String())
	r := s.storeMsgLocked(&proposal{s: s, kind: propMsg, subject: subj, hdr: hdr}, ap)
	return r.err
}

// expireTTLLocked removes messages whose Nats-TTL has passed and finds the
// next TTL to wait for.
func (s *stream) expireTTLLocked(now int64, ap *applier) error {
	if err := ap.visible(); err != nil {
		return err
	}
	type due struct {
		seq     uint64
		expires int64
	}
	var list []due
	if err := ap.rd.Expiring(s.id, now+1, func(seq uint64, expires int64) error {
		list = append(list, due{seq, expires})
		return nil
	}); err != nil {
		return api.NewStreamStoreFailedError(err)
	}
	markers := s.mu.cfg.SubjectDeleteMarkerTTL
	if markers > 0 && len(list) > 0 {
		if _, err := s.subjectsLocked(ap); err != nil {
			return err
		}
	}
	for _, d := range list {
		ap.batch.DeleteTTL(s.id, d.expires, d.seq)
		if d.seq < s.mu.state.FirstSeq || s.mu.state.Msgs == 0 {
			continue
		}
		if err := ap.visible(); err != nil {
			return err
		}
		m, err := ap.rd.LoadMsg(s.id, d.seq)
		if err != nil || m.Expires() != d.expires {
			continue // already removed by a limit, a purge or a delete
		}
		if err := s.removeLocked(m.Seq, m.Subject, storedSize(&m), ap); err != nil {
			return err
		}
		// A subject's last message expiring by its TTL leaves a delete
		// marker too (not a marker expiring), as on nats-server.
		if markers > 0 && s.mu.subjects[m.Subject] == nil && len(headerValue(m.Header, api.HeaderMarkerReason)) == 0 {
			if err := s.storeMarkerLocked(m.Subject, markers, ap); err != nil {
				return err
			}
		}
	}
	if err := ap.visible(); err != nil {
		return err
	}
	s.mu.nextTTL = 0
	stop := errors.New("stop")
	err := ap.rd.Expiring(s.id, math.MaxInt64, func(_ uint64, expires int64) error {
		s.mu.nextTTL = expires
		return stop
	})
	if err != nil && !errors.Is(err, stop) {
		return api.NewStreamStoreFailedError(err)
	}
	return nil
}
