// Package tier moves cold stream data to an object store: the store
// interface and its backends (a local directory, S3), the segment object
// format, and the shared block cache cold reads go through.
//
// The package knows nothing of streams' state machines. jetstream decides
// what to seal and commits the manifest through its apply path; tier
// builds, stores, fetches and verifies the objects.
package tier

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// ObjectStore is where segments live. Keys are slash-separated relative
// names; the backend adds its own prefix.
//
// Threading: every method is safe for concurrent use.
type ObjectStore interface {
	// Put stores data under key. It returns only once the object is
	// durable in the store, and replaces any object under key. It never
	// reads data after it returns: the caller may reuse the buffer.
	Put(ctx context.Context, key string, data []byte) error
	// GetRange returns n bytes of key's object from off; n < 0 reads to
	// the end. A short object is ErrTruncated, a missing one ErrNotFound.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Size returns the size of key's object, or ErrNotFound.
	Size(ctx context.Context, key string) (int64, error)
	// Delete removes key's object. Deleting a missing object succeeds.
	Delete(ctx context.Context, key string) error
	// List returns the keys under prefix, for scrubs and tests.
	List(ctx context.Context, prefix string) ([]string, error)
	// ListPage returns up to max objects whose keys sort after after
	// (every key when after is empty), in key order, with their sizes and
	// times: one bounded step of a scan of the store. next is the key to
	// continue after, empty once the last page is returned.
	ListPage(ctx context.Context, after string, max int) (objs []ObjectInfo, next string, err error)
	// String names the store for logs (its URL, without credentials).
	String() string
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key      string
	Size     int64
	Modified time.Time // when the store last wrote it
}

// Sentinel errors callers branch on.
var (
	ErrNotFound  = errors.New("tier: object not found")
	ErrTruncated = errors.New("tier: object shorter than expected")
	ErrCorrupt   = errors.New("tier: corrupt object")
)

// Open returns the object store a --tier-url names: file:///dir for a
// local directory, s3://bucket/prefix for S3 (endpoint, when set, is an
// S3-compatible server's URL, addressed path-style). opts may be nil.
func Open(ctx context.Context, rawURL, endpoint string, opts *S3Options) (ObjectStore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("tier url %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("tier url %q: a file URL names a local path (file:///dir)", rawURL)
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("tier url %q: the directory must be an absolute path", rawURL)
		}
		return OpenDir(u.Path)
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("tier url %q: no bucket", rawURL)
		}
		o := S3Options{}
		if opts != nil {
			o = *opts
		}
		o.Bucket, o.Prefix, o.Endpoint = u.Host, strings.Trim(u.Path, "/"), endpoint
		return OpenS3(ctx, o)
	}
	return nil, fmt.Errorf("tier url %q: scheme must be s3 or file", rawURL)
}
