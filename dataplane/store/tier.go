package store

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Tiered storage records. A message whose header and data moved into a
// segment object keeps its message record as a stub: time, TTL, subject
// and the sizes of what moved, so every read of metadata (limits,
// purges, sequence and time searches, the subject index) answers from
// the local store exactly as before, and only a read of the body goes to
// the object store. The manifest lists the stream's segments; pending
// object records name objects that exist, or may, without a manifest
// entry: uploads in progress and objects whose segment was dropped,
// which the tier's deleter removes.
//
//	0x20 stream(8) 0x01 seq(8)   stub: time ttl subject coldMarker hdrLen dataLen
//	0x20 stream(8) 0x07 first(8) segment manifest entry (Segment)
//	0x21 stream(8) key(esc)      pending object: state(1) time(8)
//
// Pending records live under their own prefix, outside the stream's
// range, so DeleteStream (one range delete) leaves them for the deleter.
const (
	kindSegment byte = 0x07
	prefixTier  byte = 0x21
)

// coldMarker stands where a message record has its header length: no
// header is 2^64-1 bytes long, so it marks a stub unambiguously.
const coldMarker = math.MaxUint64

// Segment is one manifest entry: a sealed range [First, Last] of a
// stream whose bodies live in the object Key.
type Segment struct {
	First, Last uint64
	Key         string
	Size        int64 // the object's size
	IndexOff    int64 // where the object's index starts
	Msgs        uint64
	Bytes       uint64
	// Live and LiveBytes count the messages of the segment still held
	// (not deleted, purged or expired); at zero the segment is dropped.
	Live      uint64
	LiveBytes uint64
	MinTime   int64
	MaxTime   int64
	// Erased says a message of the range was deleted with erase while
	// its body is still in the object: the segment is to be rewritten
	// without it. Kept in the manifest, so a restart still rewrites it.
	Erased bool
}

// segmentErased is the flag bit of Segment.Erased; a record without the
// flags field (written before it existed, or with no flag set) has none.
const segmentErased = 1

// PendingObject is an object the manifest does not reference: an upload
// in progress (Garbage false) or an object to delete.
type PendingObject struct {
	Stream  uint64
	Key     string
	Garbage bool
	Time    int64
}

func appendStub(b []byte, m *Message) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(m.Time))
	b = binary.AppendVarint(b, m.TTL)
	b = appendBytes(b, m.Subject)
	b = binary.AppendUvarint(b, coldMarker)
	b = binary.AppendUvarint(b, uint64(m.HdrLen))
	return binary.AppendUvarint(b, uint64(m.DataLen))
}

// decodeStub reads the rest of a stub after its marker.
func decodeStub(key, p []byte, m *Message) error {
	d := decoder{key: key, p: p}
	m.HdrLen, m.DataLen = int(d.uvarint()), int(d.uvarint())
	m.Header, m.Data, m.Cold = nil, nil, true
	return d.finish()
}

// MarkCold replaces message m.Seq's record with a stub: m carries the
// message's time, TTL and subject and, in HdrLen and DataLen, the sizes
// of its header and data, which now live in a segment. The subject index
// and TTL entries stay as they are.
func (b *Batch) MarkCold(stream uint64, m *Message) {
	b.key = msgKey(b.key[:0], stream, m.Seq)
	b.val = appendStub(b.val[:0], m)
	b.setVal(b.key)
}

func segmentKey(b []byte, stream, first uint64) []byte {
	return appendU64(dataPrefix(b, stream, kindSegment), first)
}

// PutSegment writes (or replaces) a manifest entry.
func (b *Batch) PutSegment(stream uint64, s *Segment) {
	b.key = segmentKey(b.key[:0], stream, s.First)
	v := binary.AppendUvarint(b.val[:0], s.Last)
	v = appendBytes(v, s.Key)
	for _, x := range [...]uint64{uint64(s.Size), uint64(s.IndexOff), s.Msgs, s.Bytes, s.Live, s.LiveBytes} {
		v = binary.AppendUvarint(v, x)
	}
	v = binary.AppendVarint(v, s.MinTime)
	v = binary.AppendVarint(v, s.MaxTime)
	if s.Erased {
		v = binary.AppendUvarint(v, segmentErased)
	}
	b.val = v
	b.setVal(b.key)
}

// DeleteSegment removes the manifest entry of the segment starting at
// first. Record the object as pending garbage in the same batch.
func (b *Batch) DeleteSegment(stream, first uint64) {
	b.key = segmentKey(b.key[:0], stream, first)
	b.w.del(b.key)
}

func pendingKey(b []byte, stream uint64, key string) []byte {
	return appendEscaped(appendU64(append(b, prefixTier), stream), key)
}

// PutPendingObject records an object that exists, or may, without a
// manifest entry: an upload about to start, or (garbage) one to delete.
func (b *Batch) PutPendingObject(p PendingObject) {
	b.key = pendingKey(b.key[:0], p.Stream, p.Key)
	state := byte(0)
	if p.Garbage {
		state = 1
	}
	b.val = binary.BigEndian.AppendUint64(append(b.val[:0], state), uint64(p.Time))
	b.setVal(b.key)
}

