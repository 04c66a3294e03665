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
	v, err := s.View()
	if err != nil {
		return fmt.Errorf("store: stream %d records: %w", id, err)
	}
	defer v.Close()
	return v.StreamRecords(id, fn)
}
