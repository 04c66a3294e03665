package jetstream

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// Message schedules (allow_msg_schedules), as nats-server 2.15 has them:
// a message with "Nats-Schedule: @at <RFC 3339 time>", "@every
// <duration>" or a cron pattern is a schedule, the one message of its subject (it rolls the
// subject up). When it is due the stream itself stores a copy of it on
// Nats-Schedule-Target, without the scheduling headers and with
// Nats-Scheduler (the schedule's subject) and Nats-Schedule-Next ("purge"
// for @at, which then removes the schedule; the next time for @every).
// Nats-Schedule-TTL becomes the copy's Nats-TTL, Nats-Schedule-Rollup its
// Nats-Rollup, and with Nats-Schedule-Source the copy carries the last
// message of that subject instead (the schedule's own when there is none).
//
// The schedules of a stream are derived state: a map from subject to the
// schedule message's sequence and next time, changed only on the apply
// path (a store, a removal, a purge) and rebuilt from the stored messages
// when the stream is loaded, at start-up or when a partition gets a new
// leader. The stream's expiry timer covers the earliest; a due schedule
// is fired by the expire proposal, which stores the copy through
// storeMsgLocked like any message, so an R3 stream replicates it and only
// the leader fires.
//
// Cron patterns (cron.go) and the named ones (@hourly, @daily, …) repeat
// too, in Nats-Schedule-Time-Zone's zone (UTC without it; @at and @every
// take no zone).

const (
	hdrSchedule         = "Nats-Schedule"
	hdrScheduleTimeZone = "Nats-Schedule-Time-Zone"
	hdrScheduleTTL      = "Nats-Schedule-TTL"
	hdrScheduleRollup   = "Nats-Schedule-Rollup"
	hdrScheduleTarget   = "Nats-Schedule-Target"
	hdrScheduleSource   = "Nats-Schedule-Source"
	hdrScheduler        = "Nats-Scheduler"
	hdrScheduleNext     = "Nats-Schedule-Next"
	scheduleNextPurge   = "purge"
)

// schedEntry is one schedule: its message and when it fires next.
type schedEntry struct {
	seq  uint64
	next int64
}

// nextSchedule is when the schedule in hdr fires first (or next, ts being
// when it was stored or last due; zero time without a Nats-Schedule
// header); repeat says it fires again. err is nats-server's refusal of an
// invalid pattern or time zone.
func nextSchedule(hdr []byte, ts int64, now time.Time) (next time.Time, repeat bool, err *api.Error) {
	if len(hdr) == 0 {
		return time.Time{}, false, nil
	}
	var loc *time.Location
	if hasHeader(hdr, hdrScheduleTimeZone) {
		tz := string(headerValue(hdr, hdrScheduleTimeZone))
		l, lerr := time.LoadLocation(tz)
		if tz == "" || lerr != nil {
			return time.Time{}, false, api.NewMessageSchedulesTimeZoneInvalidError()
		}
		loc = l
	}
	invalid := api.NewMessageSchedulesPatternInvalidError
	pattern := string(headerValue(hdr, hdrSchedule))
	switch {
	case pattern == "":
		return time.Time{}, false, nil
	case strings.HasPrefix(pattern, "@at "):
		t, perr := time.Parse(time.RFC3339, pattern[4:])
		if perr != nil || loc != nil {
			return time.Time{}, false, invalid()
		}
		return t, false, nil
	case strings.HasPrefix(pattern, "@every "):
		d, perr := time.ParseDuration(pattern[7:])
		if perr != nil || d < time.Second || loc != nil {
			return time.Time{}, false, invalid()
		}
		// Fires once however many periods were missed (a restart).
		next = time.Unix(0, ts).UTC().Round(time.Second).Add(d)
		if n := now.UTC(); next.Before(n) {
			next = n.Round(time.Second).Add(d)
		}
		return next, true, nil
	}
	spec, ok := parseCronSpec(pattern)
	if !ok {
		return time.Time{}, false, invalid()
	}
	if loc == nil {
		loc = time.UTC
	}
	next, ok = spec.next(time.Unix(0, ts), loc)
	if ok && next.Before(now) {
		next, ok = spec.next(now.Round(time.Second), loc)
	}
	if !ok {
		return time.Time{}, false, invalid()
	}
	return next.UTC(), true, nil
}

// hasHeader says whether hdr has key, even with an empty value. It runs
// for every publish with headers, so it allocates nothing.
func hasHeader(hdr []byte, key string) bool {
	for i := bytes.Index(hdr, []byte("\r\n")); i >= 0; {
		line := hdr[i+2:]
		if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
			return true
		}
		next := bytes.Index(line, []byte("\r\n"))
		if next < 0 {
			break
		}
		i += 2 + next
	}
	return false
}

