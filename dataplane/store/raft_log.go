package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// RaftLog is one raft group's log and stable store, kept in the node's
// Store beside the data the group replicates, so there is one WAL and one
// stream of fsyncs for every group and every R1 stream. It implements
// raft.LogStore, raft.StableStore, raft.MonotonicLogStore and
// raft.CommitTrackingLogStore.
//
// Durability: StoreLogs, DeleteRange and the stable setters commit with
// fsync before returning. A vote that is not on disk before the reply is a
// double vote after a crash, and raft counts an appended entry towards a
// quorum as soon as StoreLogs returns.
//
// Every record is checksummed and verified on each read: a bad entry is an
// error wrapping ErrCorrupt, never an entry, and is never skipped.
//
// Threading: safe for concurrent use. Writers (raft's main goroutine
// appending, its snapshot goroutine compacting) are serialised by the
// group's mutex, which also guards the cached first and last index.
type RaftLog struct {
	s     *Store
	group uint16

	mu struct {
		sync.Mutex
		// loaded reports whether first and last are known. Invariant:
		// once loaded, they equal the lowest and highest index stored
		// (0, 0 when empty); every writer updates them under mu.
		loaded      bool
		first, last uint64
		// staged is the commit index raft staged for the next StoreLogs,
		// or 0.
		staged uint64
	}
}

// raftGroups holds a Store's RaftLogs, one per group, so every caller of
// Store.RaftLog shares one index cache.
type raftGroups struct {
	mu   sync.Mutex
	logs map[uint16]*RaftLog
	// pending holds, per group, a received and verified snapshot that
	// RestoreSnapshot has yet to install (raft_snapshot.go).
	pending map[uint16]staged
}

// RaftLog returns group's log and stable store. Every call for a group
// returns the same RaftLog. The memory engine serves it too (for tests):
// the same records, nothing durable.
func (s *Store) RaftLog(group uint16) (*RaftLog, error) {
	if err := s.life.acquire(); err != nil {
		return nil, err
	}
	defer s.life.release()
	s.raft.mu.Lock()
	defer s.raft.mu.Unlock()
	if l := s.raft.logs[group]; l != nil {
		return l, nil
	}
	if s.raft.logs == nil {
		s.raft.logs = map[uint16]*RaftLog{}
	}
	l := &RaftLog{s: s, group: group}
	s.raft.logs[group] = l
	return l, nil
}

var (
	_ raft.LogStore               = (*RaftLog)(nil)
	_ raft.StableStore            = (*RaftLog)(nil)
	_ raft.MonotonicLogStore      = (*RaftLog)(nil)
	_ raft.CommitTrackingLogStore = (*RaftLog)(nil)
)

// Group is the raft group this log belongs to.
func (l *RaftLog) Group() uint16 { return l.group }

// IsMonotonic reports true: entries are stored without gaps (StoreLogs
// refuses a gap), so raft empties the log after installing a snapshot
// instead of relying on a gap.
func (l *RaftLog) IsMonotonic() bool { return true }

// FirstIndex returns the lowest stored index, 0 when the log is empty.
func (l *RaftLog) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(); err != nil {
		return 0, err
	}
	return l.mu.first, nil
}

// LastIndex returns the highest stored index, 0 when the log is empty.
func (l *RaftLog) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(); err != nil {
		return 0, err
	}
	return l.mu.last, nil
}

// loadLocked reads the first and last index, once, with two bounded
// iterators over the group's log records.
func (l *RaftLog) loadLocked() error {
	if l.mu.loaded {
		return nil
	}
	first, last, err := l.bounds()
	if err != nil {
		return err
	}
	l.mu.first, l.mu.last, l.mu.loaded = first, last, true
	return nil
}

