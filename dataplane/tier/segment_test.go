package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

func testRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Seq: uint64(10 + 2*i), Time: int64(1000 + i), TTL: int64(i % 3), Subject: fmt.Sprintf("s.%d", i%5),
			Data: bytes.Repeat([]byte{byte(i)}, 100+i)}
		if i%4 == 0 {
			recs[i].Header = []byte(fmt.Sprintf("NATS/1.0\r\nX: %d\r\n\r\n", i))
		}
	}
	return recs
}

func buildTest(t *testing.T, recs []Record) (Built, SegmentHeader) {
	t.Helper()
	h := SegmentHeader{Stream: 7, Incarnation: 99, Name: "S", First: 10, Last: recs[len(recs)-1].Seq, Bytes: 12345}
	b, err := Build(h, recs, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// TestSegmentRoundTrip: every record reads back from the object through
// its index, and the header describes the segment.
func TestSegmentRoundTrip(t *testing.T) {
	recs := testRecords(200)
	b, h := buildTest(t, recs)
	obj := b.Object
	x, err := ParseTail(obj[b.IndexOff:], b.IndexOff, int64(len(obj)))
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != len(recs) || len(x.Blocks) < 10 {
		t.Fatalf("index of %d entries, %d blocks", x.Len(), len(x.Blocks))
	}
	for _, r := range recs {
		e, ok := x.Find(r.Seq)
		if !ok {
			t.Fatalf("seq %d not in the index", r.Seq)
		}
		blk := x.Blocks[e.Block]
		block := obj[blk.Off : blk.Off+blk.Len]
		if err := x.VerifyBlock(e.Block, block); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRecord(block, e)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seq != r.Seq || got.Time != r.Time || got.TTL != r.TTL || got.Subject != r.Subject || !bytes.Equal(got.Header, r.Header) || !bytes.Equal(got.Data, r.Data) {
			t.Fatalf("seq %d: got %+v", r.Seq, got)
		}
	}
	if _, ok := x.Find(11); ok {
		t.Fatal("found a sequence the segment does not hold")
	}
	gh, err := ParseHeader(obj)
	if err != nil {
		t.Fatal(err)
	}
	h.Count, h.MinTime, h.MaxTime = uint64(len(recs)), 1000, int64(1000+len(recs)-1)
	if gh != h {
		t.Fatalf("header %+v, want %+v", gh, h)
	}
}

// TestSegmentCorruption flips each byte of an object in turn: every read
// either fails its checks or returns exactly the record written.
func TestSegmentCorruption(t *testing.T) {
	recs := testRecords(12)
	b, _ := buildTest(t, recs)
	for i := range b.Object {
		obj := bytes.Clone(b.Object)
		obj[i] ^= 0x5a
		x, err := ParseTail(obj[b.IndexOff:], b.IndexOff, int64(len(obj)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d: %v is not ErrCorrupt", i, err)
			}
			continue
		}
		for _, r := range recs {
			e, ok := x.Find(r.Seq)
			if !ok {
				t.Fatalf("byte %d: seq %d lost from a verified index", i, r.Seq)
			}
			blk := x.Blocks[e.Block]
			block := obj[blk.Off : blk.Off+blk.Len]
			if x.VerifyBlock(e.Block, block) != nil {
				continue
			}
			got, err := DecodeRecord(block, e)
			if err != nil || !bytes.Equal(got.Data, r.Data) || !bytes.Equal(got.Header, r.Header) {
				t.Fatalf("byte %d: seq %d read wrong (%v)", i, r.Seq, err)
			}
		}
	}
}

// TestCacheSharesGets: concurrent readers of one block cause one GET,
// and a bounded cache evicts.
func TestCacheSharesGets(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	recs := testRecords(200)
	b, _ := buildTest(t, recs)
	ctx := context.Background()
	if err := d.Put(ctx, "a/b.seg", b.Object); err != nil {
		t.Fatal(err)
	}
	c := NewCache(d, CacheOptions{ReadAhead: -1})
	ref := Ref{Key: "a/b.seg", Size: int64(len(b.Object)), IndexOff: b.IndexOff}
	done := make(chan error, 16)
	for range 16 {
		go func() {
			r, err := c.Read(ctx, ref, recs[0].Seq)
			if err == nil && !bytes.Equal(r.Data, recs[0].Data) {
				err = errors.New("wrong data")
			}
			done <- err
		}()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if g := c.Gets.Load(); g != 2 { // the index, then the block
		t.Fatalf("%d GETs for 16 readers of one block", g)
	}
	small := NewCache(d, CacheOptions{MaxBytes: 16 << 10})
	for _, r := range recs {
		got, err := small.Read(ctx, ref, r.Seq)
		if err != nil || !bytes.Equal(got.Data, r.Data) {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
	}
	if u := small.Used(); u > 16<<10 {
		t.Fatalf("cache holds %d bytes, bound 16 KiB", u)
	}
	if _, err := c.Read(ctx, ref, 11); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing seq: %v", err)
	}
}

func TestParseSegmentKey(t *testing.T) {
	k := SegmentKey("n-1", 1<<40|7, 1700000000123456789, 10, 20, "00ff00ff00ff00ff")
	node, stream, inc, ok := ParseSegmentKey(k)
	if !ok || node != "n-1" || stream != 1<<40|7 || inc != 1700000000123456789 {
		t.Fatalf("ParseSegmentKey(%q) = %q %d %d %v", k, node, stream, inc, ok)
	}
	for _, bad := range []string{"", "x.seg", "00000000/n/1-2/3-4-5.seg", k[:len(k)-4], "ab" + k[2:], k + "/x"} {
		if _, _, _, ok := ParseSegmentKey(bad); ok {
			t.Errorf("ParseSegmentKey(%q) accepted", bad)
		}
	}
}

// TestBuilderReuse: a builder reset for segment after segment, larger
// then smaller, gives each the bytes Build gives it, and refuses
// records out of order or past the range.
func TestBuilderReuse(t *testing.T) {
	var b Builder
	for _, n := range []int{300, 5, 1, 120} {
		recs := testRecords(n)
		h := SegmentHeader{Stream: 7, Incarnation: 99, Name: fmt.Sprintf("S%d", n), First: 10, Last: recs[n-1].Seq + 1, Bytes: uint64(n) * 100}
		want, err := Build(h, recs, 1024)
		if err != nil {
			t.Fatal(err)
		}
		b.Reset(h, 1024, 0)
		for _, r := range recs {
			b.Add(r.Seq, r.Time, r.TTL, r.Subject, r.Header, r.Data)
		}
		got, err := b.Finish(h.Last, h.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Object, want.Object) || got.IndexOff != want.IndexOff {
			t.Fatalf("%d records: the reused builder's object differs from Build's", n)
		}
	}
	b.Reset(SegmentHeader{First: 10}, 1024, 0)
	b.Add(12, 0, 0, "a", nil, nil)
	b.Add(11, 0, 0, "a", nil, nil)
	if _, err := b.Finish(20, 0); err == nil {
		t.Fatal("records out of order were sealed")
	}
	b.Reset(SegmentHeader{First: 10}, 1024, 0)
	b.Add(15, 0, 0, "a", nil, nil)
	if _, err := b.Finish(14, 0); err == nil {
		t.Fatal("a record past the range was sealed")
	}
	b.Reset(SegmentHeader{First: 10}, 1024, 0)
	if _, err := b.Finish(14, 0); err == nil {
		t.Fatal("an empty segment was sealed")
	}
	b.Reset(SegmentHeader{First: 10}, 1024, 1<<20)
	b.Trim(1 << 20)
	if cap(b.out) != 0 {
		t.Fatal("Trim kept a buffer over its bound")
	}
}
