package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// harness is one store under test plus what the suite needs to reopen it
// and to write behind its back.
type harness struct {
	t    testing.TB
	kind string
	s    *Store
	fs   vfs.FS // Pebble only
}

// engines is the table of constructors every suite test runs against
// (STYLE.md #9): the same cases for Pebble and memory.
var engines = []struct {
	name string
	open func(t testing.TB) *harness
}{
	{"pebble", openPebbleHarness},
	{"mem", func(t testing.TB) *harness { return &harness{t: t, kind: "mem", s: NewMem()} }},
}

func openPebbleHarness(t testing.TB) *harness {
	h := &harness{t: t, kind: "pebble", fs: vfs.NewMem()}
	h.s = mustOpen(t, h.fs)
	return h
}

func mustOpen(t testing.TB, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open(Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// forEachEngine runs fn as a subtest per engine, closing the store after.
func forEachEngine(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			h := e.open(t)
			defer h.close()
			fn(t, h)
		})
	}
}

func (h *harness) close() {
	if h.s != nil {
		if err := h.s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			h.t.Errorf("close: %v", err)
		}
	}
}

// reopen closes and reopens a Pebble store on the same FS; it reports
// false for the memory engine, which has nothing to reopen from.
func (h *harness) reopen() bool {
	h.t.Helper()
	if h.fs == nil {
		return false
	}
	if err := h.s.Close(); err != nil {
		h.t.Fatalf("close before reopen: %v", err)
	}
	h.s = mustOpen(h.t, h.fs)
	return true
}

// apply builds one batch with fn and commits it with sync.
func (h *harness) apply(fn func(b *Batch)) {
	h.t.Helper()
	b := h.s.NewBatch()
	defer b.Close()
	fn(b)
	if err := b.Commit(true); err != nil {
		h.t.Fatalf("commit: %v", err)
	}
}

// rawSet writes val at key through the engine, bypassing the codec: the
// test-only way to plant corruption.
func (h *harness) rawSet(key, val []byte) {
	h.t.Helper()
	w := h.s.eng.newBatch()
	defer w.release()
	w.set(key, val)
	if err := w.commit(true); err != nil {
		h.t.Fatalf("raw set: %v", err)
	}
}

// rawGet returns the raw value at key, or nil.
func (h *harness) rawGet(key []byte) []byte {
	var out []byte
	_ = h.s.eng.get(key, func(v []byte) error { out = bytes.Clone(v); return nil })
	return out
}

// kv is one raw record.
type kv struct{ k, v []byte }

// dump returns every raw record in [lo, hi) (nil hi: to the end).
func dump(t testing.TB, s *Store, lo, hi []byte) []kv {
	t.Helper()
	var out []kv
	err := s.eng.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		out = append(out, kv{bytes.Clone(k), bytes.Clone(v)})
		return true, nil
	})
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	return out
}

func msg(seq uint64, subj, data string) *Message {
	return &Message{Seq: seq, Subject: subj, Data: []byte(data), Time: int64(seq) * 1000}
}

func mustLoad(t testing.TB, s *Store, stream, seq uint64) Message {
	t.Helper()
	m, err := s.LoadMsg(stream, seq)
	if err != nil {
		t.Fatalf("load %d/%d: %v", stream, seq, err)
	}
	return m
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}