// bounds reads the lowest and highest stored index.
func (l *RaftLog) bounds() (first, last uint64, err error) {
	if err := l.s.life.acquire(); err != nil {
		return 0, 0, err
	}
	defer l.s.life.release()
	lo := raftKey(nil, l.group, raftKindLog)
	hi := prefixEnd(bytes.Clone(lo))
	edge := func(reverse bool) (uint64, error) {
		var idx uint64
		err := l.s.eng.scan(lo, hi, reverse, func(k, _ []byte) (bool, error) {
			if len(k) != len(lo)+8 {
				return false, corruptf(k, "bad log entry key")
			}
			idx = binary.BigEndian.Uint64(k[len(lo):])
			return false, nil
		})
		return idx, err
	}
	if first, err = edge(false); err != nil {
		return 0, 0, fmt.Errorf("store: raft group %d first index: %w", l.group, err)
	}
	if last, err = edge(true); err != nil {
		return 0, 0, fmt.Errorf("store: raft group %d last index: %w", l.group, err)
	}
	return first, last, nil
}

// GetLog reads the entry at index into log. A missing entry is
// raft.ErrLogNotFound itself (raft compares it with ==).
func (l *RaftLog) GetLog(index uint64, log *raft.Log) error {
	if err := l.s.life.acquire(); err != nil {
		return err
	}
	defer l.s.life.release()
	key := raftLogKey(nil, l.group, index)
	err := l.s.eng.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		return decodeRaftLog(key, p, index, log)
	})
	if errors.Is(err, errKeyNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("store: raft group %d get log %d: %w", l.group, index, err)
	}
	return nil
}

// StoreLog stores one entry (see StoreLogs).
func (l *RaftLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores entries in one batch, fsynced before it returns, with
// the commit index raft staged since the last call. The entries must
// continue the log without a gap (the first one is LastIndex+1 unless the
// log is empty) and be consecutive; anything else is refused, as
// IsMonotonic promises raft.
func (l *RaftLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(); err != nil {
		return err
	}
	if l.mu.last != 0 && logs[0].Index != l.mu.last+1 {
		return fmt.Errorf("store: raft group %d: entry %d does not follow the last stored entry %d", l.group, logs[0].Index, l.mu.last)
	}
	b := l.s.NewBatch()
	defer b.Close()
	for i, e := range logs {
		if i > 0 && e.Index != logs[i-1].Index+1 {
			return fmt.Errorf("store: raft group %d: entry %d follows entry %d", l.group, e.Index, logs[i-1].Index)
		}
		b.key = raftLogKey(b.key[:0], l.group, e.Index)
		b.val = appendRaftLog(b.val[:0], e)
		b.setVal(b.key)
	}
	staged := l.mu.staged
	if staged != 0 {
		b.key = raftKey(b.key[:0], l.group, raftKindCommit)
		b.val = binary.AppendUvarint(b.val[:0], staged)
		b.setVal(b.key)
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d store %d entries from %d: %w", l.group, len(logs), logs[0].Index, err)
	}
	if l.mu.first == 0 {
		l.mu.first = logs[0].Index
	}
	l.mu.last = logs[len(logs)-1].Index
	if l.mu.staged == staged {
		l.mu.staged = 0
	}
	return nil
}

// DeleteRange removes the entries with index in [min, max] with one range
// delete, fsynced. Raft uses it to compact the head and to cut a
// conflicting tail.
func (l *RaftLog) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.s.NewBatch()
	defer b.Close()
	b.key = raftLogKey(b.key[:0], l.group, min)
	if max == ^uint64(0) {
		b.key2 = prefixEnd(raftKey(b.key2[:0], l.group, raftKindLog))
	} else {
		b.key2 = raftLogKey(b.key2[:0], l.group, max+1)
	}
	b.w.delRange(b.key, b.key2)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d delete entries [%d, %d]: %w", l.group, min, max, err)
	}
	// Re-read rather than reason about where the range fell: two seeks.
	l.mu.loaded = false
	return l.loadLocked()
}

// StageCommitIndex records index to be written with the next StoreLogs,
// atomically with its entries (raft.CommitTrackingLogStore).
func (l *RaftLog) StageCommitIndex(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.staged = index
	return nil
}

