package store

// engine is the ordered key-value layer under a Store: Pebble or the memory
// B-tree. It knows nothing of streams; the Store's key layout and codec sit
// above it, shared by both, so both engines answer reads identically.
//
// Threading: every method is safe for concurrent use. Reads see only
// committed batches, and each commit becomes visible atomically.
type engine interface {
	reader
	// newCursor returns a reader for many reads in ascending key order
	// (start-up's reads of every stream), which positions one iterator
	// instead of opening one per read. It sees at least what was committed
	// when it was made; the caller closes it.
	newCursor() (cursor, error)
	// snapshot returns a reader frozen at the moment it is made: later
	// commits are invisible to it, so a long read (a raft snapshot streamed
	// to a follower) sees one consistent state. The caller closes it.
	snapshot() (cursor, error)
	// newBatch returns an empty batch for this engine.
	newBatch() engineBatch
	// sync makes every committed batch durable.
	sync() error
	close() error
}

// reader is the read side of an engine.
type reader interface {
	// get calls fn with the value stored at key, or returns errKeyNotFound.
	// The value is valid only during fn.
	get(key []byte, fn func(v []byte) error) error
	// scan calls fn for each key in [lower, upper), ascending or, when
	// reverse, descending, until fn returns false or an error. Keys and
	// values are valid only during fn. A nil upper means no upper bound.
	scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error
}

// cursor is a reader over one iterator: reads are cheapest when each
// starts at or after where the previous one ended. Not safe for
// concurrent use.
type cursor interface {
	reader
	close() error
}

// seekCursor is the cursor of a reader with no iterator worth keeping:
// the memory B-tree answers every seek in O(log n) anyway, and a batch's
// read-only view is read by apply steps a few keys at a time, never by
// start-up, so each read is its own seek.
type seekCursor struct{ reader }

func (seekCursor) close() error { return nil }

// engineBatch collects writes for one atomic commit. A batch is used by one
// goroutine at a time.
type engineBatch interface {
	set(k, v []byte)
	del(k []byte)
	delRange(start, end []byte)
	// reader returns a read-only engine that sees the committed store
	// with this batch's writes on top, those made after reader too, until
	// the batch is committed or reset. The first call may cost a copy of
	// the writes so far; the batch stays usable for writes.
	reader() engine
	// commit applies the batch atomically, fsynced first when sync is set.
	// After a failed commit the batch must not be reused.
	commit(sync bool) error
	// size is the encoded size in bytes; count the number of writes.
	size() int
	count() int
	reset()
	// release returns the batch's memory; the batch is unusable afterwards.
	release()
	// encoded is the batch's writes in the engine's own encoding, valid
	// until the next write or reset; appendEncoded adds the writes of an
	// encoding taken from a batch of the same engine kind (on another
	// node), all or none of them.
	encoded() []byte
	appendEncoded(r []byte) error
}

// errKeyNotFound is the engines' not-found; the Store turns it into an
// ErrNotFound naming the record.
var errKeyNotFound = ErrNotFound
