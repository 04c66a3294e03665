package store

import "testing"

// TestReprSegments reads back the manifest entries a batch's Repr
// writes, erased mark included, and nothing else, on both engines.
func TestReprSegments(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		b := h.s.NewBatch()
		defer b.Close()
		b.PutMsg(7, &Message{Seq: 1, Subject: "a", Data: []byte("x"), Time: 1})
		want := Segment{First: 1, Last: 9, Key: "k/1.seg", Size: 100, IndexOff: 80, Msgs: 9, Bytes: 90,
			Live: 8, LiveBytes: 80, MinTime: 1, MaxTime: 9, Erased: true}
		b.PutSegment(7, &want)
		b.PutPendingObject(PendingObject{Stream: 7, Key: "k/2.seg", Time: 3})
		b.DeleteSegment(7, 20)
		var got []Segment
		err := h.s.ReprSegments(b.Repr(), func(stream uint64, seg Segment) {
			if stream != 7 {
				t.Errorf("stream %d, want 7", stream)
			}
			got = append(got, seg)
		})
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("ReprSegments = %+v, %v; want [%+v]", got, err, want)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		got = nil
		if err := h.s.Segments(7, func(s Segment) error { got = append(got, s); return nil }); err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("Segments after commit = %+v, %v", got, err)
		}
	})
}
