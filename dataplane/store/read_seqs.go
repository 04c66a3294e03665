package store

import (
	"encoding/binary"
	"fmt"
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
