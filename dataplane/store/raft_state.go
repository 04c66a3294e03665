package store

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// PutApplied records that the group's FSM has applied the entry at
// {index, term}. Write it in the batch that carries the entry's writes:
// a restart then finds the state and the index that produced it together
// or not at all, and skips every entry at or below the index.
func (b *Batch) PutApplied(group uint16, index, term uint64) {
	b.key = raftKey(b.key[:0], group, raftKindApplied)
	b.val = appendIndexTerm(b.val[:0], index, term)
	b.setVal(b.key)
}

// PutAppliedConfig records a configuration entry the FSM applied (raft
// hands LogConfiguration entries to a BatchingFSM): the applied {index,
// term}, as PutApplied, and the configuration itself, which the group's
// snapshot reports. Raft rebuilds its configuration at start from the
// snapshot and the entries after it, so a configuration applied before
// the applied index and not recorded here would be forgotten.
func (b *Batch) PutAppliedConfig(group uint16, index, term uint64, conf raft.Configuration) {
	b.PutApplied(group, index, term)
	b.key = raftKey(b.key[:0], group, raftKindConfig)
	b.val = appendConfig(b.val[:0], index, conf)
	b.setVal(b.key)
}

// Applied returns the {index, term} last recorded with PutApplied (or
// PutAppliedConfig, or a snapshot install); 0, 0 when none was.
func (s *Store) Applied(group uint16) (index, term uint64, err error) {
	if err := s.life.acquire(); err != nil {
		return 0, 0, err
	}
	defer s.life.release()
	key := raftKey(nil, group, raftKindApplied)
	err = s.eng.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		index, term, err = decodeIndexTerm(key, p)
		return err
	})
	if errors.Is(err, errKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("store: raft group %d applied index: %w", group, err)
	}
	return index, term, nil
}

// readApplied reads what the group's snapshot describes from r: the later
// of the FSM's applied record and the snapshot floor, and the later of the
// applied configuration and the floor's. ok is false when the group has
// applied nothing.
func readApplied(r reader, group uint16) (a appliedState, ok bool, err error) {
	get := func(kind byte, fn func(key, p []byte) error) (bool, error) {
		key := raftKey(nil, group, kind)
		err := r.get(key, func(v []byte) error {
			p, err := unseal(key, v)
			if err != nil {
				return err
			}
			return fn(key, p)
		})
		if errors.Is(err, errKeyNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	haveApplied, err := get(raftKindApplied, func(key, p []byte) (err error) {
		a.index, a.term, err = decodeIndexTerm(key, p)
		return err
	})
	if err != nil {
		return a, false, err
	}
	_, err = get(raftKindConfig, func(key, p []byte) error {
		idx, conf, rest, err := decodeConfig(key, p)
		if err == nil && len(rest) != 0 {
			err = corruptf(key, "%d trailing bytes", len(rest))
		}
		a.confIndex, a.conf = idx, conf
		return err
	})
	if err != nil {
		return a, false, err
	}
	var floor appliedState
	haveFloor, err := get(raftKindFloor, func(key, p []byte) (err error) {
		floor, err = decodeFloor(key, p)
		return err
	})
	if err != nil {
		return a, false, err
	}
	if haveFloor {
		if floor.index > a.index {
			a.index, a.term = floor.index, floor.term
		}
		if floor.confIndex > a.confIndex {
			a.confIndex, a.conf = floor.confIndex, floor.conf
		}
	}
	return a, haveApplied || haveFloor, nil
}

// SetRepair marks the group for repair, fsynced: its state is not to be
// trusted (corruption detected, a snapshot install cut short, an empty
// store in an existing cluster) until it has been replaced. The marker
// survives restarts; while it is set the node must not vote in the group.
func (s *Store) SetRepair(group uint16) error {
	b := s.NewBatch()
	defer b.Close()
	b.key = raftKey(b.key[:0], group, raftKindRepair)
	b.set(b.key, nil)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d set repair marker: %w", group, err)
	}
	return nil
}

// ClearRepair removes the group's repair marker, fsynced.
func (s *Store) ClearRepair(group uint16) error {
	b := s.NewBatch()
	defer b.Close()
	b.key = raftKey(b.key[:0], group, raftKindRepair)
	b.w.del(b.key)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d clear repair marker: %w", group, err)
	}
	return nil
}

// NeedsRepair reports whether the group's repair marker is set. A marker
// that fails its checksum is reported as set, with the error: either way
// the group's state is not to be trusted.
func (s *Store) NeedsRepair(group uint16) (bool, error) {
	if err := s.life.acquire(); err != nil {
		return false, err
	}
	defer s.life.release()
	key := raftKey(nil, group, raftKindRepair)
	err := s.eng.get(key, func(v []byte) error {
		_, err := unseal(key, v)
		return err
	})
	switch {
	case errors.Is(err, errKeyNotFound):
		return false, nil
	case err != nil:
		return true, fmt.Errorf("store: raft group %d repair marker: %w", group, err)
	}
	return true, nil
}

// HasState reports whether the store holds anything of the group's raft
// state: a log entry, a stable value (term, vote), an applied record, a
// repair marker. A node without it that belongs to an existing cluster
// was wiped, and must rejoin as a new member instead of voting or
// bootstrapping; only when no peer has state is the cluster new.
func (s *Store) HasState(group uint16) (bool, error) {
	if err := s.life.acquire(); err != nil {
		return false, err
	}
	defer s.life.release()
	lo := raftPrefix(nil, group)
	hi := prefixEnd(bytes.Clone(lo))
	found := false
	err := s.eng.scan(lo, hi, false, func(k, _ []byte) (bool, error) {
		// A staged snapshot (the last kind, so nothing follows it) is a
		// receive cut short; alone it is still no state.
		found = len(k) < 4 || k[3] != raftKindStaging
		return false, nil
	})
	if err != nil {
		return false, fmt.Errorf("store: raft group %d state: %w", group, err)
	}
	return found, nil
}

// ResetGroup discards everything the store holds of raft group group:
// its log, stable values (term, vote, server id), applied index,
// configuration, snapshots, repair marker and the records it replicates,
// in one fsynced batch. The group then starts as on a node that never had
// it, and rejoins its cluster as a new member: that is how a replica
// found divergent, or one whose snapshot install was cut short
// (NeedsRepair), is repaired. Call it only while no raft instance runs
// the group.
func (s *Store) ResetGroup(group uint16) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	s.raft.mu.Lock()
	defer s.raft.mu.Unlock()
	delete(s.raft.pending, group)
	b := s.NewBatch()
	defer b.Close()
	lo := raftPrefix(nil, group)
	b.w.delRange(lo, prefixEnd(bytes.Clone(lo)))
	for _, kr := range raftGroupRanges(group) {
		b.w.delRange(kr.start, kr.end)
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: reset raft group %d: %w", group, err)
	}
	if l := s.raft.logs[group]; l != nil {
		l.mu.Lock()
		l.mu.loaded, l.mu.first, l.mu.last, l.mu.staged = false, 0, 0, 0
		l.mu.Unlock()
	}
	return nil
}
