package jetstream

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/tier"
)

// Cold storage of a stream (tiered storage). Sealed ranges of a stream
// keep their message records as stubs (store/tier.go) and their bodies
// in segment objects; the manifest (one store record per segment) says
// which object holds which range. Everything here that changes the
// manifest runs on the stream's apply path, in the batch of the change
// that causes it, so a commit is the unit of truth for cold data as for
// hot and a replicated stream replicates its manifest with its writes.
//
// Invariant: every message record in a committed segment's range
// [First, Last] is a stub whose body that segment holds; a segment's
// Live and LiveBytes count those records.

// coldSeg is one manifest entry in memory. Its identity (range, key,
// size, index offset) never changes once committed, so readers use it
// without the stream's lock; the live counts and the erased mark change
// under s.mu, each change written to the manifest in the same batch.
type coldSeg struct {
	seg store.Segment
}

func (c *coldSeg) ref() tier.Ref {
	return tier.Ref{Key: c.seg.Key, Size: c.seg.Size, IndexOff: c.seg.IndexOff}
}

// coldState is a stream's cold part, guarded by the stream's mu except
// published, which readers load without it.
type coldState struct {
	segs      []*coldSeg // in sequence order, ranges disjoint
	msgs      uint64     // live messages in segments
	bytes     uint64     // their bytes
	published atomic.Pointer[[]*coldSeg]
	// Hot messages deleted with erase lie in [eraseLo, eraseHi] (none
	// when eraseHi is 0): a segment sealed before such a delete, and
	// committed after it, holds the erased body, so its commit marks it
	// for rewriting. Kept as a range, not a list: a bulk erase costs
	// nothing, and the cost of a wide range is at most an extra rewrite.
	eraseLo, eraseHi uint64
}

// publishLocked makes the segment list visible to readers: a new slice
// whenever segments are added or dropped, never mutated after.
func (s *stream) publishColdLocked() {
	segs := append([]*coldSeg(nil), s.mu.cold.segs...)
	s.mu.cold.published.Store(&segs)
}

// floorLocked is the first sequence not covered by a segment.
func (s *stream) coldFloorLocked() uint64 {
	if n := len(s.mu.cold.segs); n > 0 {
		return s.mu.cold.segs[n-1].seg.Last + 1
	}
	return 0
}

// loadCold restores the manifest at start-up.
func (s *stream) loadCold(rd *store.Recovery) error {
	err := rd.Segments(s.id, func(seg store.Segment) error {
		s.mu.cold.segs = append(s.mu.cold.segs, &coldSeg{seg: seg})
		s.mu.cold.msgs += seg.Live
		s.mu.cold.bytes += seg.LiveBytes
		return nil
	})
	if err != nil {
		return fmt.Errorf("jetstream: stream %q manifest: %w", s.mu.cfg.Name, err)
	}
	s.publishColdLocked()
	return nil
}

// segmentFor finds the published segment holding seq.
func segmentFor(segs []*coldSeg, seq uint64) (int, *coldSeg) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].seg.Last >= seq })
	if i < len(segs) && segs[i].seg.First <= seq {
		return i, segs[i]
	}
	return -1, nil
}

func (s *stream) segmentLocked(seq uint64) (int, *coldSeg) {
	segs := s.mu.cold.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].seg.Last >= seq })
	if i < len(segs) && segs[i].seg.First <= seq {
		return i, segs[i]
	}
	return -1, nil
}

// coldRemovedLocked accounts for the removal of message seq (size bytes)
// if it was cold: its segment's live counts drop, and a segment with
// nothing live left leaves the manifest and its object is queued for
// deletion, in the same batch. Called by removeLocked for every removal.
func (s *stream) coldRemovedLocked(seq, size uint64, ap *applier) {
	i, cs := s.segmentLocked(seq)
	if cs == nil {
		return
	}
	cs.seg.Live--
	cs.seg.LiveBytes -= min(cs.seg.LiveBytes, size)
	s.mu.cold.msgs--
	s.mu.cold.bytes -= min(s.mu.cold.bytes, size)
	if cs.seg.Live > 0 {
		ap.batch.PutSegment(s.id, &cs.seg)
		return
	}
	s.dropSegmentLocked(cs, ap)
	s.mu.cold.segs = append(s.mu.cold.segs[:i], s.mu.cold.segs[i+1:]...)
	s.publishColdLocked()
}

