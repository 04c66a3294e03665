package store

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func listStreams(t testing.TB, s *Store) []StreamInfo {
	t.Helper()
	var out []StreamInfo
	if err := s.Streams(func(i StreamInfo) error { out = append(out, i); return nil }); err != nil {
		t.Fatalf("streams: %v", err)
	}
	return out
}

func sameStream(a, b StreamInfo) bool {
	return a.ID == b.ID && a.Name == b.Name && bytes.Equal(a.Config, b.Config) && a.State == b.State
}

func TestStreamsCatalog(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		st := StreamState{FirstSeq: 3, LastSeq: 9, Msgs: 5, Bytes: 500, FirstTime: -1, LastTime: 1 << 60, Deleted: 2}
		h.apply(func(b *Batch) {
			b.PutStream(StreamMeta{ID: 2, Name: "ORDERS", Config: []byte(`{"name":"ORDERS"}`)})
			b.PutStreamState(2, st)
			b.PutStream(StreamMeta{ID: 1, Name: "KV_x"})
			b.PutStream(StreamMeta{ID: math.MaxUint64, Name: "last"})
			b.PutStreamState(77, st) // state without meta: not a stream
		})
		got := listStreams(t, h.s)
		want := []StreamInfo{
			{StreamMeta: StreamMeta{ID: 1, Name: "KV_x", Config: []byte{}}},
			{StreamMeta: StreamMeta{ID: 2, Name: "ORDERS", Config: []byte(`{"name":"ORDERS"}`)}, State: st},
			{StreamMeta: StreamMeta{ID: math.MaxUint64, Name: "last", Config: []byte{}}},
		}
		if !slices.EqualFunc(got, want, sameStream) {
			t.Fatalf("streams = %+v", got)
		}
		one, err := h.s.LoadStream(2)
		if err != nil || !sameStream(one, want[1]) {
			t.Fatalf("LoadStream = %+v, %v", one, err)
		}
		_, err = h.s.LoadStream(3)
		wantErr(t, err, ErrNotFound)
	})
}

func TestDeleteStreamRemovesEverything(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		for _, id := range []uint64{1, 2, math.MaxUint64} {
			h.apply(func(b *Batch) {
				b.PutStream(StreamMeta{ID: id, Name: "s"})
				b.PutStreamState(id, StreamState{LastSeq: 3})
				b.PutMsg(id, msg(1, "a", "x"))
				b.PutMsg(id, &Message{Seq: 2, Subject: "b", Time: 5, TTL: 5})
				b.PutDedup(id, DedupEntry{ID: "m1", Seq: 1, Time: 1})
				b.PutConsumer(id, "C", []byte("{}"))
				b.PutConsumerState(id, "C", []byte{1})
			})
		}
		before := dump(t, h.s, nil, nil)
		for _, id := range []uint64{2, math.MaxUint64} {
			h.apply(func(b *Batch) { b.DeleteStream(id) })
			if n := len(dump(t, h.s, streamDataStart(nil, id), streamDataEnd(nil, id))); n != 0 {
				t.Fatalf("stream %d: %d data records left", id, n)
			}
			_, err := h.s.LoadStream(id)
			wantErr(t, err, ErrNotFound)
		}
		after := dump(t, h.s, nil, nil)
		// Stream 1's records and the format record are all that is left.
		var kept []kv
		for _, r := range before {
			if r.k[0] == prefixFormat || (len(r.k) > 9 && r.k[1] == 0 && r.k[8] == 1) {
				kept = append(kept, r)
			}
		}
		if !slices.EqualFunc(after, kept, func(a, b kv) bool { return bytes.Equal(a.k, b.k) && bytes.Equal(a.v, b.v) }) {
			t.Fatalf("after delete: %d records, want %d", len(after), len(kept))
		}
		if got := listStreams(t, h.s); len(got) != 1 || got[0].ID != 1 {
			t.Fatalf("streams = %+v", got)
		}
	})
}

