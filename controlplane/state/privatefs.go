package state

import (
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// PrivateFS is the real filesystem with owner-only permissions: files
// are created 0600 and directories 0700, because the store holds the
// operator's signing key.
func PrivateFS() vfs.FS { return privateFS{vfs.Default} }

type privateFS struct{ vfs.FS }

func (fs privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err == nil {
		err = os.Chmod(name, 0o600)
	}
	return f, err
}

func (fs privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err == nil {
		err = os.Chmod(newname, 0o600)
	}
	return f, err
}

func (fs privateFS) MkdirAll(dir string, _ os.FileMode) error { return fs.FS.MkdirAll(dir, 0o700) }
