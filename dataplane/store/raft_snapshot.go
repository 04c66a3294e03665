package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Snapshots without dumps. The FSM's state is already durable in the store,
// with the applied index in the same batches, so a group's snapshot is
// its key ranges as they are now (hashicorp/vault's BoltSnapshotStore does
// the same): List describes the applied state, Open streams the ranges
// from a Pebble snapshot, and a received stream replaces the ranges.
//
// Stream format (all of it covered by the trailer):
//
//	magic "CSNP" version(1) group(2)
//	len(meta) meta                  applied {index, term, configuration} (appendFloor)
//	{len(key) key len(value) value} the group's records in key order, values sealed as stored
//	0x00                            an empty key ends the records
//	crc32c(everything before)(4)    little-endian
//
// Lengths are uvarints.

var snapshotMagic = []byte("CSNP")

const snapshotVersion = 1

// Bounds on one record of a received stream, so a bad length cannot ask
// for a huge allocation.
const (
	maxSnapshotKey   = 1 << 20
	maxSnapshotValue = 256 << 20
)

// snapshotChunk is how much of a received stream is staged per record, and
// snapshotBatch how much is written per batch when it is installed.
const (
	snapshotChunk = 1 << 20
	snapshotBatch = 1 << 20
)

// raftSnapshots is one group's raft.SnapshotStore.
type raftSnapshots struct {
	s     *Store
	group uint16
}

// SnapshotStore returns group's raft.SnapshotStore (see the comment at the
// top of raft_snapshot.go). Use it with raft's NoSnapshotRestoreOnStart:
// the state is already in place at start, only the snapshot's metadata is
// needed then.
func (s *Store) SnapshotStore(group uint16) raft.SnapshotStore {
	return &raftSnapshots{s: s, group: group}
}

// id is the group's one snapshot: always the state as it is now.
func (r *raftSnapshots) id() string { return fmt.Sprintf("store-group-%d", r.group) }

func (r *raftSnapshots) meta(a *appliedState) *raft.SnapshotMeta {
	return &raft.SnapshotMeta{
		Version:            raft.SnapshotVersionMax,
		ID:                 r.id(),
		Index:              a.index,
		Term:               a.term,
		Configuration:      a.conf,
		ConfigurationIndex: a.confIndex,
	}
}

// List returns the one snapshot describing the applied state, or none if
// the group has applied nothing. Size is left 0: raft takes the size it
// sends from Open.
func (r *raftSnapshots) List() ([]*raft.SnapshotMeta, error) {
	if err := r.s.life.acquire(); err != nil {
		return nil, err
	}
	defer r.s.life.release()
	snap, err := r.s.eng.snapshot()
	if err != nil {
		return nil, fmt.Errorf("store: raft group %d list snapshots: %w", r.group, err)
	}
	defer snap.close()
	a, ok, err := r.applied(snap)
	if err != nil || !ok {
		return nil, err
	}
	return []*raft.SnapshotMeta{r.meta(&a)}, nil
}

// applied reads the applied state and refuses one without a configuration:
// raft would start with an empty configuration, and a member that knows no
// configuration grants its vote to any candidate.
func (r *raftSnapshots) applied(rd reader) (appliedState, bool, error) {
	a, ok, err := readApplied(rd, r.group)
	switch {
	case err != nil:
		return a, false, fmt.Errorf("store: raft group %d applied state: %w", r.group, err)
	case ok && a.confIndex == 0:
		return a, false, fmt.Errorf("store: raft group %d: applied index %d without a configuration (the FSM records configuration entries with PutAppliedConfig)", r.group, a.index)
	}
	return a, ok, nil
}

// Open streams the group's state from a Pebble snapshot taken now, with
// the metadata read from the same snapshot. id must be the group's
// snapshot id. The stream is produced as it is read; until the reader is
// closed it counts as a call in progress (Store.Close waits for it).
func (r *raftSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if id != r.id() {
		return nil, nil, fmt.Errorf("store: raft group %d: no snapshot %q", r.group, id)
	}
	if err := r.s.life.acquire(); err != nil {
		return nil, nil, err
	}
	snap, err := r.s.eng.snapshot()
	if err != nil {
		r.s.life.release()
		return nil, nil, fmt.Errorf("store: raft group %d open snapshot: %w", r.group, err)
	}
	fail := func(err error) (*raft.SnapshotMeta, io.ReadCloser, error) {
		_ = snap.close()
		r.s.life.release()
		return nil, nil, err
	}
	a, ok, err := r.applied(snap)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(fmt.Errorf("store: raft group %d: nothing applied, no snapshot", r.group))
	}
	header := appendSnapshotHeader(nil, r.group, &a)
	// raft sends exactly Size bytes and the receiver checks it, so the
	// size is counted first, over the same snapshot.
	size := int64(len(header)) + 1 + crcLen
	for _, kr := range raftGroupRanges(r.group) {
		err := snap.scan(kr.start, kr.end, false, func(k, v []byte) (bool, error) {
			size += int64(uvarintLen(len(k)) + len(k) + uvarintLen(len(v)) + len(v))
			return true, nil
		})
		if err != nil {
			return fail(fmt.Errorf("store: raft group %d size snapshot: %w", r.group, err))
		}
	}
	m := r.meta(&a)
	m.Size = size
	return m, &snapshotReader{r: r, snap: snap, header: header}, nil
}

