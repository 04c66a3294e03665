package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/contrail/contrail/dataplane/subject"
)

// LoadMsg returns the message at seq, with memory of its own.
func (s *Store) LoadMsg(stream, seq uint64) (Message, error) {
	if err := s.life.acquire(); err != nil {
		return Message{}, err
	}
	defer s.life.release()
	m, err := loadMsg(s.eng, stream, seq)
	if errors.Is(err, errKeyNotFound) {
		return Message{}, notFound("stream %d message %d", stream, seq)
	}
	return m, err
}

func loadMsg(r reader, stream, seq uint64) (Message, error) {
	var kb [18]byte
	key := msgKey(kb[:0], stream, seq)
	var m Message
	err := r.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		subj, err := decodeMsg(key, bytesClone(p), &m)
		m.Subject = string(subj)
		return err
	})
	if err != nil {
		return Message{}, err
	}
	m.Seq = seq
	if len(m.Header) == 0 {
		m.Header = nil
	}
	if len(m.Data) == 0 {
		m.Data = nil
	}
	return m, nil
}

// LoadMsgOn returns the message at seq if its subject is subj, and
// ErrNotFound otherwise. It is the one check for every read that takes a
// sequence from a subject index (this store's, or a summary of it such as
// a stream's last sequence per subject) and loads by sequence: the
// sequence names subj's message only while that message is there. The
// sequence may since hold nothing, or, were a sequence ever reused (a
// state summary behind the messages after a crash), another subject's
// message; either reads as not found, never as another subject's data.
func (s *Store) LoadMsgOn(stream, seq uint64, subj string) (Message, error) {
	if err := s.life.acquire(); err != nil {
		return Message{}, err
	}
	defer s.life.release()
	m, err := s.loadMsgOn(stream, seq, subj)
	if errors.Is(err, errKeyNotFound) {
		return Message{}, notFound("stream %d message %d on %q", stream, seq, subj)
	}
	return m, err
}

func (s *Store) loadMsgOn(stream, seq uint64, subj string) (Message, error) {
	m, err := loadMsg(s.eng, stream, seq)
	if err == nil && m.Subject != subj {
		return Message{}, errKeyNotFound
	}
	return m, err
}

func bytesClone(p []byte) []byte { return append(make([]byte, 0, len(p)), p...) }

// ScanMsgs calls fn for each message with sequence in [first, last), in
// order, until fn returns an error (which ScanMsgs returns). The *Message
// and its Header and Data are valid only during fn and must not be
// modified (with the memory engine they are the store's own bytes); copy
// what you keep.
func (s *Store) ScanMsgs(stream, first, last uint64, fn func(*Message) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	return scanMsgs(s.eng, stream, first, last, fn)
}

// scanMsgs is ScanMsgs over any reader (the store, or a View).
func scanMsgs(r reader, stream, first, last uint64, fn func(*Message) error) error {
	return walkMsgs(r, stream, first, last, func(m *Message, subj []byte) (bool, error) {
		m.Subject = string(subj)
		return true, fn(m)
	})
}

// walkMsgs scans messages in [first, last), handing fn the decoded message
// (aliasing engine memory, Subject unset) and its raw subject, so a filter
// can reject a message without allocating.
func walkMsgs(r reader, stream, first, last uint64, fn func(m *Message, subj []byte) (bool, error)) error {
	lo := msgKey(make([]byte, 0, 18), stream, first)
	hi := msgKey(make([]byte, 0, 18), stream, last)
	var m Message
	return r.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		subj, err := decodeMsg(k, p, &m)
		if err != nil {
			return false, err
		}
		m.Seq = binary.BigEndian.Uint64(k[10:])
		return fn(&m, subj)
	})
}

// NewestMsg returns the stream's message with the highest sequence, in one
// reverse seek over its message keys, or ErrNotFound when it holds none.
// Start-up reads it to check a state summary against the messages.
func (s *Store) NewestMsg(stream uint64) (Message, error) {
	if err := s.life.acquire(); err != nil {
		return Message{}, err
	}
	defer s.life.release()
	return newestMsg(s.eng, stream)
}

func newestMsg(r reader, stream uint64) (Message, error) {
	lo := dataPrefix(make([]byte, 0, 18), stream, kindMsg)
	hi := dataPrefix(make([]byte, 0, 18), stream, kindMsg+1)
	var found Message
	var ok bool
	err := r.scan(lo, hi, true, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		var m Message
		subj, err := decodeMsg(k, p, &m)
		if err != nil {
			return false, err
		}
		m.Seq = binary.BigEndian.Uint64(k[10:])
		found, ok = ownMsg(&m, subj), true
		return false, nil
	})
	if err != nil {
		return Message{}, fmt.Errorf("store: newest message of stream %d: %w", stream, err)
	}
	if !ok {
		return Message{}, notFound("stream %d: no message", stream)
	}
	return found, nil
}

