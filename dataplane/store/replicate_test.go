package store

import (
	"bytes"
	"fmt"
	"testing"
)

// fillEntry writes what a partition leader's group writes: messages (whose
// subject index records wait in runs), a dedup entry, a deletion, a range
// purge and a state summary, so a Repr carries every kind of write.
func fillEntry(b *Batch, stream uint64, from, n int) {
	for i := from; i < from+n; i++ {
		b.PutMsg(stream, msg(uint64(i), fmt.Sprintf("orders.%d", i%3), fmt.Sprintf("body %d", i)))
	}
	b.PutDedup(stream, DedupEntry{ID: fmt.Sprintf("id-%d", from), Seq: uint64(from), Time: int64(from)})
	b.DeleteMsg(stream, uint64(from), fmt.Sprintf("orders.%d", from%3))
	b.PurgeRange(stream, uint64(from+1), uint64(from+1))
	b.PutStreamState(stream, StreamState{FirstSeq: uint64(from + 2), LastSeq: uint64(from + n - 1)})
}

// entryRepr is the Repr of a batch fillEntry wrote, as a partition
// leader proposes it: a copy the batch no longer owns.
func entryRepr(s *Store, stream uint64, n int) []byte {
	b := s.NewBatch()
	defer b.Close()
	fillEntry(b, stream, 1, n)
	return bytes.Clone(b.Repr())
}

// TestAppendReprReplays checks that a batch built from other batches'
// Reprs commits exactly what committing those batches does: what every
// replica of a partition relies on.
func TestAppendReprReplays(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			leader, replica := e.open(t), e.open(t)
			defer leader.close()
			defer replica.close()
			var entries [][]byte
			for g := range 3 {
				b := leader.s.NewBatch()
				fillEntry(b, 7, 1+g*10, 8)
				entries = append(entries, bytes.Clone(b.Repr()))
				if err := b.Commit(true); err != nil {
					t.Fatalf("leader commit: %v", err)
				}
				b.Close()
			}
			b := replica.s.NewBatch()
			defer b.Close()
			for i, r := range entries {
				if err := b.AppendRepr(r); err != nil {
					t.Fatalf("append entry %d: %v", i, err)
				}
			}
			if err := b.Commit(true); err != nil {
				t.Fatalf("replica commit: %v", err)
			}
			want, got := dump(t, leader.s, nil, nil), dump(t, replica.s, nil, nil)
			if len(want) == 0 {
				t.Fatal("the leader wrote nothing")
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("replica holds %d records, leader %d; they differ", len(got), len(want))
			}
		})
	}
}

// TestAppendReprRefusesCorrupt checks that a repr that does not decode is
// ErrCorrupt and adds nothing to the batch.
func TestAppendReprRefusesCorrupt(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		good := entryRepr(h.s, 3, 4)
		flipped := bytes.Clone(good)
		flipped[len(flipped)/2] ^= 0xff
		bad := map[string][]byte{
			"truncated":   good[:len(good)-3],
			"header only": good[:min(len(good), 5)],
			"garbage":     bytes.Repeat([]byte{0xfe}, 40),
		}
		if h.kind == "pebble" {
			// The memory engine's encoding has no count to disagree with.
			more := bytes.Clone(good)
			more[8]++ // Pebble's header: seqnum(8) count(4)
			bad["count off"] = more
		}
		for name, r := range bad {
			b := h.s.NewBatch()
			b.PutStreamState(9, StreamState{LastSeq: 1})
			before := b.Count()
			err := b.AppendRepr(r)
			wantErr(t, err, ErrCorrupt)
			if b.Count() != before {
				t.Errorf("%s: the batch went from %d to %d writes", name, before, b.Count())
			}
			b.Close()
		}
		// A flipped byte inside a value still decodes; the records'
		// own checksums catch it when read, which is not this layer's
		// job. It must not crash the batch either way.
		b := h.s.NewBatch()
		_ = b.AppendRepr(flipped)
		b.Close()
	})
}

// TestAppendReprKeepsCallersBytes checks that AppendRepr never lets a
// batch write into the slice it was given: raft's log cache holds that
// slice and serves it again to followers and to the FSM on replay.
func TestAppendReprKeepsCallersBytes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		r := entryRepr(h.s, 5, 6)
		saved := bytes.Clone(r)
		// Batches come from a pool: go round it enough times that a batch
		// that held r is handed out again and written to.
		for i := range 64 {
			b := h.s.NewBatch()
			if err := b.AppendRepr(r); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			b.Close()
			for range 4 {
				w := h.s.NewBatch()
				fillEntry(w, 6, 100+i, 5)
				w.Close()
			}
			if !bytes.Equal(r, saved) {
				t.Fatalf("round %d: the caller's entry bytes were overwritten", i)
			}
		}
	})
}

// BenchmarkAppendRepr is a partition member's cost of taking one entry
// (one applied group of 256 messages) into its FSM batch.
func BenchmarkAppendRepr(b *testing.B) {
	h := openPebbleHarness(b)
	defer h.close()
	r := entryRepr(h.s, 5, 256)
	b.SetBytes(int64(len(r)))
	b.ReportAllocs()
	for b.Loop() {
		w := h.s.NewBatch()
		if err := w.AppendRepr(r); err != nil {
			b.Fatal(err)
		}
		w.Close()
	}
}
