package jetstream

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/store"
)

// groupFSM is the part the meta and partition state machines share: raft
// hands them committed entries in batches, and each batch becomes one
// store batch carrying the entries' writes, the configurations among
// them, and the applied index last. Entries at or below the stored
// applied index were applied before a crash and are skipped, so replay is
// idempotent and recovery is the same mechanism as replication.
type groupFSM struct {
	st      *store.Store
	g       uint16
	applied uint64
	// marker, if set, is called for each check marker (cluster_check.go)
	// with every entry before it committed to the store.
	marker func(index uint64)
}

// applyBatch commits logs through write, which adds one command's writes
// to b (and reports what raft returns for it). Configurations are
// recorded for the snapshot store, which needs the membership that goes
// with the applied index.
func (f *groupFSM) applyBatch(logs []*raft.Log, write func(b *store.Batch, l *raft.Log) any) []any {
	out := make([]any, len(logs))
	b := f.st.NewBatch()
	defer func() { b.Close() }()
	var last *raft.Log
	for i, l := range logs {
		if l.Index <= f.applied {
			continue
		}
		switch l.Type {
		case raft.LogCommand:
			if f.marker != nil && isDigestMarker(l.Extensions) {
				// The marker's view holds exactly the entries before it.
				f.commit(b, last)
				b.Close()
				b = f.st.NewBatch()
				f.marker(l.Index)
				break
			}
			out[i] = write(b, l)
		case raft.LogConfiguration:
			b.PutAppliedConfig(f.g, l.Index, l.Term, raft.DecodeConfiguration(l.Data))
		}
		last = l
	}
	f.commit(b, last)
	return out
}

// commit commits b with last as the applied index, if last is beyond
// what is applied.
func (f *groupFSM) commit(b *store.Batch, last *raft.Log) {
	if last == nil || last.Index <= f.applied {
		return
	}
	b.PutApplied(f.g, last.Index, last.Term)
	// Not synced: raft synced its own append of these entries, and a
	// crash that loses this batch leaves them above the stored applied
	// index, where raft replays them.
	if err := b.Commit(false); err != nil {
		// A store that cannot commit cannot follow the log: stopping is
		// safer than applying later entries over a gap.
		panic(fmt.Sprintf("jetstream group %d: commit entries up to %d: %v", f.g, last.Index, err))
	}
	f.applied = last.Index
}

// restore installs a snapshot the snapshot store received and reads the
// applied index back.
func (f *groupFSM) restore(rc io.ReadCloser) error {
	if err := f.st.RestoreSnapshot(f.g, rc); err != nil {
		return fmt.Errorf("jetstream group %d: restore snapshot: %w", f.g, err)
	}
	idx, _, err := f.st.Applied(f.g)
	if err != nil {
		return fmt.Errorf("jetstream group %d: applied index: %w", f.g, err)
	}
	f.applied = idx
	return nil
}

// partitionFSM applies a partition's entries on every member. An entry is
// the batch its leader's apply path wrote (store.Batch.Repr); every
// member commits those same writes, so members hold byte-identical
// records. The leader's streams in memory already reflect the entry (it
// made it); followers keep none, and load the partition's streams from
// the store when they become its leader.
type partitionFSM struct {
	groupFSM
	e *Engine
	u *partUsage
}

// FSM returns raft group g's state machine (0: the meta group). Call it
// before the group starts; its applied index is read from the store.
func (e *Engine) FSM(g uint16) (raft.BatchingFSM, error) {
	if e.cl == nil {
		return nil, fmt.Errorf("jetstream: FSM of group %d: engine not clustered", g)
	}
	idx, _, err := e.opts.Store.Applied(g)
	if err != nil {
		return nil, fmt.Errorf("jetstream: group %d applied index: %w", g, err)
	}
	base := groupFSM{st: e.opts.Store, g: g, applied: idx}
	if g == 0 {
		return &metaFSM{groupFSM: base, c: e.cl}, nil
	}
	base.marker = func(index uint64) { e.cl.markerApplied(g, index) }
	return &partitionFSM{groupFSM: base, e: e, u: e.cl.addUsage(g)}, nil
}

// ApplyBatch implements raft.BatchingFSM.
func (f *partitionFSM) ApplyBatch(logs []*raft.Log) []any {
	defer f.u.dirty.Store(true)
	return f.applyBatch(logs, func(b *store.Batch, l *raft.Log) any {
		if err := b.AppendRepr(l.Data); err != nil {
			// Raft's records are checksummed, so this is a leader's bug,
			// not rot: every member refuses the entry alike.
			f.e.log.Error("jetstream partition entry unreadable; skipped", "group", f.g, "index", l.Index, "err", err)
			return err
		}
		if t := f.e.tiering; t != nil {
			t.replicated(l.Data)
		}
		return nil
	})
}

// Apply implements raft.FSM.
func (f *partitionFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// Snapshot implements raft.FSM: the partition's records are in the store,
// which the snapshot store reads directly.
func (f *partitionFSM) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }

// Restore implements raft.FSM. A partition this node leads is never
// restored (raft installs snapshots on followers only), and followers
// keep no streams in memory.
func (f *partitionFSM) Restore(rc io.ReadCloser) error {
	defer f.u.dirty.Store(true)
	return f.restore(rc)
}

// noSnapshot is the FSM half of a snapshot whose data the snapshot store
// takes from the store itself.
type noSnapshot struct{}

func (noSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noSnapshot) Release()                             {}
