package store

import (
	"bytes"
	"errors"
	"fmt"
)

// The meta catalog (0x40) is the meta group's replicated state: whatever
// the meta FSM keeps (stream placement, membership), under keys it chooses.
// The store only seals, verifies and snapshots the records; a meta key is
// given without the 0x40 prefix.

func metaCatalogKey(b, key []byte) []byte { return append(append(b, prefixMetaCat), key...) }

// PutMetaRecord writes a meta catalog record.
func (b *Batch) PutMetaRecord(key, value []byte) {
	b.key = metaCatalogKey(b.key[:0], key)
	b.set(b.key, value)
}

// DeleteMetaRecord removes a meta catalog record.
func (b *Batch) DeleteMetaRecord(key []byte) {
	b.key = metaCatalogKey(b.key[:0], key)
	b.w.del(b.key)
}

// MetaRecord returns a copy of a meta catalog record's value.
func (s *Store) MetaRecord(key []byte) ([]byte, error) {
	if err := s.life.acquire(); err != nil {
		return nil, err
	}
	defer s.life.release()
	k := metaCatalogKey(nil, key)
	var out []byte
	err := s.eng.get(k, func(v []byte) error {
		p, err := unseal(k, v)
		out = append([]byte{}, p...)
		return err
	})
	if errors.Is(err, errKeyNotFound) {
		return nil, notFound("meta record %q", key)
	}
	if err != nil {
		return nil, fmt.Errorf("store: meta record %q: %w", key, err)
	}
	return out, nil
}

// MetaRecords calls fn for every meta catalog record whose key starts with
// prefix, in key order. Key and value are valid only during fn.
func (s *Store) MetaRecords(prefix []byte, fn func(key, value []byte) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	lo := metaCatalogKey(nil, prefix)
	err := s.eng.scan(lo, prefixEnd(bytes.Clone(lo)), false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		return true, fn(k[1:], p)
	})
	if err != nil {
		return fmt.Errorf("store: meta records %q: %w", prefix, err)
	}
	return nil
}