func appendSnapshotHeader(b []byte, group uint16, a *appliedState) []byte {
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = binary.BigEndian.AppendUint16(b, group)
	meta := appendFloor(nil, a)
	return append(binary.AppendUvarint(b, uint64(len(meta))), meta...)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// snapshotReader streams one snapshot: a goroutine, started by the first
// Read, writes the stream into a pipe.
type snapshotReader struct {
	r      *raftSnapshots
	snap   cursor
	header []byte

	once   sync.Once
	pr     *io.PipeReader
	done   chan struct{}
	closed bool
}

func (sr *snapshotReader) Read(p []byte) (int, error) {
	sr.once.Do(func() {
		var pw *io.PipeWriter
		sr.pr, pw = io.Pipe()
		sr.done = make(chan struct{})
		go func() {
			defer close(sr.done)
			pw.CloseWithError(sr.write(pw))
		}()
	})
	if sr.pr == nil {
		return 0, io.ErrClosedPipe
	}
	return sr.pr.Read(p)
}

// write produces the stream. Each value is verified as it is read, so a
// corrupt record fails the send instead of reaching the follower.
func (sr *snapshotReader) write(w io.Writer) error {
	crc := crcWriter{w: w}
	bw := bufio.NewWriterSize(&crc, 64<<10)
	_, _ = bw.Write(sr.header)
	var scratch [binary.MaxVarintLen64]byte
	for _, kr := range raftGroupRanges(sr.r.group) {
		err := sr.snap.scan(kr.start, kr.end, false, func(k, v []byte) (bool, error) {
			if _, err := unseal(k, v); err != nil {
				return false, err
			}
			_, _ = bw.Write(binary.AppendUvarint(scratch[:0], uint64(len(k))))
			_, _ = bw.Write(k)
			_, _ = bw.Write(binary.AppendUvarint(scratch[:0], uint64(len(v))))
			_, err := bw.Write(v)
			return err == nil, err
		})
		if err != nil {
			return fmt.Errorf("store: raft group %d stream snapshot: %w", sr.r.group, err)
		}
	}
	_ = bw.WriteByte(0)
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.sum))
	return err
}

// Close stops the stream and releases the Pebble snapshot.
func (sr *snapshotReader) Close() error {
	if sr.closed {
		return nil
	}
	sr.closed = true
	sr.once.Do(func() {}) // no stream starts after Close
	if sr.pr != nil {
		_ = sr.pr.Close()
		<-sr.done
	}
	err := sr.snap.close()
	sr.r.s.life.release()
	return err
}

// crcWriter passes writes on, checksumming them.
type crcWriter struct {
	w   io.Writer
	sum uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	c.sum = crc32.Update(c.sum, castagnoli, p)
	return c.w.Write(p)
}

// Create returns a sink for a snapshot at {index, term}. Raft uses it two
// ways:
//   - to take a snapshot of its own (FSMSnapshot.Persist writes nothing):
//     on Close the sink records {index, term, configuration} as the
//     group's snapshot floor, since the store already holds that state;
//   - to receive a leader's snapshot (the stream Open produces): the sink
//     stages the stream in the store as it arrives, and on Close verifies
//     it whole (trailer, framing, every record's checksum and key range)
//     before touching the group's ranges. A stream that fails is
//     discarded and the group is left as it was.
//
// Installing a verified stream sets the repair marker (fsynced), replaces
// the group's ranges (range deletes, then the records in batches), and
// finally writes the applied record and configuration and clears the
// marker in one fsynced batch. A crash in between leaves the marker set,
// so NeedsRepair reports it at restart.
func (r *raftSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != raft.SnapshotVersionMax {
		return nil, fmt.Errorf("store: raft group %d: unsupported snapshot version %d", r.group, version)
	}
	return &snapshotSink{
		r:    r,
		meta: appliedState{index: index, term: term, confIndex: confIndex, conf: conf},
	}, nil
}

