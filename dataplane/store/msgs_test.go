package store

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestPutLoadDeleteMsg(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		in := &Message{Seq: 7, Subject: "orders.eu", Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"),
			Data: []byte("payload"), Time: -5, TTL: -1}
		h.apply(func(b *Batch) { b.PutMsg(1, in) })
		got := mustLoad(t, h.s, 1, 7)
		if got.Seq != 7 || got.Subject != in.Subject || !bytes.Equal(got.Header, in.Header) ||
			!bytes.Equal(got.Data, in.Data) || got.Time != -5 || got.TTL != -1 {
			t.Fatalf("loaded %+v, want %+v", got, in)
		}
		_, err := h.s.LoadMsg(2, 7)
		wantErr(t, err, ErrNotFound)
		empty := &Message{Seq: 8, Subject: "e"}
		h.apply(func(b *Batch) { b.PutMsg(1, empty) })
		if got := mustLoad(t, h.s, 1, 8); got.Header != nil || got.Data != nil {
			t.Fatalf("empty message loaded as %+v", got)
		}
		h.apply(func(b *Batch) { b.DeleteMsg(1, 7, "orders.eu") })
		_, err = h.s.LoadMsg(1, 7)
		wantErr(t, err, ErrNotFound)
		_, err = h.s.LastMsg(1, "orders.eu")
		wantErr(t, err, ErrNotFound)
		if n := len(dump(t, h.s, subjectPrefix(nil, 1, "orders.eu"), prefixEnd(subjectPrefix(nil, 1, "orders.eu")))); n != 0 {
			t.Fatalf("%d index entries left after delete", n)
		}
	})
}

// fill stores n messages on subjects cycling through subjs, seq 1..n.
func fill(h *harness, stream uint64, n int, subjs ...string) {
	h.apply(func(b *Batch) {
		for i := 1; i <= n; i++ {
			b.PutMsg(stream, msg(uint64(i), subjs[(i-1)%len(subjs)], fmt.Sprint(i)))
		}
	})
}

func TestScanMsgs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		fill(h, 1, 20, "a")
		fill(h, 2, 5, "b")
		var seqs []uint64
		err := h.s.ScanMsgs(1, 5, 9, func(m *Message) error {
			if string(m.Data) != fmt.Sprint(m.Seq) || m.Subject != "a" {
				t.Errorf("scanned %+v", m)
			}
			seqs = append(seqs, m.Seq)
			return nil
		})
		if err != nil || !slices.Equal(seqs, []uint64{5, 6, 7, 8}) {
			t.Fatalf("scan [5,9) = %v, %v", seqs, err)
		}
		stop := fmt.Errorf("stop")
		n := 0
		err = h.s.ScanMsgs(1, 0, math.MaxUint64, func(*Message) error { n++; return stop })
		if err != stop || n != 1 {
			t.Fatalf("stop: n=%d err=%v", n, err)
		}
	})
}

func TestLastAndNextBySubject(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		// seq: 1 a.x, 2 a.y, 3 b.x, 4 a.x.deep, 5 a.x, 6 a.y, 7 b.x, 8 a.x.deep ...
		fill(h, 1, 40, "a.x", "a.y", "b.x", "a.x.deep")
		fill(h, 2, 3, "a.x") // another stream must not leak in
		last := func(filter string, want uint64) {
			t.Helper()
			m, err := h.s.LastMsg(1, filter)
			if err != nil || m.Seq != want {
				t.Fatalf("LastMsg(%q) = %d, %v; want %d", filter, m.Seq, err, want)
			}
		}
		last("a.x", 37)
		last("a.y", 38)
		last("a.*", 38)
		last("*.x", 39)
		last("a.>", 40)
		last(">", 40)
		_, err := h.s.LastMsg(1, "nope")
		wantErr(t, err, ErrNotFound)
		_, err = h.s.LastMsg(1, "a.*.*.*")
		wantErr(t, err, ErrNotFound)

		next := func(start uint64, filter string, want uint64) {
			t.Helper()
			m, err := h.s.NextMsg(1, start, filter)
			if want == 0 {
				wantErr(t, err, ErrNotFound)
				return
			}
			if err != nil || m.Seq != want || !matchesAll(filter) && !matchLit(filter, m.Subject) {
				t.Fatalf("NextMsg(%d, %q) = %d %q, %v; want %d", start, filter, m.Seq, m.Subject, err, want)
			}
		}
		next(0, "", 1)
		next(10, ">", 10)
		next(2, "a.x", 5)
		next(5, "a.x", 5)
		next(6, "b.x", 7)
		next(38, "a.x", 0)
		next(2, "a.*", 2)
		next(3, "a.*", 5)
		next(3, "*.x", 3)
		next(4, "*.x", 5)
		next(3, "a.>", 4)
		next(1, "*.*.deep", 4)
		next(9, "a.*.deep", 12)
		next(41, ">", 0)
		next(0, "c.>", 0)
		next(0, "a", 0)
	})
}

func matchLit(filter, subj string) bool { return filter == subj || literalPrefix(filter) != filter }

