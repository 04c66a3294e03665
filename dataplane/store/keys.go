package store

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Key layout. Every key starts with a one-byte prefix. Integers are
// big-endian so byte order is numeric order; timestamps are int64 with the
// sign bit flipped (t ^ 1<<63) for the same reason. Strings (subjects,
// message IDs, consumer names) are escaped — 0x00 becomes 0x00 0xFF — and
// terminated by 0x00 0x01, which keeps byte order equal to string order and
// lets a string be followed by more key.
//
//	prefix               rest of key                      value (payload)
//	0x01                 -                                format version
//	0x10 stream(8) 0x01  -                                stream meta: name, config JSON
//	0x10 stream(8) 0x02  -                                stream state summary
//	0x20 stream(8) 0x01  seq(8)                           message: time, ttl, subject, header, data
//	0x20 stream(8) 0x02  subject(esc) seq(8)              subject index entry (empty)
//	0x20 stream(8) 0x03  expires(ts) seq(8)               TTL expiry entry (empty)
//	0x20 stream(8) 0x04  msgid(esc)                       dedup by id: seq, time
//	0x20 stream(8) 0x05  time(ts) msgid(esc)              dedup by time: seq
//	0x20 stream(8) 0x06  consumer(esc) 0x01               consumer config JSON
//	0x20 stream(8) 0x06  consumer(esc) 0x02               consumer state bytes
//	0x20 stream(8) 0x07  first(8)                         tier segment manifest entry (tier.go)
//	0x20 stream(8) 0x08  source(esc)                      mirror/source progress: last origin seq (source.go)
//	0x21 stream(8)       object key(esc)                  tier pending object (tier.go)
//	0x30 group(2) 0x01   idx(8)                           raft log entry (raft_codec.go)
//	0x30 group(2) 0x02   name (raw, to the end)           raft stable value (term, vote)
//	0x30 group(2) 0x03   -                                FSM applied {index, term}
//	0x30 group(2) 0x04   -                                repair marker (empty)
//	0x30 group(2) 0x05   -                                raft commit index
//	0x30 group(2) 0x06   -                                FSM applied configuration {index, servers}
//	0x30 group(2) 0x07   -                                snapshot floor {index, term, configuration}
//	0x30 group(2) 0x08   chunk(8)                         received snapshot, staged until verified
//	0x40                 (the meta group's own keys)      meta catalog records
//
// Raft keys (0x30) belong to one raft group: group 0 is the meta group,
// groups 1..P the partitions. A group's replicated state is its key
// ranges (raftGroupRanges): for partition p the catalog and data records
// of the streams with ids in [p<<48, (p+1)<<48), for the meta group
// everything under 0x40. R1 streams (ids below 1<<48) belong to no
// group, so restoring a partition's snapshot never touches them.
//
// Why this shape:
//   - Start-up scans only 0x10: two small records per stream, adjacent, in
//     stream order. Messages live under 0x20 and are never touched.
//   - Everything a stream owns besides its catalog records is under
//     0x20 stream(8), so DeleteStream is one range delete (plus two points).
//   - Messages by (stream, seq): load by seq is a point get, a seq range is a
//     range scan, and purging [first, last) is one range delete.
//   - Subject index by (stream, subject, seq): last-by-subject is a reverse
//     seek, next-for-subject-at-or-after-seq a forward seek, all sequences of
//     a subject a range scan, and a subject prefix (filter "a.b.>") a range.
//   - TTL entries by expiry time and dedup entries by time make "what has
//     expired before T" a range scan from the start of the stream's range.
//
// Every value is payload || crc32c(key || payload); see codec.go.
const (
	prefixFormat  byte = 0x01
	prefixCatalog byte = 0x10
	prefixData    byte = 0x20
	prefixRaft    byte = 0x30
	prefixMetaCat byte = 0x40
)

// Raft record kinds, after 0x30 group(2).
const (
	raftKindLog     byte = 0x01
	raftKindStable  byte = 0x02
	raftKindApplied byte = 0x03
	raftKindRepair  byte = 0x04
	raftKindCommit  byte = 0x05
	raftKindConfig  byte = 0x06
	raftKindFloor   byte = 0x07
	raftKindStaging byte = 0x08
)

