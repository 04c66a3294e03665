// Package store is the JetStream message store: a durable, ordered,
// checksummed record layer under the stream and consumer state machines.
//
// A Store holds every stream of a node in one ordered key space (see
// keys.go for the layout). Two engines sit behind the same Store type: Pebble
// (Open), for file-backed streams, and an in-memory B-tree (NewMem), for
// memory-storage streams and tests. Both use the same keys, the same value
// encoding and the same read code, so they answer every read identically.
//
// The store holds records, not policy. Limits, deduplication windows,
// expected-sequence checks and per-subject accounting are decided by the
// state machine; the store writes what it is told, atomically, in a Batch,
// and answers range reads. In particular the state machine keeps the
// subject index exact: DeleteMsg, UnindexRange and PurgeAll remove index
// entries, PurgeRange does not (see Batch.PurgeRange).
//
// Durability: Batch.Commit(true) returns after the batch is fsynced;
// Commit(false) batches become durable at the next Store.Sync or synced
// commit, in commit order (the WAL is sequential), and a crash keeps some
// prefix of them, each batch entirely or not at all. Group commit (many
// changes, one fsync, then every acknowledgement) is the state machine's:
// its apply path builds one batch per group (jetstream/applier.go), so
// there is one such mechanism, with the state machine's ordering. A Pebble
// store that has seen a failed sync is poisoned: every later call fails
// with ErrFailed, and the node must reopen it (recovery from the WAL is
// the only trustworthy path after an fsync error).
//
// Reads see committed batches only. A state machine that must read its own
// pending writes reads through the batch (Batch.Reader) and still commits
// the whole change as one batch, so a crash never keeps part of it; each
// batch carries the state summaries that describe it (see PutStreamState).
package store