func TestSubjectSeqsAndStates(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		fill(h, 1, 12, "k.1", "k.2", "k.3", "other")
		var seqs []uint64
		err := h.s.SubjectSeqs(1, "k.2", 3, func(seq uint64) error { seqs = append(seqs, seq); return nil })
		if err != nil || !slices.Equal(seqs, []uint64{6, 10}) {
			t.Fatalf("SubjectSeqs = %v, %v", seqs, err)
		}
		if err := h.s.SubjectSeqs(1, "k.*", 0, func(uint64) error { return nil }); err == nil {
			t.Fatal("SubjectSeqs accepted a wildcard")
		}
		states := func(filter string) []SubjectState {
			var out []SubjectState
			if err := h.s.SubjectStates(1, filter, func(s SubjectState) error { out = append(out, s); return nil }); err != nil {
				t.Fatalf("SubjectStates(%q): %v", filter, err)
			}
			return out
		}
		all := []SubjectState{{"k.1", 3, 1, 9}, {"k.2", 3, 2, 10}, {"k.3", 3, 3, 11}, {"other", 3, 4, 12}}
		if got := states(""); !slices.Equal(got, all) {
			t.Fatalf("all subjects = %v", got)
		}
		if got := states("k.*"); !slices.Equal(got, all[:3]) {
			t.Fatalf("k.* = %v", got)
		}
		if got := states("k.2"); !slices.Equal(got, all[1:2]) {
			t.Fatalf("k.2 = %v", got)
		}
		if got := states("*"); !slices.Equal(got, all[3:]) {
			t.Fatalf("* = %v", got)
		}
	})
}

func TestPurge(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		fill(h, 1, 10, "a", "b")
		fill(h, 2, 10, "a", "b")
		// Purge [1, 5) the way the state machine does: records by range,
		// each subject's index entries below 5 by range.
		h.apply(func(b *Batch) {
			b.PurgeRange(1, 1, 5)
			b.UnindexRange(1, "a", 0, 5)
			b.UnindexRange(1, "b", 0, 5)
		})
		if m, err := h.s.NextMsg(1, 0, ""); err != nil || m.Seq != 5 {
			t.Fatalf("first after purge = %d, %v", m.Seq, err)
		}
		if m, err := h.s.NextMsg(1, 0, "b"); err != nil || m.Seq != 6 {
			t.Fatalf("first b after purge = %d, %v", m.Seq, err)
		}
		var st []SubjectState
		_ = h.s.SubjectStates(1, "", func(s SubjectState) error { st = append(st, s); return nil })
		if !slices.Equal(st, []SubjectState{{"a", 3, 5, 9}, {"b", 3, 6, 10}}) {
			t.Fatalf("subject states after purge = %v", st)
		}
		// A missed index entry is skipped, never served.
		h.apply(func(b *Batch) { b.PurgeRange(1, 9, 11) })
		if m, err := h.s.LastMsg(1, "a"); err != nil || m.Seq != 7 {
			t.Fatalf("last a over stale index = %d, %v", m.Seq, err)
		}
		if m, err := h.s.NextMsg(1, 8, "b"); err != nil || m.Seq != 8 {
			t.Fatalf("next b = %d, %v", m.Seq, err)
		}
		if _, err := h.s.NextMsg(1, 9, "b"); err == nil {
			t.Fatal("next b found a purged message")
		}
		h.apply(func(b *Batch) { b.PurgeAll(1) })
		if n := len(dump(t, h.s, dataPrefix(nil, 1, kindMsg), dataPrefix(nil, 1, kindTTL+1))); n != 0 {
			t.Fatalf("%d records left after PurgeAll", n)
		}
		if m, err := h.s.LastMsg(2, "b"); err != nil || m.Seq != 10 {
			t.Fatalf("other stream after purge: %d, %v", m.Seq, err)
		}
	})
}

func TestTTL(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		h.apply(func(b *Batch) {
			b.PutMsg(1, &Message{Seq: 1, Subject: "t", Time: 100, TTL: 50})
			b.PutMsg(1, &Message{Seq: 2, Subject: "t", Time: 100, TTL: 10})
			b.PutMsg(1, &Message{Seq: 3, Subject: "t", Time: 100})
			b.PutMsg(1, &Message{Seq: 4, Subject: "t", Time: 100, TTL: -1})
			b.PutMsg(1, &Message{Seq: 5, Subject: "t", Time: -500, TTL: 10})
		})
		type exp struct {
			seq uint64
			at  int64
		}
		expiring := func(before int64) []exp {
			var out []exp
			err := h.s.Expiring(1, before, func(seq uint64, at int64) error { out = append(out, exp{seq, at}); return nil })
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if got := expiring(151); !slices.Equal(got, []exp{{5, -490}, {2, 110}, {1, 150}}) {
			t.Fatalf("expiring = %v", got)
		}
		if got := expiring(150); !slices.Equal(got, []exp{{5, -490}, {2, 110}}) {
			t.Fatalf("expiring before 150 = %v", got)
		}
		h.apply(func(b *Batch) { b.DeleteTTL(1, 110, 2) })
		if got := expiring(1000); !slices.Equal(got, []exp{{5, -490}, {1, 150}}) {
			t.Fatalf("after DeleteTTL = %v", got)
		}
	})
}
