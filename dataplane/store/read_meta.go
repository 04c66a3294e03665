package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Streams calls fn for every stream, in ID order, with its metadata and
// state summary. It reads only the catalog (two small records per stream),
// never messages, which is what keeps start-up fast. A stream exists when
// its metadata record does; a state record without one is ignored.
func (s *Store) Streams(fn func(StreamInfo) error) error {
	return s.streams([]byte{prefixCatalog}, []byte{prefixCatalog + 1}, fn)
}

// StreamsIn is Streams for the streams whose ids lie in [lo, hi): one
// partition's, whose ids share a range.
func (s *Store) StreamsIn(lo, hi uint64, fn func(StreamInfo) error) error {
	return s.streams(catalogKey(nil, lo, 0), catalogKey(nil, hi, 0), fn)
}

func (s *Store) streams(lower, upper []byte, fn func(StreamInfo) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	var cur StreamInfo
	have := false
	err := s.eng.scan(lower, upper, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if len(k) != 10 {
			return false, corruptf(k, "bad catalog key")
		}
		id := binary.BigEndian.Uint64(k[1:9])
		switch k[9] {
		case catalogMeta:
			if have {
				if err := fn(cur); err != nil {
					return false, err
				}
			}
			cur, have = StreamInfo{StreamMeta: StreamMeta{ID: id}}, true
			return true, decodeMeta(k, p, &cur.StreamMeta)
		case catalogState:
			if have && cur.ID == id {
				return true, decodeState(k, p, &cur.State)
			}
			return true, nil
		}
		return false, corruptf(k, "unknown catalog record")
	})
	if err == nil && have {
		err = fn(cur)
	}
	if err != nil {
		return fmt.Errorf("store: list streams: %w", err)
	}
	return nil
}

// LoadStream returns one stream's metadata and state summary.
func (s *Store) LoadStream(id uint64) (StreamInfo, error) {
	if err := s.life.acquire(); err != nil {
		return StreamInfo{}, err
	}
	defer s.life.release()
	info := StreamInfo{StreamMeta: StreamMeta{ID: id}}
	key := catalogKey(nil, id, catalogMeta)
	err := s.eng.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		return decodeMeta(key, p, &info.StreamMeta)
	})
	if errors.Is(err, errKeyNotFound) {
		return StreamInfo{}, notFound("stream %d", id)
	}
	if err != nil {
		return StreamInfo{}, fmt.Errorf("store: load stream %d: %w", id, err)
	}
	if info.State, err = streamState(s.eng, id); err != nil && !errors.Is(err, ErrNotFound) {
		return StreamInfo{}, err
	}
	return info, nil
}

// streamState reads a stream's state summary; ErrNotFound if it has none.
func streamState(r reader, id uint64) (StreamState, error) {
	var st StreamState
	key := catalogKey(nil, id, catalogState)
	err := r.get(key, func(v []byte) error {
		p, err := unseal(key, v)
		if err != nil {
			return err
		}
		return decodeState(key, p, &st)
	})
	if errors.Is(err, errKeyNotFound) {
		return StreamState{}, notFound("stream %d state", id)
	}
	if err != nil {
		return StreamState{}, fmt.Errorf("store: load stream %d state: %w", id, err)
	}
	return st, nil
}

// Consumers calls fn for each consumer of the stream, in name byte order.
func (s *Store) Consumers(stream uint64, fn func(ConsumerRecord) error) error {
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	lo := dataPrefix(nil, stream, kindConsumer)
	return consumers(s.eng, stream, lo, prefixEnd(bytes.Clone(lo)), fn)
}

// ConsumerCount counts the stream's consumers by their config records'
// keys, decoding nothing: a node's monitoring counts the consumers of
// the replicas it holds without loading their streams.
func (s *Store) ConsumerCount(stream uint64) (int, error) {
	if err := s.life.acquire(); err != nil {
		return 0, err
	}
	defer s.life.release()
	lo := dataPrefix(nil, stream, kindConsumer)
	n := 0
	err := s.eng.scan(lo, prefixEnd(bytes.Clone(lo)), false, func(k, _ []byte) (bool, error) {
		if k[len(k)-1] == consumerConfig {
			n++
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: count consumers of stream %d: %w", stream, err)
	}
	return n, nil
}

// LoadConsumer returns one consumer's records.
func (s *Store) LoadConsumer(stream uint64, name string) (ConsumerRecord, error) {
	if err := s.life.acquire(); err != nil {
		return ConsumerRecord{}, err
	}
	defer s.life.release()
	lo := consumerPrefix(nil, stream, name)
	var rec ConsumerRecord
	found := false
	err := consumers(s.eng, stream, lo, prefixEnd(bytes.Clone(lo)), func(c ConsumerRecord) error {
		rec, found = c, true
		return nil
	})
	if err == nil && !found {
		return ConsumerRecord{}, notFound("stream %d consumer %q", stream, name)
	}
	return rec, err
}

// consumers scans consumer records in [lo, hi), joining each consumer's
// config and state records.
func consumers(r reader, stream uint64, lo, hi []byte, fn func(ConsumerRecord) error) error {
	var cur ConsumerRecord
	var curRaw []byte
	have := false
	err := r.scan(lo, hi, false, func(k, v []byte) (bool, error) {
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		if len(k) < 10+2+1 {
			return false, corruptf(k, "short consumer key")
		}
		raw := k[10 : len(k)-1]
		if !have || !bytes.Equal(raw, curRaw) {
			if have {
				if err := fn(cur); err != nil {
					return false, err
				}
			}
			name, rest, ok := decodeEscaped(raw)
			if !ok || len(rest) != 0 {
				return false, corruptf(k, "bad consumer name")
			}
			curRaw = append(curRaw[:0], raw...)
			cur, have = ConsumerRecord{Stream: stream, Name: name}, true
		}
		switch k[len(k)-1] {
		case consumerConfig:
			cur.Config = bytes.Clone(p)
		case consumerState:
			cur.State = bytes.Clone(p)
		default:
			return false, corruptf(k, "unknown consumer record")
		}
		return true, nil
	})
	if err == nil && have {
		err = fn(cur)
	}
	if err != nil {
		return fmt.Errorf("store: consumers of stream %d: %w", stream, err)
	}
	return nil
}