// checkScheduleLocked applies nats-server's checks of the scheduling
// headers of a client's publish on subj, in its order, and returns the
// header to store: a valid schedule gets "Nats-Rollup: sub" when it has no
// roll-up. Copies the stream makes of its schedules skip it.
func (s *stream) checkScheduleLocked(subj string, hdr []byte, ap *applier) ([]byte, error) {
	cfg := s.mu.cfg
	allow := cfg.AllowMsgSchedules
	next, _, serr := nextSchedule(hdr, s.e.opts.Now().UnixNano(), s.e.opts.Now())
	switch {
	case serr != nil && !allow:
		return nil, api.NewMessageSchedulesDisabledError()
	case serr != nil:
		return nil, serr
	case !next.IsZero():
		if !allow {
			return nil, api.NewMessageSchedulesDisabledError()
		}
		var err error
		if hdr, err = checkScheduleHeaders(cfg, subj, hdr); err != nil {
			return nil, err
		}
	}
	if v := headerValue(hdr, hdrScheduleNext); len(v) > 0 {
		// A client may send Nats-Schedule-Next only to purge a schedule.
		sched := string(headerValue(hdr, hdrScheduler))
		switch {
		case string(v) != scheduleNextPurge, sched == "", sched == subj, !subject.ValidLiteralString(sched):
			return nil, api.NewMessageSchedulesSchedulerInvalidError()
		case !allow:
			return nil, api.NewMessageSchedulesDisabledError()
		}
		last, err := s.lastOnSubjectLocked(sched, ap)
		if err != nil {
			return nil, err
		}
		if last != nil && len(headerValue(last.Header, hdrSchedule)) == 0 {
			return nil, api.NewMessageSchedulesSchedulerInvalidError()
		}
	} else if len(headerValue(hdr, hdrScheduler)) > 0 {
		return nil, api.NewMessageSchedulesSchedulerInvalidError()
	}
	if len(headerValue(hdr, api.HeaderStreamSource)) > 0 {
		// Only sourcing writes this header, and Contrail has no sourcing.
		return nil, api.NewMessageSourceHdrNotAllowedError()
	}
	return hdr, nil
}

// checkScheduleHeaders checks a valid schedule's companion headers.
func checkScheduleHeaders(cfg *api.StreamConfig, subj string, hdr []byte) ([]byte, error) {
	ttl := string(headerValue(hdr, hdrScheduleTTL))
	if _, ok := parseTTL(ttl); ttl != "" && !ok {
		return nil, api.NewMessageSchedulesTTLInvalidError()
	}
	if r := string(headerValue(hdr, hdrScheduleRollup)); r != "" && r != "sub" {
		return nil, api.NewMessageSchedulesRollupInvalidError()
	}
	if ttl != "" && !cfg.AllowMsgTTL {
		return nil, api.NewMessageTTLDisabledError()
	}
	target := string(headerValue(hdr, hdrScheduleTarget))
	if target == "" || !subject.ValidLiteralString(target) || target == subj {
		return nil, api.NewMessageSchedulesTargetInvalidError()
	}
	source := string(headerValue(hdr, hdrScheduleSource))
	if source != "" && (source == target || source == subj || !subject.ValidLiteralString(source)) {
		return nil, api.NewMessageSchedulesSourceInvalidError()
	}
	if !capturesAny(cfg, target) {
		return nil, api.NewMessageSchedulesTargetInvalidError()
	}
	if source != "" && !capturesAny(cfg, source) {
		return nil, api.NewMessageSchedulesSourceInvalidError()
	}
	switch r := strings.ToLower(string(headerValue(hdr, api.HeaderRollup))); r {
	case "":
		hdr = addHeader(hdr, api.HeaderRollup, "sub")
	case "sub":
	default:
		return nil, api.NewMessageSchedulesRollupInvalidError()
	}
	return hdr, nil
}

func capturesAny(cfg *api.StreamConfig, subj string) bool {
	for _, f := range cfg.Subjects {
		if subject.Overlaps(f, subj) {
			return true
		}
	}
	return false
}

