package store

import (
	"bytes"
	"fmt"
)

// Replication moves a batch, not the change that made it: a partition's
// leader runs the apply path into a Batch, and the raft entry is that
// batch's Repr. Every replica then commits the same writes with SetRepr,
// so replicas hold byte-identical records and nothing about applying an
// entry depends on the replica's clock, limits or memory.

// Repr is the batch's writes in the store's encoding, valid until the
// batch is written to, committed or reset.
func (b *Batch) Repr() []byte { return b.w.encoded() }

// SetRepr replaces the batch's writes with those of another batch's Repr
// (from a store of the same kind). Writes made after it are added to
// them. A repr that cannot be read is ErrCorrupt and leaves the batch
// empty.
func (b *Batch) SetRepr(r []byte) error {
	b.view = nil
	return b.w.setEncoded(r)
}

// Meta catalog records: the meta group's replicated state (stream
// assignments), under their own prefix so the meta group's snapshot is
// one range.
//
//	0x40 key(caller's)  →  value (checksummed like every record)
const prefixMetaCatalog byte = 0x40

func metaCatalogKey(dst, key []byte) []byte {
	return append(append(dst, prefixMetaCatalog), key...)
}

// PutMetaRecord writes a meta catalog record under key.
func (b *Batch) PutMetaRecord(key, val []byte) {
	b.key = metaCatalogKey(b.key[:0], key)
	b.set(b.key, val)
}

// DeleteMetaRecord removes the meta catalog record under key.
func (b *Batch) DeleteMetaRecord(key []byte) {
	b.key = metaCatalogKey(b.key[:0], key)
	b.w.del(b.key)
}

// MetaRecords calls fn with every meta catalog record in key order (key
// without the prefix). Key and value are valid only during fn. A record
// whose checksum fails is ErrCorrupt.
func (s *Store) MetaRecords(fn func(key, val []byte) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	lower := []byte{prefixMetaCatalog}
	upper := []byte{prefixMetaCatalog + 1}
	return s.eng.scan(lower, upper, false, func(k, v []byte) (bool, error) {
		payload, err := unseal(k, v)
		if err != nil {
			return false, fmt.Errorf("store: meta record %x: %w", bytes.Clone(k[1:]), err)
		}
		return true, fn(k[1:], payload)
	})
}
