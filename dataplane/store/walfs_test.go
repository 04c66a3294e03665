package store

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestWALFileFillsAhead checks walFile's invariant: after every write the
// file's size is a whole number of fill chunks past the log's end, and
// what lies between the log and the size is zeros.
func TestWALFileFillsAhead(t *testing.T) {
	mem := vfs.NewMem()
	fs := walFS{mem}
	f, err := fs.Create("000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i, n := range []int{100, 300, walFillChunk - 400, 1, 3*walFillChunk + 7, 50} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		want = append(want, p...) // first: the race build's MemFS scribbles on what it was given
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if size := st.Size(); size%walFillChunk != 0 || size < int64(len(want)) || size >= int64(len(want))+walFillChunk {
			t.Fatalf("after %d bytes of log the file is %d bytes; want the next multiple of %d", len(want), size, walFillChunk)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, mem, "000001.log")
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("the log's bytes were not kept")
	}
	if strings.Trim(string(got[len(want):]), "\x00") != "" {
		t.Fatal("the fill past the log is not zeros")
	}

	// A recycled WAL is filled up to its size already: writes inside it
	// leave the size alone.
	g, err := fs.ReuseForWrite("000001.log", "000002.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	before := int64(len(got))
	if _, err := g.Write(bytes.Repeat([]byte{'z'}, 1000)); err != nil {
		t.Fatal(err)
	}
	if st, err := g.Stat(); err != nil || st.Size() != before {
		t.Fatalf("reused WAL: size %v (err %v), want %d unchanged", st.Size(), err, before)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	// Other files are passed through untouched.
	h, err := fs.Create("000003.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.(*walFile); ok {
		t.Fatal("a table file was given the WAL's fill")
	}
	h.Close()
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