// dropSegmentLocked removes a segment's manifest entry and queues its
// object for deletion.
func (s *stream) dropSegmentLocked(cs *coldSeg, ap *applier) {
	ap.batch.DeleteSegment(s.id, cs.seg.First)
	ap.batch.PutPendingObject(store.PendingObject{Stream: s.id, Key: cs.seg.Key, Garbage: true, Time: s.e.opts.Now().UnixNano()})
	ap.garbage = true
}

// coldPurgedLocked drops every segment: the stream's messages were all
// removed at once (purge, or the stream deleted).
func (s *stream) coldPurgedLocked(ap *applier) {
	if len(s.mu.cold.segs) == 0 {
		return
	}
	for _, cs := range s.mu.cold.segs {
		s.dropSegmentLocked(cs, ap)
	}
	s.mu.cold.segs, s.mu.cold.msgs, s.mu.cold.bytes = nil, 0, 0
	s.publishColdLocked()
}

// markEraseLocked asks for seq's segment to be rewritten: its message
// was deleted with erase (MSG.DELETE without no_erase). The mark goes
// into the manifest entry in the delete's batch, so a restart (or a
// replica taking over) still rewrites the segment; a segment the delete
// emptied is gone with its object already.
func (s *stream) markEraseLocked(seq uint64, ap *applier) {
	_, cs := s.segmentLocked(seq)
	switch {
	case cs == nil && s.mu.cold.eraseHi == 0:
		s.mu.cold.eraseLo, s.mu.cold.eraseHi = seq, seq
	case cs == nil:
		s.mu.cold.eraseLo, s.mu.cold.eraseHi = min(s.mu.cold.eraseLo, seq), max(s.mu.cold.eraseHi, seq)
	case !cs.seg.Erased:
		cs.seg.Erased = true
		ap.batch.PutSegment(s.id, &cs.seg)
	}
}

// erasedHotLocked reports whether seq may be a hot message deleted with
// erase (see coldState.eraseLo).
func (s *stream) erasedHotLocked(seq uint64) bool {
	c := &s.mu.cold
	return c.eraseHi != 0 && c.eraseLo <= seq && seq <= c.eraseHi
}

// tieredThroughLocked forgets erases of hot messages up to last: a
// segment now covers them, and later ones start above it.
func (s *stream) tieredThroughLocked(last uint64) {
	c := &s.mu.cold
	switch {
	case c.eraseHi == 0 || last < c.eraseLo:
	case last >= c.eraseHi:
		c.eraseLo, c.eraseHi = 0, 0
	default:
		c.eraseLo = last + 1
	}
}

// rewriteWantedLocked returns a segment to rewrite: one a message was
// erased from, or one less than half live (its object mostly holds
// deleted messages).
func (s *stream) rewriteWantedLocked() *coldSeg {
	for _, cs := range s.mu.cold.segs {
		if cs.seg.Live > 0 && (cs.seg.Erased || cs.seg.Live*2 < cs.seg.Msgs) {
			return cs
		}
	}
	return nil
}

