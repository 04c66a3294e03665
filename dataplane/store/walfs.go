package store

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS hands Pebble WAL files that grow by writing zeros ahead of the log
// instead of by fallocate, so that a synced append overwrites blocks the
// file already has.
//
// Why: every acknowledged publish waits for one WAL fdatasync. An append
// past the file's size, or into an fallocated (unwritten) extent, makes
// that fdatasync commit the filesystem's journal too (the new size, the
// extent turned written); an overwrite of written blocks inside the size
// flushes the data alone. On the bench machine's ext4 that is about
// 210 µs against 150 µs per sync, most of the gap between a durable
// publish and the disk's own flush time. Pebble recycles WAL files, whose
// blocks are written, so only the first WALs of a store (and any WAL that
// outgrows the one it reuses) grow; walFile makes those grow a chunk at a
// time, one journal commit per chunk instead of one per sync.
//
// Only a store on the OS's filesystem gets it (Open); the in-memory test
// filesystems have no journal, and fill a file one byte at a time.
//
// Replay is unaffected: a zeroed tail is what Pebble's reader already
// expects of a preallocated or recycled WAL (it reads ahead to tell a torn
// tail from corruption).
type walFS struct {
	vfs.FS
}

// walFillChunk is how far ahead of the log a WAL file is zero-filled: each
// chunk costs one fdatasync that writes it and commits the journal, so
// larger chunks mean fewer such syncs and a longer one each.
const walFillChunk = 1 << 20

// walZeros is the source of the fill's writes.
var walZeros = make([]byte, 64<<10)

// isWAL tells Pebble's WAL files (NNNNNN.log) from its tables, manifests
// and options files.
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// Create implements vfs.FS.
func (fs walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &walFile{File: f}, nil
}

// ReuseForWrite implements vfs.FS: a recycled WAL keeps its size, and its
// blocks up to that size are written, so the fill starts there.
func (fs walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("store: stat reused WAL %q: %w", newname, err)
	}
	return &walFile{File: f, filled: st.Size()}, nil
}

// Unwrap implements vfs.FS.
func (fs walFS) Unwrap() vfs.FS { return fs.FS }

// walFile is a WAL file written sequentially from offset 0 (Pebble's log
// writer uses Write only). Invariant: every byte below filled has been
// written (zeros or log), so a Write that ends at or below it is an
// overwrite.
type walFile struct {
	vfs.File
	pos    int64 // where the next Write goes
	filled int64
}

// Write implements vfs.File, filling the next chunk first when p would
// pass what is filled.
func (f *walFile) Write(p []byte) (int, error) {
	if end := f.pos + int64(len(p)); end > f.filled {
		to := (end + walFillChunk - 1) / walFillChunk * walFillChunk
		for off := f.filled; off < to; {
			n := min(int64(len(walZeros)), to-off)
			if _, err := f.File.WriteAt(walZeros[:n], off); err != nil {
				return 0, fmt.Errorf("store: filling WAL ahead at %d: %w", off, err)
			}
			off += n
		}
		f.filled = to
	}
	n, err := f.File.Write(p)
	f.pos += int64(n)
	return n, err
}

// Preallocate implements vfs.File: Write fills ahead instead, so there is
// nothing to reserve (an fallocated extent would cost the journal commit
// the fill avoids).
func (f *walFile) Preallocate(offset, length int64) error { return nil }
