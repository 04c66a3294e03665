package store

import (
	"fmt"
)

// Recovery reads what start-up needs of each stream besides its catalog
// records: consumers, recent dedup entries, the newest message, TTL
// entries. Its reads share one iterator, so reading stream after stream in
// ascending ID order (and each stream's records in key order: message,
// TTL, dedup, consumers) positions that iterator forward instead of
// opening one per read, which with many streams is most of start-up.
//
// The reads answer exactly as the Store's methods of the same names. A
// Recovery is used by one goroutine at a time; Close releases it.
type Recovery struct {
	s   *Store
	cur cursor
}

// NewRecovery returns a Recovery over what the store holds now.
func (s *Store) NewRecovery() (*Recovery, error) {
	if err := s.life.acquire(); err != nil {
		return nil, err
	}
	cur, err := s.eng.newCursor()
	if err != nil {
		s.life.release()
		return nil, fmt.Errorf("store: recovery: %w", err)
	}
	return &Recovery{s: s, cur: cur}, nil
}

// Close releases the Recovery's iterator; the Store can close only after.
func (r *Recovery) Close() error {
	err := r.cur.close()
	r.s.life.release()
	if err != nil {
		return fmt.Errorf("store: recovery: %w", err)
	}
	return nil
}

// NewestMsg is Store.NewestMsg.
func (r *Recovery) NewestMsg(stream uint64) (Message, error) {
	return newestMsg(r.cur, stream)
}

// Expiring is Store.Expiring.
func (r *Recovery) Expiring(stream uint64, before int64, fn func(seq uint64, expires int64) error) error {
	return expiring(r.cur, stream, before, fn)
}

// DedupSince is Store.DedupSince.
func (r *Recovery) DedupSince(stream uint64, since int64, fn func(DedupEntry) error) error {
	return dedupSince(r.cur, stream, since, fn)
}

// Consumers is Store.Consumers.
func (r *Recovery) Consumers(stream uint64, fn func(ConsumerRecord) error) error {
	lo := dataPrefix(nil, stream, kindConsumer)
	return consumers(r.cur, stream, lo, prefixEnd(append([]byte(nil), lo...)), fn)
}
