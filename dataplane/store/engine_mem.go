package store

import (
	"bytes"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/RaduBerinde/btreemap"
)

// memEngine keeps the key space in a copy-on-write B-tree. Writers apply a
// batch to a private tree under mu and then publish a lazy clone of it;
// readers load the published clone and never lock, so a scan sees one
// consistent version no matter how long it runs or what it calls.
type memEngine struct {
	mu struct {
		sync.Mutex
		// tree is the writers' tree. Guarded by mu; never read by readers.
		tree *btreemap.BTreeMap[[]byte, []byte]
	}
	// snap is the latest published version. Invariant: never mutated after
	// it is stored, so readers need no lock.
	snap atomic.Pointer[btreemap.BTreeMap[[]byte, []byte]]
}

// NewMem returns an empty in-memory store: the same key layout and reads as
// a Pebble store, nothing durable. Memory-storage streams and tests use it.
func NewMem() *Store {
	e := &memEngine{}
	e.mu.tree = btreemap.New[[]byte, []byte](32, bytes.Compare)
	e.snap.Store(e.mu.tree.Clone())
	s := newStore(e)
	if err := s.initFormat(); err != nil {
		panic(err) // cannot fail: memory commits do no I/O
	}
	return s
}

func (e *memEngine) get(key []byte, fn func(v []byte) error) error {
	_, v, ok := e.snap.Load().Get(key)
	if !ok {
		return errKeyNotFound
	}
	return fn(v)
}

func (e *memEngine) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	t := e.snap.Load()
	lo, hi := btreemap.GE(lower), btreemap.LT(upper)
	if upper == nil {
		hi = btreemap.Max[[]byte]()
	}
	var err error
	yield := func(k, v []byte) bool {
		var more bool
		more, err = fn(k, v)
		return more && err == nil
	}
	if reverse {
		t.DescendFunc(hi, lo, yield)
	} else {
		t.AscendFunc(lo, hi, yield)
	}
	return err
}

// newCursor reads like the engine itself: the B-tree answers each seek
// in O(log n) already, so there is no iterator to keep.
func (e *memEngine) newCursor() (cursor, error) { return memCursor{e}, nil }

type memCursor struct{ *memEngine }

func (memCursor) close() error { return nil }

func (e *memEngine) newBatch() engineBatch { return &memBatch{e: e} }

func (e *memEngine) sync() error  { return nil }
func (e *memEngine) close() error { return nil }

// apply runs a batch's writes against the writers' tree and publishes the
// result in one step.
func (e *memEngine) apply(repr []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.mu.tree
	for len(repr) > 0 {
		var op byte
		var k, v []byte
		op, k, v, repr = nextOp(repr)
		switch op {
		case opSet:
			t.ReplaceOrInsert(k, v)
		case opDel:
			t.Delete(k)
		case opDelRange:
			var doomed [][]byte
			t.AscendFunc(btreemap.GE(k), btreemap.LT(v), func(k, _ []byte) bool {
				doomed = append(doomed, k)
				return true
			})
			for _, k := range doomed {
				t.Delete(k)
			}
		}
	}
	e.snap.Store(t.Clone())
}

// memBatch encodes writes as op(1) len(k) k len(v) v, so merging batches is
// an append and a committed batch's keys and values become the tree's own
// (they are sliced from a copy that nothing else writes).
type memBatch struct {
	e    *memEngine
	repr []byte
	n    int
}

const (
	opSet byte = iota + 1
	opDel
	opDelRange
)

func (m *memBatch) put(op byte, k, v []byte) {
	m.repr = append(m.repr, op)
	m.repr = appendBytes(m.repr, k)
	m.repr = appendBytes(m.repr, v)
	m.n++
}

func nextOp(r []byte) (op byte, k, v, rest []byte) {
	op, r = r[0], r[1:]
	l, n := binary.Uvarint(r)
	k, r = r[n:n+int(l)], r[n+int(l):]
	l, n = binary.Uvarint(r)
	return op, k, r[n : n+int(l)], r[n+int(l):]
}

func (m *memBatch) set(k, v []byte)            { m.put(opSet, k, v) }
func (m *memBatch) del(k []byte)               { m.put(opDel, k, nil) }
func (m *memBatch) delRange(start, end []byte) { m.put(opDelRange, start, end) }
func (m *memBatch) size() int                  { return len(m.repr) }
func (m *memBatch) count() int                 { return m.n }
func (m *memBatch) reset()                     { m.repr, m.n = m.repr[:0], 0 }
func (m *memBatch) release()                   { m.repr, m.n = nil, 0 }

func (m *memBatch) merge(o engineBatch) {
	ob := o.(*memBatch)
	m.repr = append(m.repr, ob.repr...)
	m.n += ob.n
}

func (m *memBatch) commit(bool) error {
	if len(m.repr) > 0 {
		// The tree keeps slices of the copy, so the batch's buffer stays
		// reusable.
		m.e.apply(bytes.Clone(m.repr))
	}
	return nil
}