// Catalog record kinds, after 0x10 stream(8).
const (
	catalogMeta  byte = 0x01
	catalogState byte = 0x02
)

// Stream data kinds, after 0x20 stream(8).
const (
	kindMsg       byte = 0x01
	kindSubject   byte = 0x02
	kindTTL       byte = 0x03
	kindDedupID   byte = 0x04
	kindDedupTime byte = 0x05
	kindConsumer  byte = 0x06
	kindSource    byte = 0x08
)

// Consumer record kinds, after the escaped consumer name.
const (
	consumerConfig byte = 0x01
	consumerState  byte = 0x02
)

// formatKey is the key of the store's format version record.
var formatKey = []byte{prefixFormat}

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// appendTime appends a Unix-nanos timestamp so that byte order is time order,
// negative times included.
func appendTime(b []byte, t int64) []byte { return appendU64(b, uint64(t)^(1<<63)) }

func decodeTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func catalogKey(b []byte, stream uint64, kind byte) []byte {
	return append(appendU64(append(b, prefixCatalog), stream), kind)
}

// dataPrefix is 0x20 stream(8) kind: the start of one kind of record of one
// stream.
func dataPrefix(b []byte, stream uint64, kind byte) []byte {
	return append(appendU64(append(b, prefixData), stream), kind)
}

func msgKey(b []byte, stream, seq uint64) []byte {
	return appendU64(dataPrefix(b, stream, kindMsg), seq)
}

// subjectPrefix is the start of one subject's index entries.
func subjectPrefix(b []byte, stream uint64, subject string) []byte {
	return appendEscaped(dataPrefix(b, stream, kindSubject), subject)
}

func subjectKey(b []byte, stream uint64, subject string, seq uint64) []byte {
	return appendU64(subjectPrefix(b, stream, subject), seq)
}

func ttlKey(b []byte, stream uint64, expires int64, seq uint64) []byte {
	return appendU64(appendTime(dataPrefix(b, stream, kindTTL), expires), seq)
}

func dedupIDKey(b []byte, stream uint64, id string) []byte {
	return appendEscaped(dataPrefix(b, stream, kindDedupID), id)
}

func dedupTimeKey(b []byte, stream uint64, t int64, id string) []byte {
	return appendEscaped(appendTime(dataPrefix(b, stream, kindDedupTime), t), id)
}

func consumerPrefix(b []byte, stream uint64, name string) []byte {
	return appendEscaped(dataPrefix(b, stream, kindConsumer), name)
}

func sourceKey(b []byte, stream uint64, source string) []byte {
	return appendEscaped(dataPrefix(b, stream, kindSource), source)
}

func consumerKey(b []byte, stream uint64, name string, kind byte) []byte {
	return append(consumerPrefix(b, stream, name), kind)
}

// streamDataStart is the first key a stream owns under 0x20; streamDataEnd
// is the first key after them.
func streamDataStart(b []byte, stream uint64) []byte {
	return appendU64(append(b, prefixData), stream)
}

func streamDataEnd(b []byte, stream uint64) []byte {
	return prefixEnd(streamDataStart(b, stream))
}

// raftPrefix is 0x30 group(2): the start of everything raft keeps for one
// group.
func raftPrefix(b []byte, group uint16) []byte {
	return binary.BigEndian.AppendUint16(append(b, prefixRaft), group)
}

// raftKey is 0x30 group(2) kind: a group's single records, and the start of
// its log, stable and staging records.
func raftKey(b []byte, group uint16, kind byte) []byte {
	return append(raftPrefix(b, group), kind)
}

func raftLogKey(b []byte, group uint16, index uint64) []byte {
	return appendU64(raftKey(b, group, raftKindLog), index)
}

func raftStableKey(b []byte, group uint16, name []byte) []byte {
	return append(raftKey(b, group, raftKindStable), name...)
}

func raftStagingKey(b []byte, group uint16, chunk uint64) []byte {
	return appendU64(raftKey(b, group, raftKindStaging), chunk)
}