// rewriteColdLocked applies a segment rewrite: the new object (sl)
// holds the live messages of the segment whose object was oldKey, over
// the same range. It replaces the manifest entry and queues the old
// object for deletion; the stubs stay, since they name no object. If the
// segment changed meanwhile (dropped, rewritten) or holds a message the
// new object lacks, the new object is the garbage instead.
func (s *stream) rewriteColdLocked(sl *sealed, oldKey string, ap *applier) error {
	seg := sl.seg
	i, cs := s.segmentLocked(seg.First)
	garbage := func(key string) {
		ap.batch.PutPendingObject(store.PendingObject{Stream: s.id, Key: key, Garbage: true, Time: s.e.opts.Now().UnixNano()})
		ap.garbage = true
	}
	if cs == nil || cs.seg.Key != oldKey || cs.seg.First != seg.First || cs.seg.Last != seg.Last {
		garbage(seg.Key)
		return nil
	}
	if err := ap.visible(); err != nil {
		return err
	}
	have := make(map[uint64]uint64, len(sl.msgs))
	for i := range sl.msgs {
		have[sl.msgs[i].Seq] = storedSize(&sl.msgs[i])
	}
	seg.Live, seg.LiveBytes = 0, 0
	ok := true
	if err := ap.rd.MsgSeqs(s.id, seg.First, seg.Last+1, func(seq uint64) bool {
		size, in := have[seq]
		ok = ok && in
		seg.Live++
		seg.LiveBytes += size
		return ok
	}); err != nil {
		return err
	}
	if !ok || seg.Live == 0 {
		garbage(seg.Key)
		return nil
	}
	// A message deleted while the rewrite ran may be in the new object:
	// if the old segment had an erase to honour, the new one keeps the
	// mark until a rewrite finds only live messages. Decided from
	// committed state alone, so every replica decides alike.
	seg.Erased = cs.seg.Erased && seg.Live < uint64(len(sl.msgs))
	s.mu.cold.msgs += seg.Live - cs.seg.Live
	s.mu.cold.bytes += seg.LiveBytes - cs.seg.LiveBytes
	ap.batch.PutSegment(s.id, &seg)
	ap.batch.ForgetObject(s.id, seg.Key)
	garbage(oldKey)
	s.mu.cold.segs[i] = &coldSeg{seg: seg}
	s.publishColdLocked()
	return nil
}

// sealed is a segment uploaded and waiting for its commit: the manifest
// entry and what the segment holds of each message, to write the stubs.
type sealed struct {
	seg  store.Segment
	msgs []store.Message // metadata only: Seq, Subject, Time, TTL, HdrLen, DataLen
	// removed is LastSeq-Msgs of the stream in the view the seal read
	// msgs from (when removedKnown). That difference grows with every
	// message removed (or sequence skipped) and with nothing else, so
	// while it is unchanged at the commit, every message sealed is still
	// held and the commit need not read which are.
	removed      uint64
	removedKnown bool
}

// commitColdLocked applies a tiering commit: in one batch, each message
// of the segment still held becomes a stub, the manifest entry is
// written with the live counts, and the upload's pending record goes.
// Messages removed since the segment was sealed are simply not live in
// it; a segment with none left (or one overlapping the manifest, which
// a mover of another term may have left) is garbage instead.
func (s *stream) commitColdLocked(sl *sealed, ap *applier) error {
	seg := sl.seg
	if seg.First < s.coldFloorLocked() || seg.Last >= s.mu.state.LastSeq {
		ap.batch.PutPendingObject(store.PendingObject{Stream: s.id, Key: seg.Key, Garbage: true, Time: s.e.opts.Now().UnixNano()})
		ap.garbage = true
		return nil
	}
	held, all, err := s.sealedHeldLocked(sl, ap)
	if err != nil {
		return err
	}
	seg.Live, seg.LiveBytes = 0, 0
	j := 0
	for i := range sl.msgs {
		m := &sl.msgs[i]
		if !all {
			for j < len(held) && held[j] < m.Seq {
				j++
			}
			if j == len(held) || held[j] != m.Seq {
				// Gone since the seal: not live. If it went with
				// erase, the object holds what was erased.
				seg.Erased = seg.Erased || s.erasedHotLocked(m.Seq)
				continue
			}
		}
		m.Cold = true
		ap.batch.MarkCold(s.id, m)
		seg.Live++
		seg.LiveBytes += storedSize(m)
	}
	s.tieredThroughLocked(seg.Last)
	if seg.Live == 0 {
		ap.batch.PutPendingObject(store.PendingObject{Stream: s.id, Key: seg.Key, Garbage: true, Time: s.e.opts.Now().UnixNano()})
		ap.garbage = true
		return nil
	}
	ap.batch.PutSegment(s.id, &seg)
	ap.batch.ForgetObject(s.id, seg.Key)
	s.mu.cold.segs = append(s.mu.cold.segs, &coldSeg{seg: seg})
	s.mu.cold.msgs += seg.Live
	s.mu.cold.bytes += seg.LiveBytes
	s.publishColdLocked()
	if t := s.e.tiering; t != nil {
		t.committed(s.id, seg.First, seg.Last, seg.Size)
	}
	return nil
}

