package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A mirror or source's progress is one record per source of a stream: the
// last origin sequence the stream took from it. It is written in the same
// batch as the message it took, so a commit never holds a message without
// the progress that covers it, nor progress past a message it lacks.

// PutSourceProgress records that the stream has taken everything of source
// up to origin sequence seq, from the origin whose identity is ident.
func (b *Batch) PutSourceProgress(stream uint64, source string, seq uint64, ident string) {
	b.key = sourceKey(b.key[:0], stream, source)
	b.set(b.key, append(binary.BigEndian.AppendUint64(nil, seq), ident...))
}

// DeleteSourceProgress forgets a source the stream no longer has.
func (b *Batch) DeleteSourceProgress(stream uint64, source string) {
	b.key = sourceKey(b.key[:0], stream, source)
	b.w.del(b.key)
}

// SourceProgress calls fn for each source progress record of the stream,
// in source byte order.
func (s *Store) SourceProgress(stream uint64, fn func(source string, seq uint64, ident string) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	return sourceProgress(s.eng, stream, fn)
}

// SourceProgress is Store.SourceProgress read from the view.
func (v *View) SourceProgress(stream uint64, fn func(source string, seq uint64, ident string) error) error {
	return sourceProgress(v.snap, stream, fn)
}

// SourceProgress is Store.SourceProgress.
func (r *Recovery) SourceProgress(stream uint64, fn func(source string, seq uint64, ident string) error) error {
	return sourceProgress(r.cur, stream, fn)
}

func sourceProgress(r reader, stream uint64, fn func(source string, seq uint64, ident string) error) error {
	lo := dataPrefix(nil, stream, kindSource)
	hi := prefixEnd(bytes.Clone(lo))
	err := r.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		name, rest, ok := decodeEscaped(k[len(lo):])
		if !ok || len(rest) != 0 || len(p) < 8 {
			return false, corruptf(k, "bad source progress record")
		}
		return true, fn(name, binary.BigEndian.Uint64(p), string(p[8:]))
	})
	if err != nil {
		return fmt.Errorf("store: source progress of stream %d: %w", stream, err)
	}
	return nil
}