// snapshotSink receives one snapshot (see Create). Used by one goroutine.
type snapshotSink struct {
	r    *raftSnapshots
	meta appliedState

	written int64
	// buf holds what is not yet staged; the last crcLen bytes received
	// stay in it, as they may be the trailer.
	buf    []byte
	crc    uint32 // of what is staged
	chunks uint64 // staged so far
	err    error  // the first failure; the sink is done
	done   bool
}

func (k *snapshotSink) ID() string { return k.r.id() }

func (k *snapshotSink) Write(p []byte) (int, error) {
	if k.err != nil {
		return 0, k.err
	}
	if k.done {
		return 0, fmt.Errorf("store: raft group %d: write to a closed snapshot sink", k.r.group)
	}
	if k.written == 0 && len(p) > 0 {
		// Whatever an earlier receive left staged goes first.
		if k.err = k.clearStaging(false); k.err != nil {
			return 0, k.err
		}
	}
	k.written += int64(len(p))
	k.buf = append(k.buf, p...)
	if len(k.buf) >= snapshotChunk+crcLen {
		n := len(k.buf) - crcLen
		if k.err = k.stage(k.buf[:n]); k.err != nil {
			return 0, k.err
		}
		k.buf = append(k.buf[:0], k.buf[n:]...)
	}
	return len(p), nil
}

// stage writes one chunk of the stream under the group's staging keys.
func (k *snapshotSink) stage(chunk []byte) error {
	k.crc = crc32.Update(k.crc, castagnoli, chunk)
	b := k.r.s.NewBatch()
	defer b.Close()
	b.key = raftStagingKey(b.key[:0], k.r.group, k.chunks)
	b.set(b.key, chunk)
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("store: raft group %d stage snapshot: %w", k.r.group, err)
	}
	k.chunks++
	return nil
}

func (k *snapshotSink) clearStaging(sync bool) error {
	b := k.r.s.NewBatch()
	defer b.Close()
	b.key = raftKey(b.key[:0], k.r.group, raftKindStaging)
	b.key2 = prefixEnd(raftKey(b.key2[:0], k.r.group, raftKindStaging))
	b.w.delRange(b.key, b.key2)
	if err := b.Commit(sync); err != nil {
		return fmt.Errorf("store: raft group %d clear staged snapshot: %w", k.r.group, err)
	}
	return nil
}

// Cancel discards what was received.
func (k *snapshotSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	if k.written == 0 {
		return nil
	}
	return k.clearStaging(false)
}

// Close finishes the snapshot (see Create). Raft may call it twice (from
// FSMSnapshot.Persist and after it); the second call does nothing.
func (k *snapshotSink) Close() error {
	if k.done {
		return k.err
	}
	k.done = true
	if k.err != nil {
		_ = k.clearStaging(false)
		return k.err
	}
	if k.written == 0 {
		k.err = k.writeFloor()
		return k.err
	}
	if k.err = k.receive(); k.err != nil {
		_ = k.clearStaging(false)
	}
	return k.err
}

// writeFloor records a snapshot raft took of the state in place.
func (k *snapshotSink) writeFloor() error {
	b := k.r.s.NewBatch()
	defer b.Close()
	b.key = raftKey(b.key[:0], k.r.group, raftKindFloor)
	b.val = appendFloor(b.val[:0], &k.meta)
	b.setVal(b.key)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d record snapshot at %d: %w", k.r.group, k.meta.index, err)
	}
	return nil
}

// receive verifies the staged stream and installs it.
func (k *snapshotSink) receive() error {
	if err := k.r.s.life.acquire(); err != nil {
		return err
	}
	defer k.r.s.life.release()
	if len(k.buf) < crcLen {
		return k.corrupt("truncated: %d bytes", k.written)
	}
	body, trailer := k.buf[:len(k.buf)-crcLen], k.buf[len(k.buf)-crcLen:]
	if len(body) > 0 {
		if err := k.stage(body); err != nil {
			return err
		}
	}
	if binary.LittleEndian.Uint32(trailer) != k.crc {
		return k.corrupt("stream checksum mismatch over %d bytes", k.written)
	}
	if err := k.replay(nil); err != nil {
		return err
	}
	if err := k.r.s.SetRepair(k.r.group); err != nil {
		return err
	}
	// From here a failure leaves the marker set: the ranges are no longer
	// what they were.
	w := &installer{s: k.r.s, b: k.r.s.NewBatch()}
	defer w.b.Close()
	for _, kr := range raftGroupRanges(k.r.group) {
		w.b.w.delRange(kr.start, kr.end)
	}
	if err := k.replay(w); err != nil {
		return err
	}
	b := w.b
	b.key = raftKey(b.key[:0], k.r.group, raftKindStaging)
	b.key2 = prefixEnd(raftKey(b.key2[:0], k.r.group, raftKindStaging))
	b.w.delRange(b.key, b.key2)
	b.key = raftKey(b.key[:0], k.r.group, raftKindFloor)
	b.w.del(b.key)
	b.PutApplied(k.r.group, k.meta.index, k.meta.term)
	b.key = raftKey(b.key[:0], k.r.group, raftKindConfig)
	b.val = appendConfig(b.val[:0], k.meta.confIndex, k.meta.conf)
	b.setVal(b.key)
	b.key = raftKey(b.key[:0], k.r.group, raftKindRepair)
	b.w.del(b.key)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d install snapshot at %d: %w", k.r.group, k.meta.index, err)
	}
	return nil
}

