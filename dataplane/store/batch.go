package store

import (
	"encoding/binary"
	"fmt"
)

// Batch is a set of mutations that commit atomically: all of them or none
// are visible after a crash, and readers see all or none of them. Mutations
// are blind writes; a Batch never reads the store.
//
// Threading: a Batch is used by one goroutine at a time. It is reusable
// after Commit (which empties it) or Reset; Close returns it to its store's
// pool.
type Batch struct {
	s    *Store
	w    engineBatch
	key  []byte // scratch for the key being written
	key2 []byte // scratch for a range's end key
	val  []byte // scratch for the value being written
	// view is what Reader returned, until the batch is committed or reset.
	view *Store
}

// Reader returns a read-only Store that sees the committed store with this
// batch's writes on top, including writes made after Reader, until the
// batch is committed or reset. It lets a state machine read its own
// pending writes and still commit all of them as one atomic batch, so a
// crash never keeps part of a change. The first call copies the writes so
// far into an indexed form, and later writes cost more (Pebble indexes
// them), so a batch that needs no reads should not ask. Use it from the
// batch's goroutine only; writing methods must not be called on it.
func (b *Batch) Reader() *Store {
	if b.view == nil {
		b.view = newStore(b.w.reader())
	}
	return b.view
}

// set writes payload under key, sealed with its checksum.
func (b *Batch) set(key, payload []byte) {
	b.val = seal(key, append(b.val[:0], payload...), 0)
	b.w.set(key, b.val)
}

// setVal writes b.val (already holding the payload) under key.
func (b *Batch) setVal(key []byte) {
	b.val = seal(key, b.val, 0)
	b.w.set(key, b.val)
}

// PutStream creates a stream or replaces its name and config.
func (b *Batch) PutStream(m StreamMeta) {
	b.key = catalogKey(b.key[:0], m.ID, catalogMeta)
	b.val = appendMeta(b.val[:0], &m)
	b.setVal(b.key)
}

// PutStreamState records a stream's summary. Write it in the same batch as
// the change it summarises, so a restart never sees one without the other:
// every batch that changes a stream's messages carries the summary of what
// the store holds after it.
func (b *Batch) PutStreamState(stream uint64, st StreamState) {
	b.key = catalogKey(b.key[:0], stream, catalogState)
	b.val = appendState(b.val[:0], &st)
	b.setVal(b.key)
}

// DeleteStream removes everything the stream owns: catalog records,
// messages, indexes, dedup and consumer records.
func (b *Batch) DeleteStream(stream uint64) {
	b.key = catalogKey(b.key[:0], stream, catalogMeta)
	b.w.del(b.key)
	b.key = catalogKey(b.key[:0], stream, catalogState)
	b.w.del(b.key)
	b.key = streamDataStart(b.key[:0], stream)
	b.key2 = streamDataEnd(b.key2[:0], stream)
	b.w.delRange(b.key, b.key2)
}

// PutMsg stores a message and its subject index entry, and a TTL entry when
// m.TTL is positive. A message at an existing sequence is replaced; the old
// message's index entry is not removed, so the state machine never reuses a
// sequence.
func (b *Batch) PutMsg(stream uint64, m *Message) {
	b.key = msgKey(b.key[:0], stream, m.Seq)
	b.val = appendMsg(b.val[:0], m)
	b.setVal(b.key)
	b.key = subjectKey(b.key[:0], stream, m.Subject, m.Seq)
	b.set(b.key, nil)
	if exp := m.Expires(); exp != 0 {
		b.key = ttlKey(b.key[:0], stream, exp, m.Seq)
		b.set(b.key, nil)
	}
}

// DeleteMsg removes a message and its subject index entry; subject must be
// the message's subject. It also serves JetStream's "erase": Pebble deletes
// write a tombstone and drop the bytes at compaction, they do not overwrite
// them, so no delete here is a secure erase. A TTL entry is left to expire:
// Expiring reports it, and the state machine removes it with DeleteTTL.
func (b *Batch) DeleteMsg(stream, seq uint64, subject string) {
	b.key = msgKey(b.key[:0], stream, seq)
	b.w.del(b.key)
	b.key = subjectKey(b.key[:0], stream, subject, seq)
	b.w.del(b.key)
}

