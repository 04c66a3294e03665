package store

import (
	"fmt"
	"slices"
	"testing"
)

// TestRecoveryReadsAsStore holds a Recovery to the Store's answers: for
// streams read in ascending order, as start-up reads them, every read
// (last message, TTL entries, dedup window, consumers; present and
// absent) gives what the Store's method of the same name gives.
func TestRecoveryReadsAsStore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		const streams = 20
		h.apply(func(b *Batch) {
			for id := uint64(1); id <= streams; id++ {
				if id%3 == 0 {
					continue // nothing but the catalog
				}
				for seq := uint64(1); seq <= id%4+1; seq++ {
					b.PutMsg(id, &Message{Seq: seq, Subject: fmt.Sprintf("s.%d", seq), Data: []byte("x"), Time: int64(seq * 10), TTL: int64(id % 2)})
				}
				b.PutDedup(id, DedupEntry{ID: fmt.Sprintf("m%d", id), Seq: 1, Time: int64(id)})
				if id%2 == 0 {
					b.PutConsumer(id, "C", []byte(`{}`))
					b.PutConsumerState(id, "C", []byte{byte(id)})
				}
			}
		})
		rd, err := h.s.NewRecovery()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		for id := uint64(1); id <= streams; id++ {
			want, werr := h.s.NewestMsg(id)
			got, gerr := rd.NewestMsg(id)
			if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
				t.Fatalf("stream %d NewestMsg = %v, %v; store %v, %v", id, got, gerr, want, werr)
			}
			type ttl struct {
				seq     uint64
				expires int64
			}
			var wantTTL, gotTTL []ttl
			_ = h.s.Expiring(id, 1<<62, func(seq uint64, e int64) error { wantTTL = append(wantTTL, ttl{seq, e}); return nil })
			if err := rd.Expiring(id, 1<<62, func(seq uint64, e int64) error { gotTTL = append(gotTTL, ttl{seq, e}); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gotTTL, wantTTL) {
				t.Fatalf("stream %d Expiring = %v, store %v", id, gotTTL, wantTTL)
			}
			var wantD, gotD []DedupEntry
			_ = h.s.DedupSince(id, 0, func(d DedupEntry) error { wantD = append(wantD, d); return nil })
			if err := rd.DedupSince(id, 0, func(d DedupEntry) error { gotD = append(gotD, d); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gotD, wantD) {
				t.Fatalf("stream %d DedupSince = %v, store %v", id, gotD, wantD)
			}
			var wantC, gotC []string
			_ = h.s.Consumers(id, func(c ConsumerRecord) error { wantC = append(wantC, fmt.Sprint(c)); return nil })
			if err := rd.Consumers(id, func(c ConsumerRecord) error { gotC = append(gotC, fmt.Sprint(c)); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gotC, wantC) {
				t.Fatalf("stream %d Consumers = %v, store %v", id, gotC, wantC)
			}
		}
	})
}
