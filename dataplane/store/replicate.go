package store

// Replication moves a batch, not the change that made it: a partition's
// leader runs the apply path into a Batch, and the raft entry is that
// batch's Repr. Every replica then commits the same writes (AppendRepr),
// so replicas hold byte-identical records and nothing about applying an
// entry depends on the replica's clock, limits or memory.

// Repr is the batch's writes in the store's encoding, valid until the
// batch is written to, committed or reset.
func (b *Batch) Repr() []byte { return b.w.encoded() }

// AppendRepr adds the writes of another batch's Repr (from a store of the
// same kind) to this batch, after those it holds. A repr that cannot be
// read is ErrCorrupt and adds nothing.
func (b *Batch) AppendRepr(r []byte) error {
	b.view = nil
	return b.w.appendEncoded(r)
}
