package store

import (
	"encoding/binary"
	"hash/crc32"
)

// Value encoding. Every value is payload || crc32c(key || payload), the CRC
// little-endian. Covering the key as well catches a value written under the
// wrong key, not only flipped bits. CRC32-C is hardware-accelerated on amd64
// and arm64, so checking every value on every read costs little.

const crcLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// formatVersion is written once per store; a store with another version is
// refused at Open.
const formatVersion = 1

// stateVersion leads the stream state payload, so fields can be added.
const stateVersion = 1

func checksum(key, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, payload)
}

// seal appends the checksum of key and payload to payload, which must be
// the tail of buf starting at off, and returns buf.
func seal(key, buf []byte, off int) []byte {
	return binary.LittleEndian.AppendUint32(buf, checksum(key, buf[off:]))
}

// unseal verifies v against key and returns its payload.
func unseal(key, v []byte) ([]byte, error) {
	if len(v) < crcLen {
		return nil, corruptf(key, "value of %d bytes is shorter than its checksum", len(v))
	}
	p := v[:len(v)-crcLen]
	if binary.LittleEndian.Uint32(v[len(p):]) != checksum(key, p) {
		return nil, corruptf(key, "checksum mismatch")
	}
	return p, nil
}

// appendMsg appends a message payload: time(8) ttl(varint)
// len(subject) subject len(header) header data.
func appendMsg(b []byte, m *Message) []byte {
	if m.Cold {
		return appendStub(b, m)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(m.Time))
	b = binary.AppendVarint(b, m.TTL)
	b = appendBytes(b, m.Subject)
	b = binary.AppendUvarint(b, uint64(len(m.Header)))
	b = append(b, m.Header...)
	return append(b, m.Data...)
}

func appendBytes[S string | []byte](b []byte, s S) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeMsg fills m from a payload. Header and Data alias p; the subject is
// returned as bytes aliasing p so callers that only filter need not allocate.
func decodeMsg(key, p []byte, m *Message) (subject []byte, err error) {
	if len(p) < 8 {
		return nil, corruptf(key, "short message")
	}
	m.Time = int64(binary.BigEndian.Uint64(p))
	p = p[8:]
	ttl, n := binary.Varint(p)
	if n <= 0 {
		return nil, corruptf(key, "bad ttl")
	}
	m.TTL, p = ttl, p[n:]
	if subject, p, err = readBytes(key, p); err != nil {
		return nil, err
	}
	if v, n := binary.Uvarint(p); n > 0 && v == coldMarker {
		return subject, decodeStub(key, p[n:], m)
	}
	m.Cold, m.HdrLen, m.DataLen = false, 0, 0
	if m.Header, p, err = readBytes(key, p); err != nil {
		return nil, err
	}
	m.Data = p
	return subject, nil
}

func readBytes(key, p []byte) (field, rest []byte, err error) {
	l, n := binary.Uvarint(p)
	if n <= 0 || l > uint64(len(p)-n) {
		return nil, nil, corruptf(key, "bad length")
	}
	return p[n : n+int(l)], p[n+int(l):], nil
}

func appendMeta(b []byte, m *StreamMeta) []byte {
	return append(appendBytes(b, m.Name), m.Config...)
}

func decodeMeta(key, p []byte, m *StreamMeta) error {
	name, rest, err := readBytes(key, p)
	if err != nil {
		return err
	}
	m.Name, m.Config = string(name), cloneBytes(rest)
	return nil
}

func appendState(b []byte, s *StreamState) []byte {
	b = append(b, stateVersion)
	for _, v := range [...]uint64{s.FirstSeq, s.LastSeq, s.Msgs, s.Bytes, s.Deleted} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendVarint(b, s.FirstTime)
	return binary.AppendVarint(b, s.LastTime)
}

func decodeState(key, p []byte, s *StreamState) error {
	if len(p) == 0 || p[0] != stateVersion {
		return corruptf(key, "unknown stream state version")
	}
	d := decoder{key: key, p: p[1:]}
	s.FirstSeq, s.LastSeq, s.Msgs = d.uvarint(), d.uvarint(), d.uvarint()
	s.Bytes, s.Deleted = d.uvarint(), d.uvarint()
	s.FirstTime, s.LastTime = d.varint(), d.varint()
	return d.finish()
}

// decoder reads varints off a payload, remembering the first error.
type decoder struct {
	key []byte
	p   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = corruptf(d.key, "bad varint")
	}
	d.p = nil
}

// finish reports the first error, or trailing bytes as corruption.
func (d *decoder) finish() error {
	if d.err == nil && len(d.p) != 0 {
		d.err = corruptf(d.key, "%d trailing bytes", len(d.p))
	}
	return d.err
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
