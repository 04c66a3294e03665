package state

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble is a Store in a Pebble database.
type Pebble struct {
	db *pebble.DB
}

// OpenPebble opens (creating if needed) the store in dir. fs is the
// filesystem Pebble uses; nil means the real one (tests pass vfs.NewMem()).
func OpenPebble(dir string, fs vfs.FS, log *slog.Logger) (*Pebble, error) {
	opts := &pebble.Options{Logger: pebbleLogger{log}}
	if fs != nil {
		opts.FS = fs
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("opening control plane store %s: %w", dir, err)
	}
	return &Pebble{db: db}, nil
}

// Get implements Store.
func (p *Pebble) Get(key string) ([]byte, error) {
	v, closer, err := p.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// Apply implements Store.
func (p *Pebble) Apply(b *Batch) error {
	pb := p.db.NewBatch()
	defer pb.Close()
	for _, o := range b.ops {
		var err error
		if o.delete {
			err = pb.Delete([]byte(o.key), nil)
		} else {
			err = pb.Set([]byte(o.key), o.value, nil)
		}
		if err != nil {
			return fmt.Errorf("batch %q: %w", o.key, err)
		}
	}
	if err := pb.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Scan implements Store.
func (p *Pebble) Scan(prefix string, limit int) ([]KV, error) {
	opts := &pebble.IterOptions{}
	if prefix != "" {
		opts.LowerBound = []byte(prefix)
	}
	if upper := prefixEnd(prefix); upper != nil {
		opts.UpperBound = upper
	}
	it, err := p.db.NewIter(opts)
	if err != nil {
		return nil, fmt.Errorf("scan %q: %w", prefix, err)
	}
	var out []KV
	for it.First(); it.Valid() && (limit <= 0 || len(out) < limit); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("scan %q: %w", prefix, err)
		}
		out = append(out, KV{Key: string(it.Key()), Value: append([]byte(nil), v...)})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("scan %q: %w", prefix, err)
	}
	return out, nil
}

// Close implements Store.
func (p *Pebble) Close() error {
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("closing control plane store: %w", err)
	}
	return nil
}

// prefixEnd is the smallest key greater than every key with prefix, or
// nil when there is none.
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// pebbleLogger sends Pebble's own logging to slog at debug level (its
// info lines are routine), and fatal errors at error level.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log != nil {
		l.log.Debug(fmt.Sprintf(format, args...), "component", "state")
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.log != nil {
		l.log.Error(fmt.Sprintf(format, args...), "component", "state")
	}
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.log != nil {
		l.log.Error(msg, "component", "state")
	}
	panic(msg)
}
