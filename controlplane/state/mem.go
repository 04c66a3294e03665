package state

import (
	"sort"
	"strings"
	"sync"
)

// Mem is a Store in memory, for tests and throwaway runs.
type Mem struct {
	mu struct {
		sync.RWMutex
		m      map[string][]byte // guarded by mu
		closed bool              // guarded by mu
	}
}

// NewMem returns an empty memory store.
func NewMem() *Mem {
	m := &Mem{}
	m.mu.m = map[string][]byte{}
	return m
}

// Get implements Store.
func (m *Mem) Get(key string) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	v, ok := m.mu.m[key]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

// Apply implements Store.
func (m *Mem) Apply(b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	for _, o := range b.ops {
		if o.delete {
			delete(m.mu.m, o.key)
		} else {
			m.mu.m[o.key] = append([]byte(nil), o.value...)
		}
	}
	return nil
}

// Scan implements Store.
func (m *Mem) Scan(prefix string, limit int) ([]KV, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	var out []KV
	for k, v := range m.mu.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, KV{Key: k, Value: append([]byte(nil), v...)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Close implements Store.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	return nil
}
