package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/contrail/contrail/dataplane/subject"
)

// SubjectSeqs calls fn with the sequence of each index entry of the literal
// subject, from seq from upward, in order, until fn returns an error. It
// reads only the index, never messages.
func (s *Store) SubjectSeqs(stream uint64, subj string, from uint64, fn func(seq uint64) error) error {
	if !subject.IsLiteral(subj) {
		return fmt.Errorf("store: SubjectSeqs needs a literal subject, not %q", subj)
	}
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	lo := subjectKey(nil, stream, subj, from)
	hi := prefixEnd(subjectPrefix(nil, stream, subj))
	return s.eng.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		if _, err := unseal(k, v); err != nil {
			return false, err
		}
		return true, fn(binary.BigEndian.Uint64(k[len(k)-8:]))
	})
}

// SubjectStates calls fn once per subject of the stream that matches filter
// ("" matches all), in subject byte order, with its message count and first
// and last sequence. It is derived from the subject index (keys only, no
// messages), so it costs one pass over the matching entries; the part of a
// filter before its first wildcard narrows the pass.
func (s *Store) SubjectStates(stream uint64, filter string, fn func(SubjectState) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	return s.subjectStates(stream, filter, fn)
}

func (s *Store) subjectStates(stream uint64, filter string, fn func(SubjectState) error) error {
	lo, hi := subjectRange(stream, filter)
	var (
		cur    SubjectState
		curRaw []byte
		have   bool
	)
	flush := func() error {
		if !have || !(matchesAll(filter) || subject.Matches(filter, cur.Subject)) {
			return nil
		}
		return fn(cur)
	}
	err := s.eng.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		if _, err := unseal(k, v); err != nil {
			return false, err
		}
		if len(k) < 10+2+8 {
			return false, corruptf(k, "short subject index key")
		}
		raw, seq := k[10:len(k)-8], binary.BigEndian.Uint64(k[len(k)-8:])
		if have && bytes.Equal(raw, curRaw) {
			cur.Msgs, cur.Last = cur.Msgs+1, seq
			return true, nil
		}
		if err := flush(); err != nil {
			return false, err
		}
		subj, rest, ok := decodeEscaped(raw)
		if !ok || len(rest) != 0 {
			return false, corruptf(k, "bad subject in index key")
		}
		curRaw = append(curRaw[:0], raw...)
		cur, have = SubjectState{Subject: subj, Msgs: 1, First: seq, Last: seq}, true
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("store: subjects of stream %d for %q: %w", stream, filter, err)
	}
	return flush()
}

func matchesAll(filter string) bool { return filter == "" || filter == ">" }

// subjectRange bounds the index entries that can match filter: one subject
// for a literal, the literal tokens before the first wildcard otherwise.
func subjectRange(stream uint64, filter string) (lo, hi []byte) {
	if !matchesAll(filter) && subject.IsLiteral(filter) {
		lo = subjectPrefix(nil, stream, filter)
		return lo, prefixEnd(bytes.Clone(lo))
	}
	lo = appendEscapedPrefix(dataPrefix(nil, stream, kindSubject), literalPrefix(filter))
	return lo, prefixEnd(bytes.Clone(lo))
}

// literalPrefix is the part of a wildcard filter before its first wildcard
// token, including the separator: "a.b.*.c" gives "a.b.".
func literalPrefix(filter string) string {
	for i := 0; i < len(filter); {
		end := strings.IndexByte(filter[i:], '.')
		if end < 0 {
			end = len(filter)
		} else {
			end += i
		}
		if tok := filter[i:end]; tok == "*" || tok == ">" {
			return filter[:i]
		}
		i = end + 1
	}
	return filter
}

// Expiring calls fn for each TTL entry of the stream expiring before the
// given time (Unix nanos), earliest first. Entries outlive early deletes of
// their message, so fn must check the message still exists; the state
// machine removes each entry with DeleteTTL once handled.
func (s *Store) Expiring(stream uint64, before int64, fn func(seq uint64, expires int64) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	return expiring(s.eng, stream, before, fn)
}

func expiring(r reader, stream uint64, before int64, fn func(seq uint64, expires int64) error) error {
	lo := dataPrefix(nil, stream, kindTTL)
	hi := appendTime(dataPrefix(nil, stream, kindTTL), before)
	return r.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		if _, err := unseal(k, v); err != nil {
			return false, err
		}
		if len(k) != 10+8+8 {
			return false, corruptf(k, "bad TTL key")
		}
		return true, fn(binary.BigEndian.Uint64(k[18:]), decodeTime(k[10:18]))
	})
}