// PurgeRange removes the messages with sequence in [first, last) with one
// range delete. It does not touch the subject index, because the store
// cannot know the purged messages' subjects without reading them: remove
// their entries with UnindexRange (or use PurgeAll when the purge empties
// the stream). Reads skip index entries whose message is gone, so a missed
// entry never yields a deleted message, but it costs space and skews
// SubjectStates and wildcard LastMsg.
func (b *Batch) PurgeRange(stream, first, last uint64) {
	if first >= last {
		return
	}
	b.key = msgKey(b.key[:0], stream, first)
	b.key2 = msgKey(b.key2[:0], stream, last)
	b.w.delRange(b.key, b.key2)
}

// UnindexRange removes subject's index entries with sequence in
// [first, last); a single sequence becomes a point delete.
func (b *Batch) UnindexRange(stream uint64, subject string, first, last uint64) {
	switch {
	case first >= last:
		return
	case last-first == 1:
		b.key = subjectKey(b.key[:0], stream, subject, first)
		b.w.del(b.key)
		return
	}
	b.key = subjectKey(b.key[:0], stream, subject, first)
	b.key2 = subjectKey(b.key2[:0], stream, subject, last)
	b.w.delRange(b.key, b.key2)
}

// PurgeAll removes every message of the stream with its subject index and
// TTL entries, in one range delete. Metadata, state, dedup and consumer
// records stay: the caller writes the new state summary.
func (b *Batch) PurgeAll(stream uint64) {
	b.key = dataPrefix(b.key[:0], stream, kindMsg)
	b.key2 = dataPrefix(b.key2[:0], stream, kindTTL+1)
	b.w.delRange(b.key, b.key2)
}

// DeleteTTL removes one TTL entry, once the state machine has acted on it.
func (b *Batch) DeleteTTL(stream uint64, expires int64, seq uint64) {
	b.key = ttlKey(b.key[:0], stream, expires, seq)
	b.w.del(b.key)
}

// PutDedup records a message ID for the duplicate window: one record to look
// it up by ID, one in time order so expiry is a range scan.
func (b *Batch) PutDedup(stream uint64, d DedupEntry) {
	b.key = dedupIDKey(b.key[:0], stream, d.ID)
	b.val = binary.AppendVarint(binary.AppendUvarint(b.val[:0], d.Seq), d.Time)
	b.setVal(b.key)
	b.key = dedupTimeKey(b.key[:0], stream, d.Time, d.ID)
	b.val = binary.AppendUvarint(b.val[:0], d.Seq)
	b.setVal(b.key)
}

// DeleteDedup removes a dedup entry; t must be the time it was put with.
func (b *Batch) DeleteDedup(stream uint64, id string, t int64) {
	b.key = dedupIDKey(b.key[:0], stream, id)
	b.w.del(b.key)
	b.key = dedupTimeKey(b.key[:0], stream, t, id)
	b.w.del(b.key)
}

// PutConsumer creates a consumer or replaces its config.
func (b *Batch) PutConsumer(stream uint64, name string, config []byte) {
	b.key = consumerKey(b.key[:0], stream, name, consumerConfig)
	b.set(b.key, config)
}

// PutConsumerState replaces a consumer's delivered/ack state.
func (b *Batch) PutConsumerState(stream uint64, name string, state []byte) {
	b.key = consumerKey(b.key[:0], stream, name, consumerState)
	b.set(b.key, state)
}

// DeleteConsumer removes a consumer's config and state.
func (b *Batch) DeleteConsumer(stream uint64, name string) {
	b.key = consumerPrefix(b.key[:0], stream, name)
	b.key2 = prefixEnd(consumerPrefix(b.key2[:0], stream, name))
	b.w.delRange(b.key, b.key2)
}

// Len is the batch's encoded size in bytes, for sizing groups and limits.
func (b *Batch) Len() int { return b.w.size() }

// Count is the number of writes in the batch.
func (b *Batch) Count() int { return b.w.count() }

// Commit applies the batch atomically and empties it. With sync it returns
// only once the batch is on stable storage. A failed commit also empties the
// batch; nothing of it was applied.
func (b *Batch) Commit(sync bool) error {
	if err := b.s.life.acquire(); err != nil {
		return err
	}
	defer b.s.life.release()
	n := b.w.count()
	if err := b.w.commit(sync); err != nil {
		b.view = nil
		return fmt.Errorf("store: commit batch of %d writes: %w", n, err)
	}
	b.Reset()
	return nil
}

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	b.w.reset()
	b.view = nil
}

// Close empties the batch and returns it to its store's pool; it must not be
// used afterwards.
func (b *Batch) Close() {
	b.Reset()
	b.s.pool.Put(b)
}
