package store

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// TestViewIsFrozen: a View reads what was committed when it was made, in
// StreamRecords' order and form, whatever is committed after it.
func TestViewIsFrozen(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		populate(h, "v")
		v, err := h.s.View()
		must(t, err)
		defer v.Close()
		records := func(read func(fn func(key, payload []byte, meta bool) error) error) []string {
			var out []string
			must(t, read(func(key, payload []byte, meta bool) error {
				out = append(out, fmt.Sprintf("%x=%x %v", key, payload, meta))
				return nil
			}))
			return out
		}
		const id = 1<<48 + 7
		before := records(func(fn func(key, payload []byte, meta bool) error) error { return h.s.StreamRecords(id, fn) })
		h.apply(func(b *Batch) { b.PutMsg(id, msg(4, "s.v", "later")) })
		if got := records(func(fn func(key, payload []byte, meta bool) error) error { return v.StreamRecords(id, fn) }); !slices.Equal(got, before) {
			t.Fatalf("the view saw a later commit:\n%q\n%q", got, before)
		}
		// PartitionRecords: both streams of partition 1, each in
		// StreamRecords' order; nothing of partition 2 or of R1 stream 5.
		per := map[uint64][]string{}
		must(t, v.PartitionRecords(1, func(sid uint64, key, payload []byte, meta bool) error {
			per[sid] = append(per[sid], fmt.Sprintf("%x=%x %v", key, payload, meta))
			return nil
		}))
		if len(per) != 2 || !slices.Equal(per[id], before) {
			t.Fatalf("partition records: %d streams, stream %d: %q", len(per), uint64(id), per[id])
		}
		if err := v.PartitionRecords(0, func(uint64, []byte, []byte, bool) error { return nil }); err == nil {
			t.Fatal("the meta group listed as a partition")
		}
	})
}

// TestResetGroup: a reset group has no state at all, and the other
// groups and R1 streams are untouched.
func TestResetGroup(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		populate(h, "r")
		rl, err := h.s.RaftLog(1)
		must(t, err)
		must(t, rl.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("x")}, {Index: 2, Term: 1, Data: []byte("y")}}))
		must(t, rl.SetUint64([]byte("CurrentTerm"), 3))
		must(t, h.s.SetRepair(1))
		other := groupDump(t, h.s, 2)
		must(t, h.s.ResetGroup(1))
		if d := groupDump(t, h.s, 1); len(d) != 0 {
			t.Fatalf("partition 1 keeps %d records", len(d))
		}
		if last, err := rl.LastIndex(); err != nil || last != 0 {
			t.Fatalf("last index %d, %v", last, err)
		}
		if _, err := rl.GetUint64([]byte("CurrentTerm")); err == nil {
			t.Fatal("the term survived the reset")
		}
		if idx, _, err := h.s.Applied(1); err != nil || idx != 0 {
			t.Fatalf("applied %d, %v", idx, err)
		}
		if has, err := h.s.HasState(1); err != nil || has {
			t.Fatalf("state after the reset: %v, %v", has, err)
		}
		if !sameDump(groupDump(t, h.s, 2), other) {
			t.Fatal("partition 2 changed")
		}
		if _, err := h.s.LoadStream(5); err != nil {
			t.Fatalf("R1 stream: %v", err)
		}
		if h.reopen() {
			if has, err := h.s.HasState(1); err != nil || has {
				t.Fatalf("state after reopen: %v, %v", has, err)
			}
		}
	})
}
