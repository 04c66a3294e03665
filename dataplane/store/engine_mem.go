package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
	return treeGet(e.snap.Load(), key, fn)
}

func (e *memEngine) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return treeScan(e.snap.Load(), lower, upper, reverse, fn)
}

type memTree = btreemap.BTreeMap[[]byte, []byte]

func treeGet(t *memTree, key []byte, fn func(v []byte) error) error {
	_, v, ok := t.Get(key)
	if !ok {
		return errKeyNotFound
	}
	return fn(v)
}

func treeScan(t *memTree, lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
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

// newCursor reads like the engine itself (see seekCursor).
func (e *memEngine) newCursor() (cursor, error) { return seekCursor{e}, nil }

// snapshot is the published tree, which is never mutated: holding it is
// the snapshot.
func (e *memEngine) snapshot() (cursor, error) { return seekCursor{treeReader{e.snap.Load()}}, nil }

// treeReader reads one immutable tree.
type treeReader struct{ t *memTree }

func (r treeReader) get(key []byte, fn func(v []byte) error) error { return treeGet(r.t, key, fn) }
func (r treeReader) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return treeScan(r.t, lower, upper, reverse, fn)
}

func (e *memEngine) newBatch() engineBatch { return &memBatch{e: e} }

func (e *memEngine) sync() error  { return nil }
func (e *memEngine) close() error { return nil }

// apply runs a batch's writes against the writers' tree and publishes the
// result in one step.
func (e *memEngine) apply(repr []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	applyOps(e.mu.tree, repr)
	e.snap.Store(e.mu.tree.Clone())
}

// applyOps runs encoded writes against t; t keeps slices of repr.
func applyOps(t *memTree, repr []byte) {
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
}

// memBatch encodes writes as op(1) len(k) k len(v) v, so merging batches is
// an append and a committed batch's keys and values become the tree's own
// (they are sliced from a copy that nothing else writes).
type memBatch struct {
	e    *memEngine
	repr []byte
	n    int
	// view, once reader was called, is the published tree with the
	// batch's writes applied; nil otherwise.
	view *memTree
}

const (
	opSet byte = iota + 1
	opDel
	opDelRange
)

func (m *memBatch) put(op byte, k, v []byte) {
	start := len(m.repr)
	m.repr = append(m.repr, op)
	m.repr = appendBytes(m.repr, k)
	m.repr = appendBytes(m.repr, v)
	m.n++
	if m.view != nil {
		// A clone per write: a scan running over the view (which may be
		// what is writing) keeps its version. The view keeps slices of
		// its own copy, as repr's buffer is reused.
		m.view = m.view.Clone()
		applyOps(m.view, bytes.Clone(m.repr[start:]))
	}
}

func (m *memBatch) reader() engine {
	if m.view == nil {
		m.view = m.e.snap.Load().Clone()
		applyOps(m.view, bytes.Clone(m.repr))
	}
	return memView{m}
}

// memView reads a memBatch's view.
type memView struct{ m *memBatch }

func (v memView) get(key []byte, fn func(v []byte) error) error { return treeGet(v.m.view, key, fn) }
func (v memView) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return treeScan(v.m.view, lower, upper, reverse, fn)
}
func (memView) newBatch() engineBatch { panic("store: a batch's reader is read-only") }
func (memView) sync() error           { panic("store: a batch's reader is read-only") }
func (memView) close() error          { return nil }

func (memView) snapshot() (cursor, error) { panic("store: a batch's reader has no snapshots") }

func (v memView) newCursor() (cursor, error) { return seekCursor{v}, nil }

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
func (m *memBatch) reset()                     { m.repr, m.n, m.view = m.repr[:0], 0, nil }
func (m *memBatch) release()                   { m.repr, m.n, m.view = nil, 0, nil }

func (m *memBatch) encoded() []byte { return m.repr }

func (m *memBatch) appendEncoded(r []byte) error {
	for rest := r; len(rest) > 0; {
		var ok bool
		if _, _, _, rest, ok = nextOpChecked(rest); !ok {
			return fmt.Errorf("store: batch repr: %w", ErrCorrupt)
		}
	}
	for len(r) > 0 {
		op, k, v, rest, _ := nextOpChecked(r)
		m.put(op, k, v)
		r = rest
	}
	return nil
}

// nextOpChecked is nextOp for a repr that came from elsewhere: a length
// past the end, or an unknown op, is reported instead of read.
func nextOpChecked(r []byte) (op byte, k, v, rest []byte, ok bool) {
	if len(r) < 1 || r[0] < opSet || r[0] > opDelRange {
		return 0, nil, nil, nil, false
	}
	op, r = r[0], r[1:]
	l, n := binary.Uvarint(r)
	if n <= 0 || l > uint64(len(r)-n) {
		return 0, nil, nil, nil, false
	}
	k, r = r[n:n+int(l)], r[n+int(l):]
	l, n = binary.Uvarint(r)
	if n <= 0 || l > uint64(len(r)-n) {
		return 0, nil, nil, nil, false
	}
	return op, k, r[n : n+int(l)], r[n+int(l):], true
}

func (m *memBatch) commit(bool) error {
	if len(m.repr) > 0 {
		// The tree keeps slices of the copy, so the batch's buffer stays
		// reusable.
		m.e.apply(bytes.Clone(m.repr))
	}
	return nil
}

// eachSet implements reprSetter.
func (m *memEngine) eachSet(r []byte, fn func(k, v []byte) error) error {
	for len(r) > 0 {
		op, k, v, rest, ok := nextOpChecked(r)
		if !ok {
			return fmt.Errorf("store: batch repr: %w", ErrCorrupt)
		}
		if op == opSet {
			if err := fn(k, v); err != nil {
				return err
			}
		}
		r = rest
	}
	return nil
}