func (k *snapshotSink) corrupt(format string, args ...any) error {
	return fmt.Errorf("store: raft group %d snapshot at %d: %s: %w", k.r.group, k.meta.index, fmt.Sprintf(format, args...), ErrCorrupt)
}

// installer writes a received snapshot's records in batches.
type installer struct {
	s *Store
	b *Batch
}

func (w *installer) put(k, v []byte) error {
	w.b.w.set(k, v)
	if w.b.Len() < snapshotBatch {
		return nil
	}
	return w.b.Commit(false)
}

// replay parses the staged stream, checking everything a record can get
// wrong, and hands each record to w (nil: check only).
func (k *snapshotSink) replay(w *installer) error {
	br := bufio.NewReaderSize(&stagedReader{s: k.r.s, group: k.r.group, n: k.chunks}, 64<<10)
	bad := func(format string, args ...any) error {
		return k.corrupt(format, args...)
	}
	head := make([]byte, len(snapshotMagic)+3)
	if _, err := io.ReadFull(br, head); err != nil {
		return readErr(err, bad, "header")
	}
	if !bytes.Equal(head[:len(snapshotMagic)], snapshotMagic) || head[len(snapshotMagic)] != snapshotVersion {
		return bad("not a snapshot stream of version %d", snapshotVersion)
	}
	if g := binary.BigEndian.Uint16(head[len(snapshotMagic)+1:]); g != k.r.group {
		return bad("stream of group %d", g)
	}
	metaKey := raftKey(nil, k.r.group, raftKindApplied)
	meta, err := readField(br, maxSnapshotKey, bad, "metadata")
	if err != nil {
		return err
	}
	a, err := decodeFloor(metaKey, meta)
	if err != nil {
		return err
	}
	if a.index != k.meta.index || a.term != k.meta.term {
		return bad("stream holds {index %d, term %d}", a.index, a.term)
	}
	ranges := raftGroupRanges(k.r.group)
	var prev []byte
	for {
		key, err := readField(br, maxSnapshotKey, bad, "key")
		if err != nil {
			return err
		}
		if len(key) == 0 {
			break
		}
		val, err := readField(br, maxSnapshotValue, bad, "value")
		if err != nil {
			return err
		}
		if prev != nil && bytes.Compare(key, prev) <= 0 {
			return bad("key %x out of order", key)
		}
		if !inRanges(ranges, key) {
			return bad("key %x outside the group's ranges", key)
		}
		if _, err := unseal(key, val); err != nil {
			return err
		}
		if w != nil {
			if err := w.put(key, val); err != nil {
				return err
			}
		}
		prev = key
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err == nil {
			return bad("bytes after the end of the records")
		}
		return err
	}
	return nil
}

func inRanges(rs []keyRange, k []byte) bool {
	for _, r := range rs {
		if bytes.Compare(k, r.start) >= 0 && bytes.Compare(k, r.end) < 0 {
			return true
		}
	}
	return false
}

// readField reads len(uvarint) bytes.
func readField(br *bufio.Reader, limit uint64, bad func(string, ...any) error, what string) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, readErr(err, bad, what)
	}
	if n > limit {
		return nil, bad("%s of %d bytes", what, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, readErr(err, bad, what)
	}
	return b, nil
}

// readErr turns a short stream into corruption and passes the store's
// own errors on.
func readErr(err error, bad func(string, ...any) error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return bad("stream ends in the %s", what)
	}
	return err
}

// stagedReader reads the staged chunks of a received stream in order.
type stagedReader struct {
	s       *Store
	group   uint16
	next, n uint64
	backing []byte
	buf     []byte
}

func (r *stagedReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next == r.n {
			return 0, io.EOF
		}
		key := raftStagingKey(nil, r.group, r.next)
		err := r.s.eng.get(key, func(v []byte) error {
			c, err := unseal(key, v)
			r.backing = append(r.backing[:0], c...)
			return err
		})
		if errors.Is(err, errKeyNotFound) {
			err = fmt.Errorf("store: raft group %d: staged snapshot chunk %d missing: %w", r.group, r.next, ErrCorrupt)
		}
		if err != nil {
			return 0, err
		}
		r.buf = r.backing
		r.next++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
