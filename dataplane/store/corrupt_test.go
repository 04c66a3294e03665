package store

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCorruptionDetected plants bad values behind the codec's back and
// checks that every read path reports ErrCorrupt instead of serving them.
func TestCorruptionDetected(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		h.apply(func(b *Batch) {
			b.PutStream(StreamMeta{ID: 1, Name: "S"})
			b.PutStreamState(1, StreamState{LastSeq: 3})
			for i := uint64(1); i <= 3; i++ {
				b.PutMsg(1, msg(i, "a", "data"))
			}
			b.PutConsumer(1, "C", []byte("{}"))
			b.PutDedup(1, DedupEntry{ID: "x", Seq: 1, Time: 1})
		})
		flip := func(key []byte) {
			v := h.rawGet(key)
			v[0] ^= 0x40
			h.rawSet(key, v)
		}
		// A flipped bit in a message.
		flip(msgKey(nil, 1, 2))
		_, err := h.s.LoadMsg(1, 2)
		wantErr(t, err, ErrCorrupt)
		wantErr(t, h.s.ScanMsgs(1, 0, math.MaxUint64, func(*Message) error { return nil }), ErrCorrupt)
		_, err = h.s.NextMsg(1, 2, "a")
		wantErr(t, err, ErrCorrupt)
		_, err = h.s.NextMsg(1, 2, "*")
		wantErr(t, err, ErrCorrupt)
		if m, err := h.s.NextMsg(1, 3, "a"); err != nil || m.Seq != 3 {
			t.Fatalf("intact message 3: %d, %v", m.Seq, err)
		}
		// A valid value moved to another key: the checksum covers the key.
		h.rawSet(msgKey(nil, 1, 3), h.rawGet(msgKey(nil, 1, 1)))
		_, err = h.s.LoadMsg(1, 3)
		wantErr(t, err, ErrCorrupt)
		_, err = h.s.LastMsg(1, "a")
		wantErr(t, err, ErrCorrupt)
		// A truncated value, an index entry, catalog, consumer, dedup.
		h.rawSet(msgKey(nil, 1, 1), []byte{1})
		_, err = h.s.LoadMsg(1, 1)
		wantErr(t, err, ErrCorrupt)
		flip(subjectKey(nil, 1, "a", 1))
		wantErr(t, h.s.SubjectSeqs(1, "a", 0, func(uint64) error { return nil }), ErrCorrupt)
		wantErr(t, h.s.SubjectStates(1, "", func(SubjectState) error { return nil }), ErrCorrupt)
		flip(catalogKey(nil, 1, catalogState))
		wantErr(t, h.s.Streams(func(StreamInfo) error { return nil }), ErrCorrupt)
		_, err = h.s.LoadStream(1)
		wantErr(t, err, ErrCorrupt)
		flip(consumerKey(nil, 1, "C", consumerConfig))
		_, err = h.s.LoadConsumer(1, "C")
		wantErr(t, err, ErrCorrupt)
		flip(dedupIDKey(nil, 1, "x"))
		_, err = h.s.Dedup(1, "x")
		wantErr(t, err, ErrCorrupt)
		if !strings.Contains(err.Error(), "stream 1") {
			t.Errorf("corruption error lacks context: %v", err)
		}
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	h := openPebbleHarness(t)
	defer h.close()
	h.apply(func(b *Batch) {
		b.PutStream(StreamMeta{ID: 4, Name: "S", Config: []byte("{}")})
		b.PutStreamState(4, StreamState{FirstSeq: 1, LastSeq: 50, Msgs: 50})
		b.PutConsumer(4, "C", []byte("cfg"))
		b.PutDedup(4, DedupEntry{ID: "id", Seq: 3, Time: 3})
	})
	fill(h, 4, 50, "x", "y")
	before := dump(t, h.s, nil, nil)
	if !h.reopen() {
		t.Fatal("pebble harness cannot reopen")
	}
	after := dump(t, h.s, nil, nil)
	if !slices.EqualFunc(before, after, func(a, b kv) bool { return string(a.k) == string(b.k) && string(a.v) == string(b.v) }) {
		t.Fatalf("reopen changed contents: %d records before, %d after", len(before), len(after))
	}
	if m, err := h.s.LastMsg(4, "y"); err != nil || m.Seq != 50 {
		t.Fatalf("last y after reopen = %d, %v", m.Seq, err)
	}
	if got := listStreams(t, h.s); len(got) != 1 || got[0].State.LastSeq != 50 {
		t.Fatalf("streams after reopen = %+v", got)
	}
}

func TestClosed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		b := h.s.NewBatch()
		b.PutMsg(1, msg(1, "a", ""))
		if err := h.s.Close(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, b.Commit(true), ErrClosed)
		_, err := h.s.LoadMsg(1, 1)
		wantErr(t, err, ErrClosed)
		wantErr(t, h.s.Streams(func(StreamInfo) error { return nil }), ErrClosed)
		wantErr(t, h.s.Close(), ErrClosed)
	})
}

// TestCloseWaitsForScans checks that a scan in progress finishes before the
// engine closes, and that calls made during Close fail instead of blocking.
func TestCloseWaitsForScans(t *testing.T) {
	forEachEngine(t, func(t *testing.T, h *harness) {
		fill(h, 1, 5, "a")
		inScan, closed := make(chan struct{}), make(chan error)
		go func() {
			err := h.s.ScanMsgs(1, 0, math.MaxUint64, func(m *Message) error {
				if m.Seq == 1 {
					close(inScan)
					for {
						if _, err := h.s.LoadMsg(1, 1); errors.Is(err, ErrClosed) {
							return nil // Close has begun; nested calls fail fast
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Errorf("scan: %v", err)
			}
		}()
		<-inScan
		go func() { closed <- h.s.Close() }()
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
	})
}

// TestEscapingKeepsOrder checks that escaped strings sort like the strings
// and decode back, NUL bytes included.
func TestEscapingKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 0xff, 'a', '.', 'b'}
	strs := make([]string, 500)
	for i := range strs {
		b := make([]byte, rng.IntN(6))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		strs[i] = string(b)
	}
	slices.Sort(strs)
	strs = slices.Compact(strs)
	var prev []byte
	for i, s := range strs {
		enc := appendEscaped(nil, s)
		got, rest, ok := decodeEscaped(append(enc, 7))
		if !ok || got != s || string(rest) != "\x07" {
			t.Fatalf("decode(%q) = %q, %q, %v", s, got, rest, ok)
		}
		if i > 0 && string(prev) >= string(enc) {
			t.Fatalf("order broken: %q !< %q", strs[i-1], s)
		}
		prev = enc
	}
}
