package store

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestNoWALRecycling: a store told not to recycle WALs keeps only the
// live one once its memtables are flushed; by default Pebble keeps old
// WALs for reuse, at the size they grew to.
func TestNoWALRecycling(t *testing.T) {
	walBytes := func(dir string) (n int64, files int) {
		wals, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, w := range wals {
			if fi, err := os.Stat(w); err == nil {
				n += fi.Size()
				files++
			}
		}
		return n, files
	}
	const memtable = 1 << 20
	for _, noRecycle := range []bool{false, true} {
		dir := t.TempDir()
		s, err := Open(Options{Dir: dir, MemTableSize: memtable, NoWALRecycling: noRecycle})
		if err != nil {
			t.Fatal(err)
		}
		body := strings.Repeat("d", 4<<10)
		b := s.NewBatch()
		for seq := uint64(1); seq <= 2048; seq++ { // 8 MiB: several WALs
			b.Reset()
			b.PutMsg(1, msg(seq, "s", body))
			if err := b.Commit(false); err != nil {
				t.Fatal(err)
			}
		}
		b.Close()
		// A compaction flushes the memtable: every earlier WAL is obsolete.
		if err := s.CompactMsgs(1, 1, 2048); err != nil {
			t.Fatal(err)
		}
		n, files := walBytes(dir)
		if noRecycle {
			// Obsolete files are deleted in the background.
			deadline := time.Now().Add(10 * time.Second)
			for ; files > 1 && time.Now().Before(deadline); n, files = walBytes(dir) {
				time.Sleep(5 * time.Millisecond)
			}
			if files > 1 || n > 2*memtable {
				t.Errorf("without recycling: %d WAL files, %d bytes, want only the live one", files, n)
			}
		}
		t.Logf("recycling off %v: %d WAL files, %d bytes", noRecycle, files, n)
		for seq := uint64(1); seq <= 2048; seq += 511 {
			if _, err := s.LoadMsg(1, seq); err != nil {
				t.Fatalf("message %d: %v", seq, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
