package store

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestTableCompression writes 8 MiB of zeros as message bodies and
// compacts them into tables: stored as sent by default, and a fraction
// of that with Options.Compress. A store written one way reopens and
// reads the other way.
func TestTableCompression(t *testing.T) {
	fs := vfs.NewMem()
	tables := func(compress bool) int64 {
		s, err := Open(Options{Dir: "db", FS: fs, Compress: compress})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got, err := s.LoadMsg(1, 1); compress && (err != nil || len(got.Data) != 4096) {
			t.Fatalf("message written uncompressed, read with compression: %v, %v", got, err)
		}
		b := s.NewBatch()
		defer b.Close()
		body := make([]byte, 4096)
		for seq := uint64(1); seq <= 2048; seq++ {
			b.PutMsg(1, &Message{Seq: seq, Subject: "s", Data: body, Time: int64(seq)})
		}
		must(t, b.Commit(true))
		must(t, s.CompactMsgs(1, 1, 2048))
		return s.eng.(*pebbleEngine).db.Metrics().Total().TablesSize
	}
	if plain := tables(false); plain < 8<<20 {
		t.Errorf("uncompressed tables hold %d bytes of 8 MiB of bodies", plain)
	}
	if packed := tables(true); packed > 2<<20 {
		t.Errorf("Snappy tables hold %d bytes of 8 MiB of zeros", packed)
	}
}
