package store

import (
	"bytes"
	"errors"
	"fmt"
)

// Dedup looks up a message ID. The entry is returned whatever its age: the
// caller compares Time with its duplicate window.
func (s *Store) Dedup(stream uint64, id string) (DedupEntry, error) {
	if err := s.life.acquire(); err != nil {
		return DedupEntry{}, err
	}
	defer s.life.release()
	d, err := s.dedup(stream, id)
	if errors.Is(err, errKeyNotFound) {
		return DedupEntry{}, notFound("stream %d message id %q", stream, id)
	}
	if err != nil {
		return DedupEntry{}, fmt.Errorf("store: dedup lookup in stream %d: %w", stream, err)
	}
	return d, nil
}

func (s *Store) dedup(stream uint64, id string) (DedupEntry, error) {
	key := dedupIDKey(nil, stream, id)
	d := DedupEntry{ID: id}
	err := s.eng.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		dec := decoder{key: key, p: p}
		d.Seq, d.Time = dec.uvarint(), dec.varint()
		return dec.finish()
	})
	return d, err
}

// DedupSince calls fn for each dedup entry with Time >= since, oldest
// first: how the state machine refills its in-memory window at start-up.
func (s *Store) DedupSince(stream uint64, since int64, fn func(DedupEntry) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	return dedupSince(s.eng, stream, since, fn)
}

func dedupSince(r reader, stream uint64, since int64, fn func(DedupEntry) error) error {
	lo := appendTime(dataPrefix(nil, stream, kindDedupTime), since)
	hi := prefixEnd(dataPrefix(nil, stream, kindDedupTime))
	return dedupByTime(r, lo, hi, fn)
}

// dedupByTime scans dedup-by-time records in [lo, hi).
func dedupByTime(r reader, lo, hi []byte, fn func(DedupEntry) error) error {
	err := r.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if len(k) < 18+2 {
			return false, corruptf(k, "short dedup key")
		}
		id, rest, ok := decodeEscaped(k[18:])
		if !ok || len(rest) != 0 {
			return false, corruptf(k, "bad message id")
		}
		dec := decoder{key: k, p: p}
		d := DedupEntry{ID: id, Seq: dec.uvarint(), Time: decodeTime(k[10:18])}
		if err := dec.finish(); err != nil {
			return false, err
		}
		return true, fn(d)
	})
	if err != nil {
		return fmt.Errorf("store: dedup scan: %w", err)
	}
	return nil
}

// ExpireDedup adds to b the deletion of every committed dedup entry of the
// stream with Time < before, and returns how many it found. The entries are
// found with one range scan of the by-time records. The by-ID record is
// deleted only if it still carries that time, so an ID that was put again
// later survives. Entries still in flight (submitted, not committed) are not
// seen; a later call finds them.
func (s *Store) ExpireDedup(b *Batch, stream uint64, before int64) (int, error) {
	if err := s.life.acquire(); err != nil {
		return 0, err
	}
	defer s.life.release()
	lo := dataPrefix(nil, stream, kindDedupTime)
	hi := appendTime(bytes.Clone(lo), before)
	n := 0
	err := dedupByTime(s.eng, lo, hi, func(d DedupEntry) error {
		n++
		b.key = dedupTimeKey(b.key[:0], stream, d.Time, d.ID)
		b.w.del(b.key)
		cur, err := s.dedup(stream, d.ID)
		switch {
		case errors.Is(err, errKeyNotFound):
			return nil
		case err != nil:
			return err
		case cur.Time == d.Time:
			b.key = dedupIDKey(b.key[:0], stream, d.ID)
			b.w.del(b.key)
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("store: expire dedup of stream %d: %w", stream, err)
	}
	return n, nil
}
