package store

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on with errors.Is. Every error the store
// returns wraps one of these or an engine error, with context.
var (
	// ErrNotFound reports that the record asked for does not exist. Reads
	// that walk forward (NextMsg) return it when nothing matches.
	ErrNotFound = errors.New("not found")

	// ErrCorrupt reports that a record failed its checksum or could not be
	// decoded. Corrupt data is never returned: the read fails instead, so the
	// caller can stop serving the stream rather than deliver garbage.
	ErrCorrupt = errors.New("corrupt record")

	// ErrClosed reports a call on a Store after Close.
	ErrClosed = errors.New("closed")

	// ErrFailed reports that the engine hit an I/O error it cannot recover
	// from in-process (a failed WAL sync). Nothing more is read or written:
	// after a failed fsync the page cache can no longer be trusted, so the
	// node must close and reopen the store, recovering from what is on disk.
	ErrFailed = errors.New("failed, reopen required")
)

// errStoreClosed is what calls on a closed Store return.
var errStoreClosed = fmt.Errorf("store: %w", ErrClosed)

// corruptf returns an ErrCorrupt with the record that failed and why.
func corruptf(key []byte, format string, args ...any) error {
	return fmt.Errorf("store: %s: %s: %w", describeKey(key), fmt.Sprintf(format, args...), ErrCorrupt)
}

// notFound returns an ErrNotFound naming what was looked for.
func notFound(what string, args ...any) error {
	return fmt.Errorf("store: %s: %w", fmt.Sprintf(what, args...), ErrNotFound)
}