// NextMsg returns the first message with sequence >= start whose subject
// matches filter ("" or ">" match everything). A literal filter is answered
// from the subject index in one seek; a wildcard filter walks messages in
// sequence order, which is correct for any filter but costs the gap to the
// next match. A state machine that knows a wildcard's few matching subjects
// can do better with one literal NextMsg per subject. Returns ErrNotFound
// when no message matches.
func (s *Store) NextMsg(stream, start uint64, filter string) (Message, error) {
	if err := s.life.acquire(); err != nil {
		return Message{}, err
	}
	defer s.life.release()
	var found Message
	var ok bool
	var err error
	switch {
	case filter == "" || filter == ">":
		err = walkMsgs(s.eng, stream, start, math.MaxUint64, func(m *Message, subj []byte) (bool, error) {
			found, ok = ownMsg(m, subj), true
			return false, nil
		})
	case subject.IsLiteral(filter):
		found, ok, err = s.nextIndexed(stream, filter, start, false)
	default:
		err = walkMsgs(s.eng, stream, start, math.MaxUint64, func(m *Message, subj []byte) (bool, error) {
			if !subject.Matches(filter, unsafe.String(unsafe.SliceData(subj), len(subj))) {
				return true, nil
			}
			found, ok = ownMsg(m, subj), true
			return false, nil
		})
	}
	if err != nil {
		return Message{}, fmt.Errorf("store: next message of stream %d from %d for %q: %w", stream, start, filter, err)
	}
	if !ok {
		return Message{}, notFound("stream %d: no message from %d for %q", stream, start, filter)
	}
	return found, nil
}

// ownMsg copies a scanned message out of engine memory.
func ownMsg(m *Message, subj []byte) Message {
	c := *m
	c.Subject = string(subj)
	c.Header, c.Data = cloneNonEmpty(m.Header), cloneNonEmpty(m.Data)
	return c
}

func cloneNonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytesClone(b)
}

// nextIndexed walks subj's index entries from seq start (forward) or from
// the last one (reverse) and returns the first whose message exists. Index
// entries whose message is gone (see PurgeRange) or not on subj are stale
// and skipped.
func (s *Store) nextIndexed(stream uint64, subj string, start uint64, reverse bool) (found Message, ok bool, err error) {
	lo := subjectKey(nil, stream, subj, start)
	hi := prefixEnd(subjectPrefix(nil, stream, subj))
	err = s.eng.scan(lo, hi, reverse, func(k, v []byte) (bool, error) {
		if _, err := unseal(k, v); err != nil {
			return false, err
		}
		m, err := s.loadMsgOn(stream, binary.BigEndian.Uint64(k[len(k)-8:]), subj)
		switch {
		case errors.Is(err, errKeyNotFound):
			return true, nil
		case err != nil:
			return false, err
		}
		found, ok = m, true
		return false, nil
	})
	return found, ok, err
}

// LastMsg returns the newest message whose subject matches filter: one
// reverse seek for a literal subject; for a wildcard, a pass over the
// matching part of the subject index.
func (s *Store) LastMsg(stream uint64, filter string) (Message, error) {
	if err := s.life.acquire(); err != nil {
		return Message{}, err
	}
	defer s.life.release()
	var found Message
	var ok bool
	var err error
	if filter != "" && subject.IsLiteral(filter) {
		found, ok, err = s.nextIndexed(stream, filter, 0, true)
	} else {
		found, ok, err = s.lastWildcard(stream, filter)
	}
	if err != nil {
		return Message{}, fmt.Errorf("store: last message of stream %d for %q: %w", stream, filter, err)
	}
	if !ok {
		return Message{}, notFound("stream %d: no message for %q", stream, filter)
	}
	return found, nil
}

func (s *Store) lastWildcard(stream uint64, filter string) (Message, bool, error) {
	var best SubjectState
	var any bool
	err := s.subjectStates(stream, filter, func(st SubjectState) error {
		if !any || st.Last > best.Last {
			best, any = st, true
		}
		return nil
	})
	if err != nil || !any {
		return Message{}, false, err
	}
	return s.nextIndexed(stream, best.Subject, 0, true)
}
