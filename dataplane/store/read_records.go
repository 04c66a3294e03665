package store

import "fmt"

// StreamRecords calls fn with every record stream id owns, in key order,
// read from one consistent snapshot: its catalog records (metadata, then
// state summary), then its data records (messages, subject index, expiry
// and dedup entries, consumers). Each value is verified against its
// checksum first; fn gets the payload. The key fn gets is the record's
// key with the stream id cut out (the prefix byte, then what follows the
// id), so two stores holding the same stream under different ids (an R1
// copy and a replica) give the same sequence. Key and payload are valid
// only during fn; meta is true for the metadata record (name and
// configuration).
func (s *Store) StreamRecords(id uint64, fn func(key, payload []byte, meta bool) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	snap, err := s.eng.snapshot()
	if err != nil {
		return fmt.Errorf("store: stream %d records: %w", id, err)
	}
	defer snap.close()
	var rel []byte
	visit := func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if len(k) < 9 {
			return false, corruptf(k, "short stream key")
		}
		rel = append(append(rel[:0], k[0]), k[9:]...)
		meta := k[0] == prefixCatalog && len(k) == 10 && k[9] == catalogMeta
		return true, fn(rel, p, meta)
	}
	ranges := []keyRange{
		{catalogKey(nil, id, 0), prefixEnd(catalogKey(nil, id, 0)[:9])},
		{streamDataStart(nil, id), streamDataEnd(nil, id)},
	}
	for _, r := range ranges {
		if err := snap.scan(r.start, r.end, false, visit); err != nil {
			return fmt.Errorf("store: stream %d records: %w", id, err)
		}
	}
	return nil
}
