package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Store is one node's JetStream store: every stream's messages, indexes,
// state summaries, dedup and consumer records, in one ordered key space.
//
// Threading: all methods are safe for concurrent use. Reads run in parallel
// with each other and with commits, and see each committed batch entirely
// or not at all. Callbacks passed to scans run on the caller's goroutine
// and may call other Store methods. Close waits for running calls to finish;
// calls that start after it return ErrClosed.
type Store struct {
	eng  engine
	life lifecycle
	pool sync.Pool // *Batch
	// raft holds one RaftLog per raft group (raft_log.go).
	raft raftGroups
}

func newStore(e engine) *Store {
	s := &Store{eng: e}
	s.life.drained = make(chan struct{})
	return s
}

// initFormat writes the format record into an empty store and refuses a
// store written in another format.
func (s *Store) initFormat() error {
	var version uint64
	err := s.eng.get(formatKey, func(v []byte) error {
		p, err := unseal(formatKey, v)
		if err != nil {
			return err
		}
		var n int
		if version, n = binary.Uvarint(p); n <= 0 {
			return corruptf(formatKey, "bad version")
		}
		return nil
	})
	switch {
	case errors.Is(err, errKeyNotFound):
		b := s.NewBatch()
		defer b.Close()
		b.set(formatKey, binary.AppendUvarint(nil, formatVersion))
		return b.Commit(true)
	case err != nil:
		return fmt.Errorf("store: read format: %w", err)
	case version != formatVersion:
		return fmt.Errorf("store: format version %d, this build reads %d", version, formatVersion)
	}
	return nil
}

// NewBatch returns an empty batch for this store. Close it when done so its
// memory is reused.
func (s *Store) NewBatch() *Batch {
	if b, ok := s.pool.Get().(*Batch); ok {
		return b
	}
	return &Batch{s: s, w: s.eng.newBatch()}
}

// Close waits for running calls, then closes the engine. Stop whatever
// commits to the store first (the state machine's apply path): its later
// commits would fail with ErrClosed.
func (s *Store) Close() error {
	if err := s.life.close(); err != nil {
		return err
	}
	if err := s.eng.close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// lifecycle counts calls in progress so Close can wait for them without a
// lock on the read path. A nested call made from a scan callback during
// Close gets ErrClosed instead of deadlocking.
type lifecycle struct {
	// state is the number of calls in progress, plus closingBit once Close
	// has begun.
	state     atomic.Int64
	drainOnce sync.Once
	drained   chan struct{} // closed when closing and no call is in progress
}

const closingBit = 1 << 62

func (l *lifecycle) acquire() error {
	if l.state.Add(1)&closingBit != 0 {
		l.release()
		return errStoreClosed
	}
	return nil
}

func (l *lifecycle) release() {
	if l.state.Add(-1) == closingBit {
		l.drainOnce.Do(func() { close(l.drained) })
	}
}

func (l *lifecycle) close() error {
	old := l.state.Or(closingBit)
	if old&closingBit != 0 {
		return errStoreClosed
	}
	if old == 0 {
		l.drainOnce.Do(func() { close(l.drained) })
	}
	<-l.drained
	return nil
}
