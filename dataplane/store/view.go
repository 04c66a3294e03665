package store

import (
	"encoding/binary"
	"fmt"
)

// View is a read of the store frozen at the moment it was made: commits
// after it are invisible to it. Replicas compare what they hold at one
// raft index by taking a View while applying that index, then reading it
// at leisure off the apply path. A View keeps the store open (Close waits
// for it) and pins the engine's state, so close it promptly.
type View struct {
	s    *Store
	snap cursor
}

// View returns a frozen read of the store; the caller closes it.
func (s *Store) View() (*View, error) {
	if err := s.life.acquire(); err != nil {
		return nil, err
	}
	snap, err := s.eng.snapshot()
	if err != nil {
		s.life.release()
		return nil, fmt.Errorf("store: view: %w", err)
	}
	return &View{s: s, snap: snap}, nil
}

// Close releases the view.
func (v *View) Close() error {
	if v.snap == nil {
		return nil
	}
	err := v.snap.close()
	v.snap = nil
	v.s.life.release()
	return err
}

// StreamState is the stream's state summary as the view sees it: the
// summary every batch writes with its changes, so it describes exactly
// the messages the view holds. ErrNotFound if the stream has none.
func (v *View) StreamState(id uint64) (StreamState, error) {
	return streamState(v.snap, id)
}

// ScanMsgs is Store.ScanMsgs read from the view.
func (v *View) ScanMsgs(stream, first, last uint64, fn func(*Message) error) error {
	return scanMsgs(v.snap, stream, first, last, fn)
}

// StreamRecords is Store.StreamRecords read from the view.
func (v *View) StreamRecords(id uint64, fn func(key, payload []byte, meta bool) error) error {
	ranges := []keyRange{
		{catalogKey(nil, id, 0), prefixEnd(catalogKey(nil, id, 0)[:9])},
		{streamDataStart(nil, id), streamDataEnd(nil, id)},
	}
	visit := recordVisitor(func(_ uint64, key, payload []byte, meta bool) error { return fn(key, payload, meta) })
	for _, r := range ranges {
		if err := v.snap.scan(r.start, r.end, false, visit); err != nil {
			return fmt.Errorf("store: stream %d records: %w", id, err)
		}
	}
	return nil
}

// PartitionRecords calls fn with every record of every stream in raft
// partition group's id range (see StreamsIn), as StreamRecords gives
// them, with the id of the stream each belongs to. The order is the
// store's key order: first every stream's catalog records, then every
// stream's data records, so the records of any one stream come in the
// same order as StreamRecords gives them.
func (v *View) PartitionRecords(group uint16, fn func(id uint64, key, payload []byte, meta bool) error) error {
	if group == 0 {
		return fmt.Errorf("store: partition records: group 0 holds no streams")
	}
	visit := recordVisitor(fn)
	for _, r := range raftGroupRanges(group) {
		if err := v.snap.scan(r.start, r.end, false, visit); err != nil {
			return fmt.Errorf("store: partition %d records: %w", group, err)
		}
	}
	return nil
}

// recordVisitor turns fn into a scan callback over stream records: each
// value is verified against its checksum, and fn gets the payload and
// the key with the stream id cut out (the prefix byte, then what follows
// the id), so two stores holding one stream under different ids give the
// same sequence.
func recordVisitor(fn func(id uint64, key, payload []byte, meta bool) error) func(k, v []byte) (bool, error) {
	var rel []byte
	return func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if len(k) < 9 {
			return false, corruptf(k, "short stream key")
		}
		rel = append(append(rel[:0], k[0]), k[9:]...)
		meta := k[0] == prefixCatalog && len(k) == 10 && k[9] == catalogMeta
		return true, fn(binary.BigEndian.Uint64(k[1:9]), rel, p, meta)
	}
}
