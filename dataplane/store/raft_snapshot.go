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
// from a Pebble snapshot, a sink stages and verifies a received stream,
// and RestoreSnapshot (the FSM's Restore) replaces the ranges with it.
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
// top of raft_snapshot.go). Use it with raft's NoSnapshotRestoreOnStart
// (the state is already in place at start, only the snapshot's metadata
// is needed then), an FSM whose Restore calls RestoreSnapshot, and one
// SnapshotStore per group and Store.
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
	if id == r.receivedID() {
		return r.openReceived()
	}
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
//     without touching the group's ranges. A stream that fails is
//     discarded and the group is left as it was.
//
// A verified stream is installed by RestoreSnapshot, which the FSM's
// Restore calls: raft calls Restore on its FSM goroutine, after the
// entries it was applying, so nothing applies over the new state. (The
// sink's Close runs on raft's main goroutine while the FSM may still be
// applying older entries to the same ranges.)
func (r *raftSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != raft.SnapshotVersionMax {
		return nil, fmt.Errorf("store: raft group %d: unsupported snapshot version %d", r.group, version)
	}
	return &snapshotSink{
		r:  r,
		st: staged{meta: appliedState{index: index, term: term, confIndex: confIndex, conf: conf}},
	}, nil
}

// staged describes a received stream in the group's staging records.
type staged struct {
	meta   appliedState // what raft asked for, and the stream holds
	chunks uint64       // staging records, numbered from 0
	crc    uint32       // of the staged bytes
	size   int64        // of the stream, trailer included
}

// receivedID names a received snapshot, waiting for RestoreSnapshot.
func (r *raftSnapshots) receivedID() string { return r.id() + "-received" }

// snapshotSink receives one snapshot (see Create). Used by one goroutine.
type snapshotSink struct {
	r  *raftSnapshots
	st staged

	// buf holds what is not yet staged; the last crcLen bytes received
	// stay in it, as they may be the trailer.
	buf  []byte
	err  error // the first failure; the sink is done
	done bool
}

// ID is the received snapshot's id once bytes arrived, the group's own
// otherwise (raft asks after Close).
func (k *snapshotSink) ID() string {
	if k.st.size > 0 {
		return k.r.receivedID()
	}
	return k.r.id()
}

func (k *snapshotSink) Write(p []byte) (int, error) {
	if k.err != nil {
		return 0, k.err
	}
	if k.done {
		return 0, fmt.Errorf("store: raft group %d: write to a closed snapshot sink", k.r.group)
	}
	if k.st.size == 0 && len(p) > 0 {
		// Whatever an earlier receive left staged goes first.
		k.r.s.raft.takePending(k.r.group)
		if k.err = clearStaging(k.r.s, k.r.group); k.err != nil {
			return 0, k.err
		}
	}
	k.st.size += int64(len(p))
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
	k.st.crc = crc32.Update(k.st.crc, castagnoli, chunk)
	b := k.r.s.NewBatch()
	defer b.Close()
	b.key = raftStagingKey(b.key[:0], k.r.group, k.st.chunks)
	b.set(b.key, chunk)
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("store: raft group %d stage snapshot: %w", k.r.group, err)
	}
	k.st.chunks++
	return nil
}

// clearStaging removes whatever is staged for the group.
func clearStaging(s *Store, group uint16) error {
	b := s.NewBatch()
	defer b.Close()
	b.key = raftKey(b.key[:0], group, raftKindStaging)
	b.key2 = prefixEnd(raftKey(b.key2[:0], group, raftKindStaging))
	b.w.delRange(b.key, b.key2)
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("store: raft group %d clear staged snapshot: %w", group, err)
	}
	return nil
}

// Cancel discards what was received.
func (k *snapshotSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	if k.st.size == 0 {
		return nil
	}
	return clearStaging(k.r.s, k.r.group)
}

// Close finishes the snapshot (see Create). Raft may call it twice (from
// FSMSnapshot.Persist and after it); the second call does nothing.
func (k *snapshotSink) Close() error {
	if k.done {
		return k.err
	}
	k.done = true
	switch {
	case k.err != nil:
	case k.st.size == 0:
		k.err = k.writeFloor()
		return k.err
	default:
		k.err = k.verify()
	}
	if k.err != nil {
		_ = clearStaging(k.r.s, k.r.group)
		return k.err
	}
	k.r.s.raft.setPending(k.r.group, k.st)
	return nil
}

// writeFloor records a snapshot raft took of the state in place.
func (k *snapshotSink) writeFloor() error {
	b := k.r.s.NewBatch()
	defer b.Close()
	b.key = raftKey(b.key[:0], k.r.group, raftKindFloor)
	b.val = appendFloor(b.val[:0], &k.st.meta)
	b.setVal(b.key)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d record snapshot at %d: %w", k.r.group, k.st.meta.index, err)
	}
	return nil
}

// verify stages the rest of the stream and checks all of it.
func (k *snapshotSink) verify() error {
	if len(k.buf) < crcLen {
		return k.st.corrupt(k.r.group, "truncated: %d bytes", k.st.size)
	}
	body, trailer := k.buf[:len(k.buf)-crcLen], k.buf[len(k.buf)-crcLen:]
	if len(body) > 0 {
		if err := k.stage(body); err != nil {
			return err
		}
	}
	if binary.LittleEndian.Uint32(trailer) != k.st.crc {
		return k.st.corrupt(k.r.group, "stream checksum mismatch over %d bytes", k.st.size)
	}
	if err := k.r.s.life.acquire(); err != nil {
		return err
	}
	defer k.r.s.life.release()
	return k.st.replay(k.r.s, k.r.group, nil)
}

