package store

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWALOnDiskHasNoReservedExtents checks, on the OS's filesystem, that
// the store's WAL is written blocks inside its size (no fallocated extent
// past it, which would make each sync commit the journal again) and that
// the zero-filled tail replays: every synced write is there after reopen.
func TestWALOnDiskHasNoReservedExtents(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	for seq := uint64(1); seq <= 500; seq++ {
		b.Reset()
		b.PutMsg(1, msg(seq, "s", strings.Repeat("d", 200)))
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	wals, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(wals) == 0 {
		t.Fatal("no WAL file")
	}
	for _, w := range wals {
		fi, err := os.Stat(w)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		// Allow one filesystem block of rounding.
		if alloc := st.Blocks * 512; alloc > fi.Size()+4096 {
			t.Errorf("%s: %d bytes allocated for a %d-byte file: space reserved past its size", filepath.Base(w), alloc, fi.Size())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopen over the zero-filled WAL: %v", err)
	}
	defer s2.Close()
	for seq := uint64(1); seq <= 500; seq++ {
		if _, err := s2.LoadMsg(1, seq); err != nil {
			t.Fatalf("message %d lost: %v", seq, err)
		}
	}
}