func TestConsumers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		h.apply(func(b *Batch) {
			b.PutConsumer(1, "B", []byte(`{"durable_name":"B"}`))
			b.PutConsumer(1, "A", []byte(`{"durable_name":"A"}`))
			b.PutConsumerState(1, "A", []byte{1, 2, 3})
			b.PutConsumer(2, "A", []byte(`{}`))
			b.PutConsumerState(1, "A\x00z", []byte{9}) // state only, odd name
		})
		var got []ConsumerRecord
		if err := h.s.Consumers(1, func(c ConsumerRecord) error { got = append(got, c); return nil }); err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, c := range got {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{"A", "A\x00z", "B"}) {
			t.Fatalf("consumers = %q", names)
		}
		if !bytes.Equal(got[0].State, []byte{1, 2, 3}) || string(got[0].Config) != `{"durable_name":"A"}` ||
			got[1].Config != nil || got[2].State != nil {
			t.Fatalf("records = %+v", got)
		}
		h.apply(func(b *Batch) { b.PutConsumerState(1, "A", []byte{4}) })
		c, err := h.s.LoadConsumer(1, "A")
		if err != nil || !bytes.Equal(c.State, []byte{4}) || c.Stream != 1 {
			t.Fatalf("LoadConsumer = %+v, %v", c, err)
		}
		h.apply(func(b *Batch) { b.DeleteConsumer(1, "A") })
		_, err = h.s.LoadConsumer(1, "A")
		wantErr(t, err, ErrNotFound)
		if _, err := h.s.LoadConsumer(1, "A\x00z"); err != nil {
			t.Fatalf("deleting A removed A\\x00z: %v", err)
		}
	})
}

func TestDedup(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		h.apply(func(b *Batch) {
			for i, id := range []string{"a", "b", "c", "d"} {
				b.PutDedup(1, DedupEntry{ID: id, Seq: uint64(i + 1), Time: int64(i * 10)})
			}
			b.PutDedup(2, DedupEntry{ID: "a", Seq: 9, Time: 0})
		})
		d, err := h.s.Dedup(1, "c")
		if err != nil || d != (DedupEntry{ID: "c", Seq: 3, Time: 20}) {
			t.Fatalf("Dedup(c) = %+v, %v", d, err)
		}
		_, err = h.s.Dedup(1, "zz")
		wantErr(t, err, ErrNotFound)
		since := func(t0 int64) (ids []string) {
			_ = h.s.DedupSince(1, t0, func(d DedupEntry) error { ids = append(ids, d.ID); return nil })
			return ids
		}
		if got := since(10); !slices.Equal(got, []string{"b", "c", "d"}) {
			t.Fatalf("since 10 = %v", got)
		}
		// "a" is seen again later: expiring its old time must keep it.
		h.apply(func(b *Batch) { b.PutDedup(1, DedupEntry{ID: "a", Seq: 5, Time: 40}) })
		b := h.s.NewBatch()
		n, err := h.s.ExpireDedup(b, 1, 20)
		if err != nil || n != 2 {
			t.Fatalf("ExpireDedup = %d, %v", n, err)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if _, err := h.s.Dedup(1, "b"); err == nil {
			t.Fatal("b survived expiry")
		}
		if d, err := h.s.Dedup(1, "a"); err != nil || d.Seq != 5 {
			t.Fatalf("re-put a = %+v, %v", d, err)
		}
		if got := since(math.MinInt64); !slices.Equal(got, []string{"c", "d", "a"}) {
			t.Fatalf("after expiry = %v", got)
		}
		h.apply(func(b *Batch) { b.DeleteDedup(1, "c", 20) })
		if got := since(math.MinInt64); !slices.Equal(got, []string{"d", "a"}) {
			t.Fatalf("after delete = %v", got)
		}
		if d, err := h.s.Dedup(2, "a"); err != nil || d.Seq != 9 {
			t.Fatalf("other stream = %+v, %v", d, err)
		}
	})
}

// ConsumerCount counts each consumer once, its config and state records
// together, and only the stream's own: names that end in the bytes a
// state key ends in, a consumer with no state yet, and a neighbouring
// stream's consumers are each counted right.
func TestConsumerCount(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		h.apply(func(b *Batch) {
			for _, name := range []string{"A", "B\x02", "C\x00"} {
				b.PutConsumer(7, name, []byte("{}"))
				b.PutConsumerState(7, name, []byte{1})
			}
			b.PutConsumer(7, "D", []byte("{}"))
			b.PutConsumer(8, "E", []byte("{}"))
			b.PutConsumerState(8, "E", []byte{1})
		})
		for id, want := range map[uint64]int{6: 0, 7: 4, 8: 1} {
			if n, err := h.s.ConsumerCount(id); err != nil || n != want {
				t.Errorf("stream %d: %d consumers, %v; want %d", id, n, err, want)
			}
		}
	})
}