// ForgetObject removes a pending record: the upload was committed (its
// manifest entry goes in the same batch) or the object was deleted.
func (b *Batch) ForgetObject(stream uint64, key string) {
	b.key = pendingKey(b.key[:0], stream, key)
	b.w.del(b.key)
}

// Segments calls fn with each manifest entry of the stream, in sequence
// order.
func (s *Store) Segments(stream uint64, fn func(Segment) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	return segments(s.eng, stream, fn)
}

// Segments is Store.Segments.
func (r *Recovery) Segments(stream uint64, fn func(Segment) error) error {
	return segments(r.cur, stream, fn)
}

func segments(r reader, stream uint64, fn func(Segment) error) error {
	lo := dataPrefix(nil, stream, kindSegment)
	hi := prefixEnd(dataPrefix(nil, stream, kindSegment))
	err := r.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		seg, err := decodeSegment(k, v)
		if err != nil {
			return false, err
		}
		return true, fn(seg)
	})
	if err != nil {
		return fmt.Errorf("store: segments of stream %d: %w", stream, err)
	}
	return nil
}

func decodeSegment(k, v []byte) (Segment, error) {
	p, err := unseal(k, v)
	if err != nil {
		return Segment{}, err
	}
	if len(k) != 18 {
		return Segment{}, corruptf(k, "bad segment key")
	}
	seg := Segment{First: binary.BigEndian.Uint64(k[10:])}
	d := decoder{key: k, p: p}
	seg.Last = d.uvarint()
	l := d.uvarint()
	if d.err == nil && l <= uint64(len(d.p)) {
		seg.Key, d.p = string(d.p[:l]), d.p[l:]
	} else {
		d.fail()
	}
	seg.Size, seg.IndexOff = int64(d.uvarint()), int64(d.uvarint())
	seg.Msgs, seg.Bytes, seg.Live, seg.LiveBytes = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
	seg.MinTime, seg.MaxTime = d.varint(), d.varint()
	if d.err == nil && len(d.p) > 0 {
		seg.Erased = d.uvarint()&segmentErased != 0
	}
	if err := d.finish(); err != nil {
		return Segment{}, err
	}
	return seg, nil
}

// ReprSegments calls fn with each manifest entry a batch's Repr writes
// (a segment committed, rewritten, or its live counts changed): a
// replica learns from it what tiering replaced by stubs, since it only
// commits the writes and never runs the apply path that made them.
func (s *Store) ReprSegments(r []byte, fn func(stream uint64, seg Segment)) error {
	sets, ok := s.eng.(reprSetter)
	if !ok {
		return nil
	}
	return sets.eachSet(r, func(k, v []byte) error {
		if len(k) != 18 || k[0] != prefixData || k[9] != kindSegment {
			return nil
		}
		seg, err := decodeSegment(k, v)
		if err != nil {
			return err
		}
		fn(binary.BigEndian.Uint64(k[1:9]), seg)
		return nil
	})
}

// reprSetter is an engine that reads back the sets of a batch repr.
type reprSetter interface {
	eachSet(r []byte, fn func(k, v []byte) error) error
}

// PendingObjects calls fn with each pending object record of the streams
// with ids in [lo, hi).
func (s *Store) PendingObjects(lo, hi uint64, fn func(PendingObject) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	start := appendU64([]byte{prefixTier}, lo)
	var end []byte
	if hi == math.MaxUint64 {
		end = []byte{prefixTier + 1}
	} else {
		end = appendU64([]byte{prefixTier}, hi)
	}
	err := s.eng.scan(start, end, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if len(k) < 9+2 || len(p) != 9 {
			return false, corruptf(k, "bad pending object record")
		}
		key, rest, ok := decodeEscaped(k[9:])
		if !ok || len(rest) != 0 {
			return false, corruptf(k, "bad pending object key")
		}
		return true, fn(PendingObject{Stream: binary.BigEndian.Uint64(k[1:9]), Key: key, Garbage: p[0] == 1,
			Time: int64(binary.BigEndian.Uint64(p[1:]))})
	})
	if err != nil {
		return fmt.Errorf("store: pending objects: %w", err)
	}
	return nil
}

// compacter is an engine that can rewrite a key range to free the space
// of what was deleted or overwritten in it, and say how much disk it
// uses (Pebble).
type compacter interface {
	compact(start, end []byte) error
	diskUsage() uint64
}

// DiskUsage is the bytes the engine's files take on disk (0 for the
// memory engine).
func (s *Store) DiskUsage() uint64 {
	if err := s.life.acquire(); err != nil {
		return 0
	}
	defer s.life.release()
	if c, ok := s.eng.(compacter); ok {
		return c.diskUsage()
	}
	return 0
}

// CompactMsgs asks the engine to rewrite the stream's message records in
// [first, last]: after tiering replaced bodies with stubs, the old
// values' disk space is freed only when their range is compacted. The
// memory engine frees at once and ignores it.
func (s *Store) CompactMsgs(stream, first, last uint64) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	c, ok := s.eng.(compacter)
	if !ok {
		return nil
	}
	lo := msgKey(nil, stream, first)
	hi := prefixEnd(msgKey(nil, stream, last))
	if err := c.compact(lo, hi); err != nil {
		return fmt.Errorf("store: compact stream %d [%d, %d]: %w", stream, first, last, err)
	}
	return nil
}
