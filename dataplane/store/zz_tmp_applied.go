package store

import "encoding/binary"

// TEMPORARY until the raft store branch merges.

func tmpAppliedKey(g uint16) []byte { return []byte{0x30, byte(g >> 8), byte(g), 0x03} }

func (b *Batch) PutApplied(group uint16, index, term uint64) {
	v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, index), term)
	b.set(tmpAppliedKey(group), v)
}

func (s *Store) Applied(group uint16) (index, term uint64, err error) {
	k := tmpAppliedKey(group)
	err = s.eng.get(k, func(v []byte) error {
		p, err := unseal(k, v)
		if err != nil {
			return err
		}
		index, term = binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
		return nil
	})
	if err == errKeyNotFound {
		return 0, 0, nil
	}
	return
}