func (st *staged) corrupt(group uint16, format string, args ...any) error {
	return fmt.Errorf("store: raft group %d snapshot at %d: %s: %w", group, st.meta.index, fmt.Sprintf(format, args...), ErrCorrupt)
}

// setPending and takePending hand a verified received snapshot from the
// sink (raft's main goroutine) to RestoreSnapshot (its FSM goroutine).
func (g *raftGroups) setPending(group uint16, st staged) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[uint16]staged{}
	}
	g.pending[group] = st
}

func (g *raftGroups) takePending(group uint16) (staged, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.pending[group]
	delete(g.pending, group)
	return st, ok
}

func (g *raftGroups) peekPending(group uint16) (staged, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.pending[group]
	return st, ok
}

// RestoreSnapshot is the FSM's Restore for a group on this store: it closes
// rc and installs the snapshot the group's sink received and verified, if
// there is one; otherwise the state is already in place (a snapshot raft
// opened at start) and there is nothing to do. Call it from FSM.Restore
// only, which raft runs on its FSM goroutine with no apply in flight, and
// reload whatever the FSM keeps in memory for the group afterwards.
//
// Installing sets the repair marker (fsynced), replaces the group's ranges
// (range deletes, then the records in batches), and finally writes the
// applied record and configuration and clears the marker in one fsynced
// batch. A failure or a crash in between leaves the marker set, so
// NeedsRepair reports it, at once and at restart.
func (s *Store) RestoreSnapshot(group uint16, rc io.ReadCloser) error {
	if rc != nil {
		_ = rc.Close()
	}
	st, ok := s.raft.takePending(group)
	if !ok {
		return nil
	}
	if err := s.life.acquire(); err != nil {
		return err
	}
	defer s.life.release()
	if err := s.SetRepair(group); err != nil {
		return err
	}
	// From here a failure leaves the marker set: the ranges are no longer
	// what they were.
	w := &installer{s: s, b: s.NewBatch()}
	defer w.b.Close()
	for _, kr := range raftGroupRanges(group) {
		w.b.w.delRange(kr.start, kr.end)
	}
	if err := st.replay(s, group, w); err != nil {
		return err
	}
	b := w.b
	b.key = raftKey(b.key[:0], group, raftKindStaging)
	b.key2 = prefixEnd(raftKey(b.key2[:0], group, raftKindStaging))
	b.w.delRange(b.key, b.key2)
	b.key = raftKey(b.key[:0], group, raftKindFloor)
	b.w.del(b.key)
	b.PutApplied(group, st.meta.index, st.meta.term)
	b.key = raftKey(b.key[:0], group, raftKindConfig)
	b.val = appendConfig(b.val[:0], st.meta.confIndex, st.meta.conf)
	b.setVal(b.key)
	b.key = raftKey(b.key[:0], group, raftKindRepair)
	b.w.del(b.key)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: raft group %d install snapshot at %d: %w", group, st.meta.index, err)
	}
	return nil
}

// openReceived streams a received snapshot back as it arrived (raft opens
// it to hand to FSM.Restore).
func (r *raftSnapshots) openReceived() (*raft.SnapshotMeta, io.ReadCloser, error) {
	st, ok := r.s.raft.peekPending(r.group)
	if !ok {
		return nil, nil, fmt.Errorf("store: raft group %d: no received snapshot", r.group)
	}
	if err := r.s.life.acquire(); err != nil {
		return nil, nil, err
	}
	m := r.meta(&st.meta)
	m.ID, m.Size = r.receivedID(), st.size
	body := &stagedReader{s: r.s, group: r.group, n: st.chunks}
	trailer := bytes.NewReader(binary.LittleEndian.AppendUint32(nil, st.crc))
	return m, &releasingReader{Reader: io.MultiReader(body, trailer), s: r.s}, nil
}

// releasingReader ends a call in progress on Close.
type releasingReader struct {
	io.Reader
	s    *Store
	once sync.Once
}

func (rr *releasingReader) Close() error {
	rr.once.Do(rr.s.life.release)
	return nil
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
func (st *staged) replay(s *Store, group uint16, w *installer) error {
	br := bufio.NewReaderSize(&stagedReader{s: s, group: group, n: st.chunks}, 64<<10)
	bad := func(format string, args ...any) error {
		return st.corrupt(group, format, args...)
	}
	head := make([]byte, len(snapshotMagic)+3)
	if _, err := io.ReadFull(br, head); err != nil {
		return readErr(err, bad, "header")
	}
	if !bytes.Equal(head[:len(snapshotMagic)], snapshotMagic) || head[len(snapshotMagic)] != snapshotVersion {
		return bad("not a snapshot stream of version %d", snapshotVersion)
	}
	if g := binary.BigEndian.Uint16(head[len(snapshotMagic)+1:]); g != group {
		return bad("stream of group %d", g)
	}
	metaKey := raftKey(nil, group, raftKindApplied)
	meta, err := readField(br, maxSnapshotKey, bad, "metadata")
	if err != nil {
		return err
	}
	a, err := decodeFloor(metaKey, meta)
	if err != nil {
		return err
	}
	if a.index != st.meta.index || a.term != st.meta.term {
		return bad("stream holds {index %d, term %d}", a.index, a.term)
	}
	ranges := raftGroupRanges(group)
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