// scheduleStoredLocked updates the schedules for a message just stored
// at seq on subj, as nats-server's stores do: a schedule is added (or
// replaces its subject's); any other message, except one the stream's
// schedules produced, ends its subject's schedule; a produced copy of a
// repeating schedule moves that schedule to its next time.
func (s *stream) scheduleStoredLocked(seq uint64, subj string, hdr []byte, ts int64) {
	if !s.mu.cfg.AllowMsgSchedules {
		return
	}
	if s.mu.sched == nil {
		s.mu.sched = map[string]schedEntry{}
	}
	next, _, serr := nextSchedule(hdr, ts, s.e.opts.Now())
	scheduler := string(headerValue(hdr, hdrScheduler))
	switch {
	case serr == nil && !next.IsZero():
		s.mu.sched[subj] = schedEntry{seq: seq, next: next.UnixNano()}
		s.mu.schedDirty = true
	case scheduler == "":
		s.unscheduleLocked(subj, 0)
	}
	if v := string(headerValue(hdr, hdrScheduleNext)); v != "" && v != scheduleNextPurge && scheduler != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			if e, ok := s.mu.sched[scheduler]; ok {
				e.next = t.UnixNano()
				s.mu.sched[scheduler] = e
				s.mu.schedDirty = true
			}
		}
	}
}

// unscheduleLocked ends subj's schedule, if seq is its message (any
// message when seq is 0).
func (s *stream) unscheduleLocked(subj string, seq uint64) {
	if e, ok := s.mu.sched[subj]; ok && (seq == 0 || e.seq == seq) {
		delete(s.mu.sched, subj)
		s.mu.schedDirty = true
	}
}

// schedulesPurgedLocked ends every schedule: the stream was emptied.
func (s *stream) schedulesPurgedLocked() {
	if len(s.mu.sched) > 0 {
		clear(s.mu.sched)
		s.mu.schedDirty = true
	}
}

// nextScheduleLocked is when the earliest schedule fires, 0 if none.
func (s *stream) nextScheduleLocked() int64 {
	if s.mu.schedDirty {
		s.mu.schedDirty = false
		s.mu.schedNext = 0
		for _, e := range s.mu.sched {
			if s.mu.schedNext == 0 || e.next < s.mu.schedNext {
				s.mu.schedNext = e.next
			}
		}
	}
	return s.mu.schedNext
}

// purgeSchedulerLocked removes the schedule a stored copy says is done
// (Nats-Schedule-Next: purge), after the copy is stored.
func (s *stream) purgeSchedulerLocked(hdr []byte, ap *applier) error {
	if !s.mu.cfg.AllowMsgSchedules || string(headerValue(hdr, hdrScheduleNext)) != scheduleNextPurge {
		return nil
	}
	sched := string(headerValue(hdr, hdrScheduler))
	if sched == "" {
		return nil
	}
	return s.purgeLocked(api.StreamPurgeRequest{Subject: sched}, 0, ap).err
}

// fireSchedulesLocked stores a copy of every schedule due at now, in
// sequence order. A schedule whose message is gone or no longer valid is
// dropped.
func (s *stream) fireSchedulesLocked(now int64, ap *applier) error {
	if next := s.nextScheduleLocked(); next == 0 || next > now {
		return nil
	}
	type due struct {
		subj string
		e    schedEntry
	}
	var list []due
	for subj, e := range s.mu.sched {
		if e.next <= now {
			list = append(list, due{subj, e})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].e.seq < list[j].e.seq })
	if err := ap.visible(); err != nil {
		return err
	}
	for _, d := range list {
		m, err := ap.rd.LoadMsgOn(s.id, d.e.seq, d.subj)
		if errors.Is(err, store.ErrNotFound) {
			s.unscheduleLocked(d.subj, d.e.seq)
			continue
		}
		if err != nil {
			return api.NewStreamStoreFailedError(err)
		}
		p, ok, err := s.scheduledCopyLocked(&m, d.e.next, ap)
		if err != nil {
			return err
		}
		if !ok {
			s.unscheduleLocked(d.subj, d.e.seq)
			continue
		}
		r := s.storeMsgLocked(p, ap)
		if r.err == nil && s.mu.tr.republish != nil && p.acct != nil {
			s.mu.schedOut = append(s.mu.schedOut, schedCopy{p, r.seq})
		}
		if r.err != nil {
			// Refused (a limit): a repeating schedule tries again at its
			// next time, a one-off is dropped.
			s.e.log.Warn("scheduled message not stored", "stream", s.mu.cfg.Name, "schedule", d.subj, "err", r.err)
			if next := headerValue(p.hdr, hdrScheduleNext); string(next) == scheduleNextPurge {
				s.unscheduleLocked(d.subj, d.e.seq)
			} else if t, err := time.Parse(time.RFC3339Nano, string(next)); err == nil {
				s.mu.sched[d.subj] = schedEntry{seq: d.e.seq, next: t.UnixNano()}
				s.mu.schedDirty = true
			}
		}
	}
	return nil
}

