package resolver

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The resolver's files change only through these helpers, and each
// returns after the change is on disk: the file's data is synced before
// it is renamed into place, and the directory is synced after every
// rename and remove. Without the directory sync a power cut can undo a
// rename or a remove that was acknowledged, and a deleted account's old
// JWT comes back.

// writeFileAtomic replaces path with data so a crash leaves the old file
// or the new one, never half of either, and the new one once it returns.
// tmp is the name of the temporary file, in the same directory; callers
// hold a lock that makes it theirs.
func writeFileAtomic(fs vfs.FS, path, tmp string, data []byte) error {
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store %s: %w", fs.PathBase(path), err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		fs.Remove(tmp)
		return fmt.Errorf("store %s: %w", fs.PathBase(path), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(tmp)
		return fmt.Errorf("store %s: %w", fs.PathBase(path), err)
	}
	if err := f.Close(); err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("store %s: %w", fs.PathBase(path), err)
	}
	if err := renameDurable(fs, tmp, path); err != nil {
		fs.Remove(tmp)
		return err
	}
	return nil
}

// renameDurable renames oldpath to newpath (in one directory) and syncs
// the directory.
func renameDurable(fs vfs.FS, oldpath, newpath string) error {
	if err := fs.Rename(oldpath, newpath); err != nil {
		return fmt.Errorf("rename %s: %w", fs.PathBase(oldpath), err)
	}
	return syncDir(fs, fs.PathDir(newpath))
}

// removeDurable removes path and syncs its directory; a missing file is
// not an error.
func removeDurable(fs vfs.FS, path string) error {
	if err := fs.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", fs.PathBase(path), err)
	}
	return syncDir(fs, fs.PathDir(path))
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return d.Close()
}

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxJWT))
}

// privateFS is the real filesystem with owner-only files: the directory
// holds every tenant's account JWT.
type privateFS struct{ vfs.FS }

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	if err == nil {
		if err = os.Chmod(name, 0o600); err != nil {
			f.Close()
		}
	}
	return f, err
}

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error { return p.FS.MkdirAll(dir, 0o700) }
