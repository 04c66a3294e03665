package store

import (
	"encoding/binary"
	"time"

	"github.com/hashicorp/raft"
)

// Payloads of the raft records (keys.go, 0x30). Each is sealed like every
// other value (codec.go), so a flipped bit or a value under the wrong key
// reads as ErrCorrupt.

// raftLogVersion leads a log entry payload, so fields can be added.
const raftLogVersion = 1

// raftLogHasTime flags an entry whose AppendedAt is set.
const raftLogHasTime = 0x01

// appendRaftLog appends a log entry's payload: version(1) flags(1)
// term(uvarint) type(1) [appendedAt(varint unix nanos)] len(ext)
// ext data. The index is the key's, not repeated.
func appendRaftLog(b []byte, l *raft.Log) []byte {
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= raftLogHasTime
	}
	b = append(b, raftLogVersion, flags)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	if flags&raftLogHasTime != 0 {
		b = binary.AppendVarint(b, l.AppendedAt.UnixNano())
	}
	b = appendBytes(b, l.Extensions)
	return append(b, l.Data...)
}

// decodeRaftLog fills l from a payload; Data and Extensions are copies, as
// raft keeps the entry after the read.
func decodeRaftLog(key, p []byte, index uint64, l *raft.Log) error {
	if len(p) < 2 || p[0] != raftLogVersion {
		return corruptf(key, "unknown log entry version")
	}
	flags := p[1]
	d := decoder{key: key, p: p[2:]}
	term := d.uvarint()
	if d.err != nil || len(d.p) == 0 {
		return corruptf(key, "short log entry")
	}
	typ := raft.LogType(d.p[0])
	d.p = d.p[1:]
	var at time.Time
	if flags&raftLogHasTime != 0 {
		at = time.Unix(0, d.varint()).UTC()
	}
	if d.err != nil {
		return d.err
	}
	ext, data, err := readBytes(key, d.p)
	if err != nil {
		return err
	}
	*l = raft.Log{
		Index:      index,
		Term:       term,
		Type:       typ,
		Data:       cloneNonEmpty(data),
		Extensions: cloneNonEmpty(ext),
		AppendedAt: at,
	}
	return nil
}

// appliedState is what the FSM has applied: the last entry's {index,
// term} and, separately, the last configuration it applied and where.
type appliedState struct {
	index, term uint64
	// confIndex is the index of the configuration entry conf came from; 0
	// when none was recorded.
	confIndex uint64
	conf      raft.Configuration
}

// appendIndexTerm is the applied record's payload: index, term (uvarint).
func appendIndexTerm(b []byte, index, term uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(b, index), term)
}

func decodeIndexTerm(key, p []byte) (index, term uint64, err error) {
	d := decoder{key: key, p: p}
	index, term = d.uvarint(), d.uvarint()
	return index, term, d.finish()
}

// appendConfig appends index(uvarint) count(uvarint) and, per server,
// suffrage(1) len(id) id len(address) address.
func appendConfig(b []byte, index uint64, c raft.Configuration) []byte {
	b = binary.AppendUvarint(b, index)
	b = binary.AppendUvarint(b, uint64(len(c.Servers)))
	for _, s := range c.Servers {
		b = append(b, byte(s.Suffrage))
		b = appendBytes(b, string(s.ID))
		b = appendBytes(b, string(s.Address))
	}
	return b
}

// decodeConfig reads what appendConfig wrote off the front of p.
func decodeConfig(key, p []byte) (index uint64, c raft.Configuration, rest []byte, err error) {
	d := decoder{key: key, p: p}
	index = d.uvarint()
	n := d.uvarint()
	if d.err != nil {
		return 0, c, nil, d.err
	}
	if n > uint64(len(d.p)) {
		return 0, c, nil, corruptf(key, "configuration of %d servers in %d bytes", n, len(d.p))
	}
	p = d.p
	for range n {
		if len(p) == 0 {
			return 0, c, nil, corruptf(key, "short configuration")
		}
		var s raft.Server
		s.Suffrage = raft.ServerSuffrage(p[0])
		var id, addr []byte
		if id, p, err = readBytes(key, p[1:]); err != nil {
			return 0, c, nil, err
		}
		if addr, p, err = readBytes(key, p); err != nil {
			return 0, c, nil, err
		}
		s.ID, s.Address = raft.ServerID(id), raft.ServerAddress(addr)
		c.Servers = append(c.Servers, s)
	}
	return index, c, p, nil
}

// appendFloor is the snapshot floor's payload: index term (uvarint) and
// the configuration.
func appendFloor(b []byte, a *appliedState) []byte {
	return appendConfig(appendIndexTerm(b, a.index, a.term), a.confIndex, a.conf)
}

func decodeFloor(key, p []byte) (a appliedState, err error) {
	d := decoder{key: key, p: p}
	a.index, a.term = d.uvarint(), d.uvarint()
	if d.err != nil {
		return a, d.err
	}
	var rest []byte
	if a.confIndex, a.conf, rest, err = decodeConfig(key, d.p); err != nil {
		return a, err
	}
	if len(rest) != 0 {
		return a, corruptf(key, "%d trailing bytes", len(rest))
	}
	return a, nil
}
