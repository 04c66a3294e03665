package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Dir is the file:// backend: every object is a file under a root
// directory. A put writes a temporary file, syncs it, renames it into
// place and syncs the directory, so an object is either whole or absent
// after a crash.
type Dir struct {
	root string
}

// OpenDir returns the backend rooted at dir, creating it if needed.
func OpenDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tier dir: %w", err)
	}
	// A put cut short by a crash leaves its temporary file; one an hour
	// old belongs to no put in progress.
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasPrefix(e.Name(), ".put-") {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(p)
			}
		}
		return nil
	})
	return &Dir{root: dir}, nil
}

func (d *Dir) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("tier dir: bad key %q", key)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put implements ObjectStore.
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tier dir: put %s: %w", key, err)
	}
	f, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return fmt.Errorf("tier dir: put %s: %w", key, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("tier dir: put %s: %w", key, err)
	}
	return ctx.Err()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// GetRange implements ObjectStore.
func (d *Dir) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tier dir: %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tier dir: get %s: %w", key, err)
	}
	defer f.Close()
	if n < 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("tier dir: get %s: %w", key, err)
		}
		n = st.Size() - off
		if n < 0 {
			return nil, fmt.Errorf("tier dir: get %s at %d: %w", key, off, ErrTruncated)
		}
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("tier dir: get %s [%d,+%d): %w", key, off, n, ErrTruncated)
		}
		return nil, fmt.Errorf("tier dir: get %s: %w", key, err)
	}
	return buf, nil
}

// Size implements ObjectStore.
func (d *Dir) Size(_ context.Context, key string) (int64, error) {
	p, err := d.path(key)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("tier dir: %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("tier dir: stat %s: %w", key, err)
	}
	return st.Size(), nil
}

// Delete implements ObjectStore.
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tier dir: delete %s: %w", key, err)
	}
	// Empty parent directories are left: they cost nothing and another
	// upload may be creating a file in them right now.
	return nil
}

// List implements ObjectStore.
func (d *Dir) List(_ context.Context, prefix string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".put-") {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tier dir: list %q: %w", prefix, err)
	}
	return out, nil
}

// ListPage implements ObjectStore. A directory walk is not in key order
// across levels, so a page sorts the whole listing: fine for a local
// directory.
func (d *Dir) ListPage(ctx context.Context, after string, max int) ([]ObjectInfo, string, error) {
	keys, err := d.List(ctx, "")
	if err != nil {
		return nil, "", err
	}
	slices.Sort(keys)
	i, _ := slices.BinarySearch(keys, after)
	for i < len(keys) && keys[i] <= after {
		i++
	}
	var out []ObjectInfo
	for ; i < len(keys) && len(out) < max; i++ {
		p, err := d.path(keys[i])
		if err != nil {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, ObjectInfo{Key: keys[i], Size: fi.Size(), Modified: fi.ModTime()})
	}
	next := ""
	if i < len(keys) && len(out) > 0 {
		next = out[len(out)-1].Key
	}
	return out, next, nil
}

func (d *Dir) String() string { return "file://" + d.root }