// sealedHeldLocked returns the sequences of [sl.seg.First, sl.seg.Last]
// the stream still holds; all says no message has gone since the seal
// read its view, so every one of sl.msgs is held and the commit neither
// reads the range nor waits for the group's writes to be readable.
func (s *stream) sealedHeldLocked(sl *sealed, ap *applier) (held []uint64, all bool, err error) {
	st := &s.mu.state
	if sl.removedKnown && st.LastSeq >= st.Msgs && st.LastSeq-st.Msgs == sl.removed {
		return nil, true, nil
	}
	if err := ap.visible(); err != nil {
		return nil, false, err
	}
	err = ap.rd.MsgSeqs(s.id, sl.seg.First, sl.seg.Last+1, func(seq uint64) bool {
		held = append(held, seq)
		return true
	})
	return held, false, err
}

// storedSize is what a message counts against byte limits, whether its
// body is here or in a segment.
func storedSize(m *store.Message) uint64 {
	if m.Cold {
		return uint64(len(m.Subject)+m.HdrLen+m.DataLen) + 16
	}
	return msgSize(m.Subject, m.Header, m.Data)
}

// errColdUnavailable is a cold message whose body could not be read:
// the object store is unreachable or the object failed its checks.
var errColdUnavailable = fmt.Errorf("cold message unavailable")

// hydrate fetches a cold message's header and data from its segment
// (through the node's block cache). It never runs on the apply path, and
// takes no stream or consumer lock while it waits. A message whose
// segment was dropped meanwhile reads as not found.
func (s *stream) hydrate(ctx context.Context, m *store.Message) error {
	if !m.Cold {
		return nil
	}
	t := s.e.tiering
	var segs []*coldSeg
	if p := s.mu.cold.published.Load(); p != nil {
		segs = *p
	}
	i, cs := segmentFor(segs, m.Seq)
	if cs == nil || t == nil {
		return fmt.Errorf("stream %d message %d: %w", s.id, m.Seq, store.ErrNotFound)
	}
	if i+1 < len(segs) && m.Seq-cs.seg.First >= (cs.seg.Last-cs.seg.First)/2 {
		// A sequential reader gets the next segment's start ready.
		t.cache.Prefetch(segs[i+1].ref())
	}
	rec, err := t.cache.Read(ctx, cs.ref(), m.Seq)
	if err != nil {
		t.coldReadErrors.Add(1)
		return fmt.Errorf("stream %d message %d: %w: %w", s.id, m.Seq, errColdUnavailable, err)
	}
	if rec.Subject != m.Subject || len(rec.Header) != m.HdrLen || len(rec.Data) != m.DataLen {
		t.coldReadErrors.Add(1)
		return fmt.Errorf("stream %d message %d: %w: segment record does not match its stub", s.id, m.Seq, errColdUnavailable)
	}
	t.coldReads.Add(1)
	m.Header, m.Data, m.Cold, m.HdrLen, m.DataLen = rec.Header, rec.Data, false, 0, 0
	return nil
}

// hydrateRun hydrates msgs in order and returns how many it did: it
// stops at the first that fails, with that error.
func (s *stream) hydrateRun(ctx context.Context, msgs []store.Message) (int, error) {
	for i := range msgs {
		if err := s.hydrate(ctx, &msgs[i]); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// coldRun copies the cold messages at the head of ahead, up to max body
// bytes (at least one): what one cold fetch brings in.
func coldRun(ahead []store.Message, max int) []store.Message {
	var run []store.Message
	bytes := 0
	for _, m := range ahead {
		if !m.Cold || len(run) > 0 && bytes+m.HdrLen+m.DataLen > max {
			break
		}
		run = append(run, m)
		bytes += m.HdrLen + m.DataLen
	}
	return run
}

// fillColdRun puts hydrated messages back where their stubs still are in
// ahead (in sequence order; the buffer may have moved on or been reset
// while they were fetched).
func fillColdRun(ahead, run []store.Message) []store.Message {
	i := 0
	for _, h := range run {
		for i < len(ahead) && ahead[i].Seq < h.Seq {
			i++
		}
		if i < len(ahead) && ahead[i].Seq == h.Seq && ahead[i].Cold {
			ahead[i] = h
		}
	}
	return ahead
}