// GetCommitIndex returns the commit index last written with entries,
// never above LastIndex, and never at or beyond a configuration entry
// the applied state does not hold yet; 0 when none was written.
//
// Why the second bound: at start, raft (v1.8) applies the entries up to
// this index through the FSM and then looks for the membership only in
// the entries after it; it takes the membership of the entries it
// applied from the snapshot, which here is the applied state. The FSM
// commits without fsync, so after a kill the applied state can lag the
// commit index stored with the entries. A configuration entry in
// between, such as the bootstrap's entry 1 on a node killed seconds
// after the cluster formed, was then seen by neither path: the node came
// back with no members, followed the leader, and never counted itself
// current. Stopping just before that entry lets raft's scan find it; the
// entries from it on are applied when the leader next says they are
// committed.
func (l *RaftLog) GetCommitIndex() (uint64, error) {
	idx, err := l.s.getUvarint(raftKey(nil, l.group, raftKindCommit))
	if errors.Is(err, errKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: raft group %d commit index: %w", l.group, err)
	}
	first, err := l.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := l.LastIndex()
	if err != nil {
		return 0, err
	}
	idx = min(idx, last)
	from, err := l.unappliedFrom()
	if err != nil {
		return 0, err
	}
	var e raft.Log
	for i := max(from, first); i <= idx; i++ {
		if err := l.GetLog(i, &e); err != nil {
			return 0, err
		}
		if e.Type == raft.LogConfiguration {
			return i - 1, nil
		}
	}
	return idx, nil
}

// unappliedFrom is the first index the group's applied state does not
// cover (1 when nothing was applied).
func (l *RaftLog) unappliedFrom() (uint64, error) {
	if err := l.s.life.acquire(); err != nil {
		return 0, err
	}
	defer l.s.life.release()
	a, _, err := readApplied(l.s.eng, l.group)
	if err != nil {
		return 0, fmt.Errorf("store: raft group %d applied state: %w", l.group, err)
	}
	return a.index + 1, nil
}

// Set stores a stable value (raft's current term and vote), fsynced.
func (l *RaftLog) Set(key, val []byte) error {
	b := l.s.NewBatch()
	defer b.Close()
	b.key = raftStableKey(b.key[:0], l.group, key)
	b.set(b.key, val)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d set %q: %w", l.group, key, err)
	}
	return nil
}

// Get returns a stable value. A missing key is ErrNotFound itself, whose
// text raft checks for ("not found").
func (l *RaftLog) Get(key []byte) ([]byte, error) {
	if err := l.s.life.acquire(); err != nil {
		return nil, err
	}
	defer l.s.life.release()
	k := raftStableKey(nil, l.group, key)
	var out []byte
	err := l.s.eng.get(k, func(v []byte) error {
		p, err := unseal(k, v)
		out = append([]byte{}, p...)
		return err
	})
	if errors.Is(err, errKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: raft group %d get %q: %w", l.group, key, err)
	}
	return out, nil
}

