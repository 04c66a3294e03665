package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// SeqAtTime returns the first message with sequence in [first, last] stored
// at or after t (Unix nanos), or ok false when there is none. It binary
// searches the sequence range, so it reads O(log(last-first)) messages
// whatever the stream holds; a probe that lands in a gap (deleted or
// expired messages) seeks to the next message there is.
//
// It relies on message times never decreasing with sequence, which holds
// because the state machine stamps messages in apply order; if a clock
// ever stepped back, the answer is still a message at or after t, though
// not necessarily the first (nats-server's stores make the same bet).
func (s *Store) SeqAtTime(stream, first, last uint64, t int64) (seq uint64, ok bool, err error) {
	if err := s.life.acquire(); err != nil {
		return 0, false, err
	}
	defer s.life.release()
	lo, hi := first, last
	for lo <= hi {
		mid := lo + (hi-lo)/2
		at, ts, found, err := s.firstMsgIn(stream, mid, hi)
		if err != nil {
			return 0, false, fmt.Errorf("store: stream %d: message at time %d: %w", stream, t, err)
		}
		switch {
		case found && ts >= t:
			// at is a candidate; an earlier one can only lie below mid.
			seq, ok = at, true
			if mid == lo {
				return seq, ok, nil
			}
			hi = mid - 1
		case found:
			// Everything up to at is older than t.
			if at >= hi {
				return seq, ok, nil
			}
			lo = at + 1
		default:
			// [mid, hi] is empty.
			if mid == 0 {
				return seq, ok, nil
			}
			hi = mid - 1
		}
	}
	return seq, ok, nil
}

// firstMsgIn returns the sequence and time of the first message with
// sequence in [from, to], reading one record.
func (s *Store) firstMsgIn(stream, from, to uint64) (seq uint64, ts int64, found bool, err error) {
	lo := msgKey(make([]byte, 0, 18), stream, from)
	hi := prefixEnd(msgKey(make([]byte, 0, 18), stream, to))
	var m Message
	err = s.eng.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if _, err := decodeMsg(k, p, &m); err != nil {
			return false, err
		}
		seq, ts, found = binary.BigEndian.Uint64(k[10:]), m.Time, true
		return false, nil
	})
	return seq, ts, found, err
}

// MsgSeqs calls fn with the sequence of each message in [first, last), in
// order, while fn returns true. It reads keys only: no checksum, no
// decoding, whatever the messages' size.
func (s *Store) MsgSeqs(stream, first, last uint64, fn func(seq uint64) bool) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	lo := msgKey(make([]byte, 0, 18), stream, first)
	hi := msgKey(make([]byte, 0, 18), stream, last)
	err := s.eng.scan(lo, hi, false, func(k, _ []byte) (bool, error) {
		if len(k) != 18 {
			return false, corruptf(k, "bad message key")
		}
		return fn(binary.BigEndian.Uint64(k[10:])), nil
	})
	if err != nil {
		return fmt.Errorf("store: message sequences of stream %d in [%d, %d): %w", stream, first, last, err)
	}
	return nil
}

// IndexCursor is a position in a stream's subject index, whose order is
// subject (as strings compare), then sequence. The zero cursor is the
// start of the index.
type IndexCursor struct {
	Subject string
	Seq     uint64
}

// Before reports whether the index entry of (subject, seq) comes before
// the cursor.
func (c IndexCursor) Before(subject string, seq uint64) bool {
	return subject < c.Subject || (subject == c.Subject && seq < c.Seq)
}

// SubjectStatesFrom summarises up to limit subject index entries from
// cursor from on, in index order: fn gets one SubjectState per run of one
// subject (the first and the last run may be part of a subject that
// continues before or after them). It returns the cursor of the first
// entry not read, with more false once the index is exhausted (a limit
// of zero or less reads it all). It reads
// keys only, so a caller can walk a large index in bounded steps.
func (s *Store) SubjectStatesFrom(stream uint64, from IndexCursor, limit int, fn func(SubjectState)) (next IndexCursor, more bool, err error) {
	if err := s.life.acquire(); err != nil {
		return from, false, err
	}
	defer s.life.release()
	if limit <= 0 {
		limit = math.MaxInt
	}
	lo := subjectKey(nil, stream, from.Subject, from.Seq)
	hi := prefixEnd(dataPrefix(nil, stream, kindSubject))
	var (
		cur    SubjectState
		curRaw []byte
		have   bool
		n      int
	)
	err = s.eng.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		if _, err := unseal(k, v); err != nil {
			return false, err
		}
		if len(k) < 10+2+8 {
			return false, corruptf(k, "short subject index key")
		}
		raw, seq := k[10:len(k)-8], binary.BigEndian.Uint64(k[len(k)-8:])
		if have && bytes.Equal(raw, curRaw) && n < limit {
			cur.Msgs, cur.Last = cur.Msgs+1, seq
			n++
			return true, nil
		}
		subj, rest, ok := decodeEscaped(raw)
		if !ok || len(rest) != 0 {
			return false, corruptf(k, "bad subject in index key")
		}
		if n >= limit {
			next, more = IndexCursor{Subject: subj, Seq: seq}, true
			return false, nil
		}
		if have {
			fn(cur)
		}
		curRaw = append(curRaw[:0], raw...)
		cur, have = SubjectState{Subject: subj, Msgs: 1, First: seq, Last: seq}, true
		n++
		return true, nil
	})
	if err != nil {
		return from, false, fmt.Errorf("store: subject index of stream %d from %q/%d: %w", stream, from.Subject, from.Seq, err)
	}
	if have {
		fn(cur)
	}
	return next, more, nil
}

// PrevSubjectSeq returns the newest message of the literal subject with
// sequence below before, or ok false if there is none: one reverse seek
// in the subject index (entries whose message is gone are skipped).
func (s *Store) PrevSubjectSeq(stream uint64, subj string, before uint64) (seq uint64, ok bool, err error) {
	if err := s.life.acquire(); err != nil {
		return 0, false, err
	}
	defer s.life.release()
	lo := subjectPrefix(nil, stream, subj)
	hi := subjectKey(nil, stream, subj, before)
	err = s.eng.scan(lo, hi, true, func(k, v []byte) (bool, error) {
		if _, err := unseal(k, v); err != nil {
			return false, err
		}
		cand := binary.BigEndian.Uint64(k[len(k)-8:])
		switch _, err := s.loadMsgOn(stream, cand, subj); {
		case errors.Is(err, errKeyNotFound):
			return true, nil // stale entry
		case err != nil:
			return false, err
		}
		seq, ok = cand, true
		return false, nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: stream %d: %q before %d: %w", stream, subj, before, err)
	}
	return seq, ok, nil
}
