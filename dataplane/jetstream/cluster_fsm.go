package jetstream

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// partitionFSM applies a partition's entries on every member. An entry is
// the batch its leader's apply path wrote (store.Batch.Repr); applying it
// commits those writes with the entry's index in the same batch, so a
// replay after a crash skips what the store already holds and every
// member ends with the same records. The leader's streams in memory
// already reflect the entry (it made it); followers keep none.
type partitionFSM struct {
	e       *Engine
	g       uint16
	applied uint64
}

// FSM returns raft group g's state machine (0: the meta group). Call it
// before the group starts; its applied index is read from the store.
func (e *Engine) FSM(g uint16) (raft.FSM, error) {
	if e.cl == nil {
		return nil, fmt.Errorf("jetstream: FSM of group %d: engine not clustered", g)
	}
	idx, _, err := e.opts.Store.Applied(g)
	if err != nil {
		return nil, fmt.Errorf("jetstream: group %d applied index: %w", g, err)
	}
	if g == 0 {
		return &metaFSM{c: e.cl, applied: idx}, nil
	}
	return &partitionFSM{e: e, g: g, applied: idx}, nil
}

// Apply implements raft.FSM.
func (f *partitionFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || l.Index <= f.applied {
		return nil
	}
	st := f.e.opts.Store
	b := st.NewBatch()
	defer b.Close()
	if err := b.SetRepr(l.Data); err != nil {
		// Raft's records are checksummed, so this is a leader's bug, not
		// rot: every member refuses it alike and moves on.
		f.e.log.Error("jetstream partition entry unreadable; skipped", "group", f.g, "index", l.Index, "err", err)
		b.Reset()
	}
	b.PutApplied(f.g, l.Index, l.Term)
	// Not synced: raft's own append of this entry was, and the store
	// shares one log with it, so a crash loses at most what raft replays.
	if err := b.Commit(false); err != nil {
		panic(fmt.Sprintf("jetstream partition %d: commit entry %d: %v", f.g, l.Index, err))
	}
	f.applied = l.Index
	return nil
}

// Snapshot implements raft.FSM: the partition's records are in the store,
// which the snapshot store reads directly.
func (f *partitionFSM) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }

// Restore implements raft.FSM: the snapshot store installed the records;
// only the applied index is read back.
func (f *partitionFSM) Restore(rc io.ReadCloser) error {
	rc.Close()
	idx, _, err := f.e.opts.Store.Applied(f.g)
	if err != nil {
		return err
	}
	f.applied = idx
	return nil
}