// partitionShift places a partition's stream ids: partition p owns
// [p<<48, (p+1)<<48).
const partitionShift = 48

// keyRange is [start, end).
type keyRange struct{ start, end []byte }

// raftGroupRanges returns the key ranges a group's snapshot carries, in
// key order. Group 0 is the meta group (the 0x40 catalog); group p >= 1
// owns the catalog and data records of its streams.
func raftGroupRanges(group uint16) []keyRange {
	if group == 0 {
		return []keyRange{{[]byte{prefixMetaCat}, []byte{prefixMetaCat + 1}}}
	}
	lo := uint64(group) << partitionShift
	out := make([]keyRange, 0, 3)
	for _, prefix := range []byte{prefixCatalog, prefixData, prefixTier} {
		r := keyRange{start: appendU64([]byte{prefix}, lo)}
		if group == 0xffff {
			r.end = []byte{prefix + 1}
		} else {
			r.end = appendU64([]byte{prefix}, lo+1<<partitionShift)
		}
		out = append(out, r)
	}
	return out
}

// prefixEnd returns the smallest key greater than every key starting with
// p, computed in place. A prefix of all 0xFF has no such key; the store never
// builds one because every key starts with a prefix byte below 0xFF.
func prefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			p[i]++
			return p[:i+1]
		}
	}
	panic("store: prefixEnd of all-0xff key")
}

// appendEscaped appends s escaped and terminated (see the layout above).
func appendEscaped(b []byte, s string) []byte {
	return append(appendEscapedPrefix(b, s), 0x00, 0x01)
}

// appendEscapedPrefix appends s escaped but unterminated: the common prefix
// of every escaped string that starts with s.
func appendEscapedPrefix(b []byte, s string) []byte {
	if strings.IndexByte(s, 0) < 0 {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		b = append(b, s[i])
		if s[i] == 0 {
			b = append(b, 0xff)
		}
	}
	return b
}

// decodeEscaped reads an escaped, terminated string off the front of b.
func decodeEscaped(b []byte) (s string, rest []byte, ok bool) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		if i+1 >= len(b) {
			return "", nil, false
		}
		switch b[i+1] {
		case 0x01:
			if out == nil {
				return string(b[:i]), b[i+2:], true
			}
			return string(append(out, b[:i]...)), b[i+2:], true
		case 0xff:
			out = append(out, b[:i+1]...)
			b = b[i+2:]
			i = -1
		default:
			return "", nil, false
		}
	}
	return "", nil, false
}

// describeKey renders a key for error messages.
func describeKey(k []byte) string {
	switch {
	case len(k) == 1 && k[0] == prefixFormat:
		return "format record"
	case len(k) >= 10 && k[0] == prefixCatalog:
		return fmt.Sprintf("stream %d catalog record %d", binary.BigEndian.Uint64(k[1:9]), k[9])
	case len(k) >= 18 && k[0] == prefixData && k[9] == kindMsg:
		return fmt.Sprintf("stream %d message %d", binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[10:18]))
	case len(k) >= 10 && k[0] == prefixData:
		return fmt.Sprintf("stream %d record kind %d (key %x)", binary.BigEndian.Uint64(k[1:9]), k[9], k)
	case len(k) == 12 && k[0] == prefixRaft && k[3] == raftKindLog:
		return fmt.Sprintf("raft group %d log entry %d", binary.BigEndian.Uint16(k[1:3]), binary.BigEndian.Uint64(k[4:]))
	case len(k) >= 4 && k[0] == prefixRaft && k[3] == raftKindStable:
		return fmt.Sprintf("raft group %d stable value %q", binary.BigEndian.Uint16(k[1:3]), k[4:])
	case len(k) >= 4 && k[0] == prefixRaft:
		return fmt.Sprintf("raft group %d record kind %d (key %x)", binary.BigEndian.Uint16(k[1:3]), k[3], k)
	case len(k) >= 1 && k[0] == prefixMetaCat:
		return fmt.Sprintf("meta catalog record %q", k[1:])
	}
	return fmt.Sprintf("key %x", k)
}
