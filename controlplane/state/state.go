// Package state is the control plane's own storage: a small ordered
// key-value interface, a Pebble implementation that survives restarts and
// a memory implementation for tests. Everything above it (records, keys,
// tokens) is plain keys and JSON values, so a store is easy to fake and
// the same suite runs against both implementations.
package state

import (
	"errors"
)

// ErrNotFound is returned by Get for a key that is not there.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("store closed")

// Store is an ordered key-value store. Writes are durable (synced) when
// they return. Every method is safe for concurrent use; a Batch is applied
// atomically, so readers see all of it or none of it.
type Store interface {
	// Get returns a copy of the value of key, or ErrNotFound.
	Get(key string) ([]byte, error)
	// Apply writes the batch atomically and durably.
	Apply(b *Batch) error
	// Scan returns the keys with the prefix and their values, in key
	// order: the first limit of them, or all of them if limit <= 0.
	Scan(prefix string, limit int) ([]KV, error)
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// KV is one key and its value.
type KV struct {
	Key   string
	Value []byte
}

// Batch is a list of puts and deletes applied together.
type Batch struct {
	ops []op
}

type op struct {
	key    string
	value  []byte
	delete bool
}

// Put adds a write of key.
func (b *Batch) Put(key string, value []byte) *Batch {
	b.ops = append(b.ops, op{key: key, value: value})
	return b
}

// Delete adds a delete of key (a missing key is not an error).
func (b *Batch) Delete(key string) *Batch {
	b.ops = append(b.ops, op{key: key, delete: true})
	return b
}

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Put writes one key.
func Put(s Store, key string, value []byte) error {
	return s.Apply(new(Batch).Put(key, value))
}