// SetUint64 stores a stable integer, fsynced.
func (l *RaftLog) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a stable integer; a missing key is ErrNotFound itself
// (see Get).
func (l *RaftLog) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, corruptf(raftStableKey(nil, l.group, key), "integer of %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// NeedsRepair reports whether the group is marked for repair (see
// Store.SetRepair).
func (l *RaftLog) NeedsRepair() (bool, error) { return l.s.NeedsRepair(l.group) }

// CachedRaftLog is a RaftLog behind a cache of the most recently stored
// entries, which a leader's replication reads back at once for each
// follower. It is bounded twice: by entries, and by the bytes their data
// holds, because one partition entry carries a whole take of messages (up
// to megabytes) and a cache of a fixed number of such entries let a
// tenant's flood pin gigabytes per node (measured: 512 entries of about
// 800 KB in each of four groups). A read the cache cannot serve goes to
// the log. It also forwards the commit index, which raft needs for
// RestoreCommittedLogs.
//
// Invariant: the cache holds entries with indexes in [lo, last] only, each
// in slot index%len(ring), and bytes is the sum of entrySize over them.
type CachedRaftLog struct {
	log      *RaftLog
	maxBytes int64

	mu       sync.RWMutex
	ring     []*raft.Log
	lo, last uint64
	bytes    int64
}

var (
	_ raft.CommitTrackingLogStore = (*CachedRaftLog)(nil)
	_ raft.MonotonicLogStore      = (*CachedRaftLog)(nil)
)

// What a node's raft groups cache each (see CachedRaftLog): 512 entries
// and 8 MiB of their data, so the cache pins a bounded amount of memory
// however large one take's entry is.
const (
	LogCacheEntries = 512
	LogCacheBytes   = 8 << 20
)

// Cached returns the log behind a cache of at most entries entries and
// maxBytes bytes of their data.
func (l *RaftLog) Cached(entries int, maxBytes int64) (*CachedRaftLog, error) {
	if entries < 1 || maxBytes < 1 {
		return nil, fmt.Errorf("store: raft group %d log cache: %d entries, %d bytes: both must be positive", l.group, entries, maxBytes)
	}
	c := &CachedRaftLog{log: l, maxBytes: maxBytes, ring: make([]*raft.Log, entries)}
	c.resetLocked()
	return c, nil
}

// entrySize is what one cached entry counts against the byte bound.
func entrySize(e *raft.Log) int64 { return int64(len(e.Data) + len(e.Extensions)) }

// StoreLog stores one entry.
func (c *CachedRaftLog) StoreLog(e *raft.Log) error { return c.StoreLogs([]*raft.Log{e}) }

// StoreLogs stores entries in the log and then, only on success, in the
// cache, evicting the oldest cached entries past either bound.
func (c *CachedRaftLog) StoreLogs(entries []*raft.Log) error {
	if err := c.log.StoreLogs(entries); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(len(c.ring))
	for _, e := range entries {
		if c.last < c.lo || e.Index <= c.last || e.Index > c.last+n {
			// Empty, rewritten (raft deletes before it rewrites, which
			// clears the cache, so this is defensive), or past a gap
			// wider than the ring: start afresh at e.
			c.resetLocked()
			c.lo = e.Index
		}
		c.last = e.Index
		for c.lo+n <= c.last { // the slot e takes leaves the window
			c.evictLocked()
		}
		c.ring[e.Index%n] = e
		c.bytes += entrySize(e)
		for c.bytes > c.maxBytes && c.lo <= c.last {
			c.evictLocked()
		}
	}
	return nil
}

// evictLocked drops the oldest cached entry, lo.
func (c *CachedRaftLog) evictLocked() {
	slot := &c.ring[c.lo%uint64(len(c.ring))]
	if *slot != nil && (*slot).Index == c.lo {
		c.bytes -= entrySize(*slot)
		*slot = nil
	}
	c.lo++
}

// resetLocked empties the cache: an empty window is last < lo.
func (c *CachedRaftLog) resetLocked() {
	clear(c.ring)
	c.lo, c.last, c.bytes = 1, 0, 0
}

// GetLog serves index from the cache, or else from the log.
func (c *CachedRaftLog) GetLog(index uint64, out *raft.Log) error {
	c.mu.RLock()
	e := c.ring[index%uint64(len(c.ring))]
	c.mu.RUnlock()
	if e != nil && e.Index == index {
		*out = *e
		return nil
	}
	return c.log.GetLog(index, out)
}

// DeleteRange deletes from the log, after emptying the cache: raft
// deletes only to compact or to rewrite a conflicting suffix, and
// neither is frequent enough to be worth keeping part of the cache.
func (c *CachedRaftLog) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
	return c.log.DeleteRange(lo, hi)
}

// FirstIndex forwards to the RaftLog.
func (c *CachedRaftLog) FirstIndex() (uint64, error) { return c.log.FirstIndex() }

// LastIndex forwards to the RaftLog.
func (c *CachedRaftLog) LastIndex() (uint64, error) { return c.log.LastIndex() }

// IsMonotonic forwards to the RaftLog.
func (c *CachedRaftLog) IsMonotonic() bool { return c.log.IsMonotonic() }

// StageCommitIndex forwards to the RaftLog.
func (c *CachedRaftLog) StageCommitIndex(index uint64) error { return c.log.StageCommitIndex(index) }

// GetCommitIndex forwards to the RaftLog.
func (c *CachedRaftLog) GetCommitIndex() (uint64, error) { return c.log.GetCommitIndex() }

// getUvarint reads a sealed uvarint record.
func (s *Store) getUvarint(key []byte) (uint64, error) {
	if err := s.life.acquire(); err != nil {
		return 0, err
	}
	defer s.life.release()
	var out uint64
	err := s.eng.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		d := decoder{key: key, p: p}
		out = d.uvarint()
		return d.finish()
	})
	return out, err
}