// schedCopy is a stored copy of a schedule, to republish.
type schedCopy struct {
	p   *proposal
	seq uint64
}

// republishScheduled republishes the stored copies that are durable, as
// a client's message is once acknowledged. It runs when an expire
// proposal completes: the copies it stored are durable then, and those
// of a later group wait for that group's.
func (s *stream) republishScheduled() {
	s.mu.Lock()
	durable := s.durable.Load()
	var ready []schedCopy
	keep := s.mu.schedOut[:0]
	for _, c := range s.mu.schedOut {
		if c.seq <= durable {
			ready = append(ready, c)
		} else {
			keep = append(keep, c)
		}
	}
	s.mu.schedOut = keep
	s.mu.Unlock()
	for _, c := range ready {
		s.republish(c.p, c.seq)
	}
}

// scheduledCopyLocked builds the message schedule m produces when it
// fires at ts; ok is false when m is no valid schedule any more.
func (s *stream) scheduledCopyLocked(m *store.Message, ts int64, ap *applier) (*proposal, bool, error) {
	next, repeat, serr := nextSchedule(m.Header, ts, s.e.opts.Now())
	target := string(headerValue(m.Header, hdrScheduleTarget))
	ttl := string(headerValue(m.Header, hdrScheduleTTL))
	if _, valid := parseTTL(ttl); serr != nil || next.IsZero() || target == "" || ttl != "" && !valid {
		return nil, false, nil
	}
	rollup := string(headerValue(m.Header, hdrScheduleRollup))
	body, src := m.Data, m.Header
	if source := string(headerValue(m.Header, hdrScheduleSource)); source != "" {
		last, err := s.lastOnSubjectLocked(source, ap)
		if err != nil {
			return nil, false, err
		}
		if last != nil {
			body, src = last.Data, last.Header
		}
	}
	hdr := dropHeaders(src, func(k string) bool {
		return strings.HasPrefix(k, hdrSchedule) || strings.HasPrefix(k, "Nats-Expected-") ||
			k == api.HeaderMsgID || k == api.HeaderTTL || k == api.HeaderRollup
	})
	hdr = addHeader(hdr, hdrScheduler, m.Subject)
	if repeat {
		hdr = addHeader(hdr, hdrScheduleNext, next.Format(time.RFC3339Nano))
	} else {
		hdr = addHeader(hdr, hdrScheduleNext, scheduleNextPurge)
	}
	if ttl != "" {
		hdr = addHeader(hdr, api.HeaderTTL, ttl)
	}
	if rollup != "" {
		hdr = addHeader(hdr, api.HeaderRollup, rollup)
	}
	p := &proposal{s: s, acct: s.mu.owner, kind: propMsg, subject: target, hdr: hdr, data: bytes.Clone(body), scheduled: true}
	return p, true, nil
}

// dropHeaders returns a copy of hdr without the lines whose key drop
// selects.
func dropHeaders(hdr []byte, drop func(key string) bool) []byte {
	if len(hdr) == 0 {
		return nil
	}
	lines := bytes.Split(hdr, []byte("\r\n"))
	out := append([]byte(nil), lines[0]...)
	out = append(out, "\r\n"...)
	for _, line := range lines[1:] {
		if len(line) == 0 {
			continue
		}
		if i := bytes.IndexByte(line, ':'); i > 0 && drop(string(line[:i])) {
			continue
		}
		out = append(append(out, line...), "\r\n"...)
	}
	return append(out, "\r\n"...)
}

// loadSchedules rebuilds a stream's schedules from its messages when it
// is loaded; the stream is not shared yet.
func (s *stream) loadSchedules(st *store.Store) error {
	if !s.mu.cfg.AllowMsgSchedules || s.mu.state.Msgs == 0 {
		return nil
	}
	now := s.e.opts.Now()
	s.mu.sched = map[string]schedEntry{}
	return st.ScanMsgs(s.id, s.mu.state.FirstSeq, s.mu.state.LastSeq+1, func(m *store.Message) error {
		if len(m.Header) == 0 || m.Cold {
			return nil
		}
		if next, _, err := nextSchedule(m.Header, m.Time, now); err == nil && !next.IsZero() {
			s.mu.sched[strings.Clone(m.Subject)] = schedEntry{seq: m.Seq, next: next.UnixNano()}
			s.mu.schedDirty = true
		}
		return nil
	})
}
