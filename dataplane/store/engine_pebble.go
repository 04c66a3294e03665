package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Pebble-backed Store.
type Options struct {
	// Dir is the database directory (created if missing).
	Dir string
	// FS performs every file operation. Default: the OS (vfs.Default). Tests
	// pass vfs.NewMem, vfs.NewCrashableMem or an errorfs wrapper.
	FS vfs.FS
	// CacheSize is Pebble's block cache in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes. Default
	// DefaultMemTableSize.
	MemTableSize uint64
	// Logger receives Pebble's messages (info at Debug, errors at Error).
	// Default: discarded.
	Logger *slog.Logger
	// NoWALRecycling deletes each WAL file once its memtable is flushed.
	// By default Pebble keeps up to three old WALs, at whatever size they
	// grew to, for reuse: up to three memtables' worth of disk that holds
	// nothing, which a store held to a small budget (tiering) cannot
	// spare. New WALs grow by walFS's fill chunks instead.
	NoWALRecycling bool
	// Compress compresses table blocks with Snappy. Off by default, as
	// nats-server's file store keeps messages as sent: every compaction
	// re-encodes the blocks it rewrites, and on `js pub async` that was
	// a sixth of the server's CPU per message (5.5 µs with Snappy, 4.6
	// without), for payloads that are often compressed or encrypted
	// already. Tables written either way stay readable under the other.
	Compress bool
}

// DefaultMemTableSize is a store's memtable size unless its Options say
// otherwise: big enough to absorb bursts, small enough that the WAL
// replayed after a crash (the unflushed memtables) takes a fraction of a
// second, about 0.3 s per full memtable here.
const DefaultMemTableSize = 32 << 20

func (o *Options) ensureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize == 0 {
		o.CacheSize = 64 << 20
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// pebbleEngine is the engine over one Pebble DB.
//
// Pebble treats a failed WAL write or sync as fatal and calls its logger's
// Fatalf. Our logger records the failure and panics with fatalPanic; the
// store's commit path recovers that panic and turns it into an error for
// every waiting caller, and from then on every call fails with ErrFailed.
// A Fatalf on one of Pebble's own goroutines (a failed MANIFEST sync during
// a flush) is not recovered and ends the process, as Pebble's default
// logger would: no acknowledgement can follow it.
type pebbleEngine struct {
	db *pebble.DB
	// failed holds the first fatal error (wrapping ErrFailed), or nil.
	// Invariant: once set, it never changes.
	failed atomic.Pointer[error]
}

// fatalPanic is what pebbleLogger.Fatalf panics with.
type fatalPanic struct{ err error }

func (e *pebbleEngine) failure() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *pebbleEngine) poison(cause error) error {
	err := fmt.Errorf("store: %w: %w", ErrFailed, cause)
	e.failed.CompareAndSwap(nil, &err)
	return e.failure()
}

// guard runs fn unless the engine has failed, turning a fatalPanic raised
// inside Pebble into an error.
func (e *pebbleEngine) guard(fn func() error) error {
	if err := e.failure(); err != nil {
		return err
	}
	return e.recovering(fn)
}

// recovering runs fn, turning a fatalPanic raised inside Pebble into an
// error.
func (e *pebbleEngine) recovering(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fp, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = e.poison(fp.err)
		}
	}()
	return fn()
}

// pebbleLogger adapts slog to Pebble's Logger and implements the fatal
// path described on pebbleEngine.
type pebbleLogger struct {
	log *slog.Logger
	e   *pebbleEngine
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	l.log.Error(err.Error(), "component", "pebble", "fatal", true)
	l.e.poison(err)
	panic(fatalPanic{err})
}

// stallListener logs Pebble's write stalls, with their reason and how
// long they lasted. A stall holds every write of the node (every raft
// group's log, every apply) until flushes or compactions catch up; it is
// what an operator looking at missed raft leases or slow
// acknowledgements needs to see.
func stallListener(log *slog.Logger) *pebble.EventListener {
	var began atomic.Int64
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			began.Store(time.Now().UnixNano())
			log.Warn("store: writes stalled", "component", "pebble", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			if t := began.Swap(0); t != 0 {
				log.Warn("store: writes resumed", "component", "pebble", "stalled", time.Duration(time.Now().UnixNano()-t))
			}
		},
	}
}

// Open opens (creating if needed) the Pebble-backed store in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: Options.Dir is required")
	}
	opts.ensureDefaults()
	e := &pebbleEngine{}
	fs := opts.FS
	if vfs.Root(fs) == vfs.Default {
		// Only on the OS's filesystem: the fill is for its journal, and
		// the in-memory test filesystems grow a file a byte at a time.
		fs = walFS{fs}
	}
	po := &pebble.Options{
		FS:                 fs,
		CacheSize:          opts.CacheSize,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{log: opts.Logger, e: e},
		EventListener:      stallListener(opts.Logger),
	}
	compression := sstable.NoCompression
	if opts.Compress {
		compression = sstable.SnappyCompression
	}
	// Levels below L0 take L0's compression unless told otherwise.
	po.Levels[0].Compression = func() *sstable.CompressionProfile { return compression }
	if opts.NoWALRecycling {
		po.Cleaner = noRecycleCleaner{}
	}
	err := e.guard(func() (err error) {
		e.db, err = pebble.Open(opts.Dir, po)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: open pebble in %q: %w", opts.Dir, err)
	}
	s := newStore(e)
	if err := s.initFormat(); err != nil {
		return nil, errors.Join(err, e.close())
	}
	return s, nil
}

// noRecycleCleaner deletes obsolete files, as pebble.DeleteCleaner, and
// turns off WAL recycling: Pebble recycles no WAL for a cleaner that
// says it needs the files' contents (pebble.ArchiveCleaner says so
// through an unexported method), and that is the only switch it offers.
// The embedded ArchiveCleaner is one level deeper than DeleteCleaner,
// so its marker method is promoted while DeleteCleaner's Clean and
// String win: files are deleted, never archived.
type noRecycleCleaner struct {
	pebble.DeleteCleaner
	archiveMarker
}

// archiveMarker carries pebble.ArchiveCleaner's marker method.
type archiveMarker struct{ pebble.ArchiveCleaner }

// Reads run under guard as writes do: Pebble reports corruption it meets
// on a read (a block failing its checksum) through Fatalf, whose panic
// must become the read's error and poison the engine, not kill whatever
// goroutine was reading.
func (e *pebbleEngine) get(key []byte, fn func(v []byte) error) error {
	return e.guard(func() error { return e.getUnguarded(key, fn) })
}

func (e *pebbleEngine) getUnguarded(key []byte, fn func(v []byte) error) error {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return errKeyNotFound
	}
	if err != nil {
		return fmt.Errorf("store: pebble get %s: %w", describeKey(key), err)
	}
	defer closer.Close()
	return fn(v)
}

func (e *pebbleEngine) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return e.guard(func() error {
		it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return fmt.Errorf("store: pebble iterator: %w", err)
		}
		return iterate(it, reverse, fn)
	})
}

// iterate runs a scan over it and closes it.
func iterate(it *pebble.Iterator, reverse bool, fn func(k, v []byte) (bool, error)) error {
	ok := it.First()
	if reverse {
		ok = it.Last()
	}
	for ; ok; ok = step(it, reverse) {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("store: pebble value %s: %w", describeKey(it.Key()), err), it.Close())
		}
		more, err := fn(it.Key(), v)
		if err != nil || !more {
			if cerr := it.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("store: pebble scan: %w", cerr)
			}
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("store: pebble scan: %w", err)
	}
	return nil
}

func (e *pebbleEngine) newCursor() (cursor, error) {
	if err := e.failure(); err != nil {
		return nil, err
	}
	it, err := e.db.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("store: pebble iterator: %w", err)
	}
	return &pebbleCursor{e: e, it: it}, nil
}

// pebbleCursor answers gets and scans, forward and reverse, by seeking one
// iterator, so the blocks it has loaded serve the next read. Each read
// first bounds the iterator to its own range: unbounded, a seek into an
// empty range walks every deleted key after it (the raft log's truncated
// entries, a deleted stream's records) to the next live one, and a
// recovery seeking the empty ranges of thousands of streams spent
// minutes there.
type pebbleCursor struct {
	e  *pebbleEngine
	it *pebble.Iterator
}

// bound limits the iterator to [lower, upper) (upper nil: no end). The
// bounds are fresh copies: pebble keeps the slices it is given, and
// compares them with the next ones, so they are never written again.
func (c *pebbleCursor) bound(lower, upper []byte) {
	c.it.SetBounds(bytes.Clone(lower), bytes.Clone(upper))
}

func (c *pebbleCursor) get(key []byte, fn func(v []byte) error) error {
	return c.e.guard(func() error { return c.getUnguarded(key, fn) })
}

func (c *pebbleCursor) getUnguarded(key []byte, fn func(v []byte) error) error {
	// The bounds [key, key+"\x00") in one fresh allocation (see bound).
	b := make([]byte, 2*len(key)+1)
	copy(b, key)
	copy(b[len(key):], key)
	c.it.SetBounds(b[:len(key):len(key)], b[len(key):])
	if !c.it.SeekGE(key) || !bytes.Equal(c.it.Key(), key) {
		if err := c.it.Error(); err != nil {
			return fmt.Errorf("store: pebble get %s: %w", describeKey(key), err)
		}
		return errKeyNotFound
	}
	v, err := c.it.ValueAndErr()
	if err != nil {
		return fmt.Errorf("store: pebble get %s: %w", describeKey(key), err)
	}
	return fn(v)
}

func (c *pebbleCursor) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return c.e.guard(func() error { return c.scanUnguarded(lower, upper, reverse, fn) })
}

func (c *pebbleCursor) scanUnguarded(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	c.bound(lower, upper)
	var ok bool
	switch {
	case !reverse:
		ok = c.it.SeekGE(lower)
	case upper == nil:
		ok = c.it.Last()
	default:
		ok = c.it.SeekLT(upper)
	}
	for ; ok; ok = step(c.it, reverse) { // the bounds keep every key in range
		v, err := c.it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("store: pebble value %s: %w", describeKey(c.it.Key()), err)
		}
		if more, err := fn(c.it.Key(), v); err != nil || !more {
			return err
		}
	}
	if err := c.it.Error(); err != nil {
		return fmt.Errorf("store: pebble scan: %w", err)
	}
	return nil
}

func (c *pebbleCursor) close() error { return c.it.Close() }

func step(it *pebble.Iterator, reverse bool) bool {
	if reverse {
		return it.Prev()
	}
	return it.Next()
}

func (e *pebbleEngine) snapshot() (cursor, error) {
	if err := e.failure(); err != nil {
		return nil, err
	}
	return pebbleSnapshot{e: e, s: e.db.NewSnapshot()}, nil
}

// pebbleSnapshot reads a Pebble snapshot, one bounded iterator per scan.
type pebbleSnapshot struct {
	e *pebbleEngine
	s *pebble.Snapshot
}

func (p pebbleSnapshot) get(key []byte, fn func(v []byte) error) error {
	return p.e.guard(func() error {
		v, closer, err := p.s.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return errKeyNotFound
		}
		if err != nil {
			return fmt.Errorf("store: pebble snapshot get %s: %w", describeKey(key), err)
		}
		defer closer.Close()
		return fn(v)
	})
}

func (p pebbleSnapshot) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return p.e.guard(func() error {
		it, err := p.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return fmt.Errorf("store: pebble snapshot iterator: %w", err)
		}
		return iterate(it, reverse, fn)
	})
}

func (p pebbleSnapshot) close() error { return p.s.Close() }

func (e *pebbleEngine) diskUsage() uint64 { return e.db.Metrics().DiskSpaceUsage() }

func (e *pebbleEngine) compact(start, end []byte) error {
	return e.guard(func() error { return e.db.Compact(context.Background(), start, end, false) })
}

func (e *pebbleEngine) newBatch() engineBatch { return &pebbleBatch{e: e, b: e.db.NewBatch()} }

func (e *pebbleEngine) sync() error {
	return e.guard(func() error { return e.db.LogData(nil, pebble.Sync) })
}

func (e *pebbleEngine) close() error {
	if e.failure() != nil {
		// Nothing more may be written, not even a flush; closing releases
		// the files and the directory lock so the store can be reopened.
		// Pebble reports the original failure again, which the caller has.
		_ = e.recovering(e.db.Close)
		return nil
	}
	// Flushing the memtables on a clean shutdown means the next Open has
	// no WAL to replay, which is most of Open's time otherwise.
	return e.guard(func() error { return errors.Join(e.db.Flush(), e.db.Close()) })
}

// pebbleBatch is an engineBatch over a *pebble.Batch. It starts as a
// plain (write-only) batch, the cheap kind; reader turns it into an
// indexed one, which Pebble can read through, and commit or reset turns
// it back.
//
// Index records wait in runs, one per kind, and join the batch after its
// other writes (settle). Why: Pebble inserts a batch into its memtable in
// the batch's order, and an insert just after the previous one costs a
// step where any other costs a search from the top of the skiplist. A
// message's apply writes its record and its index entries alternately,
// so every insert was a search; in runs, a group's records ascend, then
// each kind of index entry does, and most inserts are steps (the
// memtable's share of a publish's CPU fell from 15 % to 3 %).
//
// Invariant: moving a run's writes later changes nothing a reader or the
// committed state can tell, because nothing that could see the
// difference happens while a run holds writes: a run holds Sets only, of
// keys only it is given (runOf partitions keys by kind), in their order;
// and every delete, range delete, read, encoding or commit settles the
// runs first.
type pebbleBatch struct {
	e    *pebbleEngine
	b    *pebble.Batch
	runs [numRuns]*pebble.Batch // nil until a write of the kind
	// held reports that some run holds writes.
	held bool
}

// numRuns is how many kinds of record runOf sets apart.
const numRuns = 4

// runOf is the run a key's Set waits in, or -1 to write it at once: the
// per-message index records under 0x20 stream(8) kind.
func runOf(k []byte) int {
	if len(k) < 10 || k[0] != prefixData {
		return -1
	}
	switch k[9] {
	case kindSubject:
		return 0
	case kindTTL:
		return 1
	case kindDedupID:
		return 2
	case kindDedupTime:
		return 3
	}
	return -1
}

func (p *pebbleBatch) set(k, v []byte) {
	r := runOf(k)
	if r < 0 {
		_ = p.b.Set(k, v, nil)
		return
	}
	if p.runs[r] == nil {
		p.runs[r] = p.e.db.NewBatch()
	}
	_ = p.runs[r].Set(k, v, nil)
	p.held = true
}

func (p *pebbleBatch) del(k []byte) {
	p.settle()
	_ = p.b.Delete(k, nil)
}

func (p *pebbleBatch) delRange(start, end []byte) {
	p.settle()
	_ = p.b.DeleteRange(start, end, nil)
}

// settle appends the runs' writes to the batch, in run order.
func (p *pebbleBatch) settle() {
	if !p.held {
		return
	}
	for _, r := range p.runs {
		if r != nil && !r.Empty() {
			_ = p.b.Apply(r, nil)
			r.Reset()
		}
	}
	p.held = false
}

// size counts the runs' writes as settled; each run's repr has its own
// batch header, which settling does not copy.
func (p *pebbleBatch) size() int {
	n := p.b.Len()
	for _, r := range p.runs {
		if r != nil && !r.Empty() {
			n += r.Len() - batchrepr.HeaderLen
		}
	}
	return n
}

func (p *pebbleBatch) count() int {
	n := p.b.Count()
	for _, r := range p.runs {
		if r != nil {
			n += r.Count()
		}
	}
	return int(n)
}

func (p *pebbleBatch) release() {
	_ = p.b.Close()
	for i, r := range p.runs {
		if r != nil {
			_ = r.Close()
			p.runs[i] = nil
		}
	}
	p.held = false
}

func (p *pebbleBatch) encoded() []byte {
	p.settle()
	return p.b.Repr()
}

func (p *pebbleBatch) appendEncoded(r []byte) error {
	// in only reads r, and Apply copies it into p.b: one copy per entry,
	// not a clone and then a copy. A batch keeps its buffer for reuse
	// when it goes back to Pebble's pool, so before Close in is handed an
	// empty buffer of its own; otherwise a later batch would write into
	// r, which raft's log cache still holds.
	in := p.e.db.NewBatch()
	defer func() {
		_ = in.SetRepr(make([]byte, batchrepr.HeaderLen))
		_ = in.Close()
	}()
	if err := in.SetRepr(r); err != nil {
		return fmt.Errorf("store: batch repr: %w: %w", ErrCorrupt, err)
	}
	// Every record must decode and the header's count must match: Pebble
	// would otherwise fail the commit fatally, which stops the store.
	n := uint32(0)
	for rd := in.Reader(); ; n++ {
		_, _, _, ok, err := rd.Next()
		if err != nil {
			return fmt.Errorf("store: batch repr: %w: %w", ErrCorrupt, err)
		}
		if !ok {
			break
		}
	}
	if n != in.Count() {
		return fmt.Errorf("store: batch repr: %w: %d records, header says %d", ErrCorrupt, n, in.Count())
	}
	p.settle()
	if err := p.b.Apply(in, nil); err != nil {
		return fmt.Errorf("store: batch repr: %w: %w", ErrCorrupt, err)
	}
	return nil
}

func (p *pebbleBatch) reset() {
	p.dropRuns()
	if p.b.Indexed() {
		// Indexing costs every later write; a batch that needed reads
		// once does not keep paying for it.
		_ = p.b.Close()
		p.b = p.e.db.NewBatch()
		return
	}
	p.b.Reset()
}

// dropRuns empties the runs without settling them.
func (p *pebbleBatch) dropRuns() {
	if !p.held {
		return
	}
	for _, r := range p.runs {
		if r != nil {
			r.Reset()
		}
	}
	p.held = false
}

func (p *pebbleBatch) reader() engine {
	p.settle()
	if !p.b.Indexed() {
		ib := p.e.db.NewIndexedBatch()
		_ = ib.Apply(p.b, nil)
		_ = p.b.Close()
		p.b = ib
	}
	return pebbleView{p}
}

// pebbleView reads the DB through an indexed batch: the committed data
// with the batch's writes on top.
type pebbleView struct{ p *pebbleBatch }

func (v pebbleView) get(key []byte, fn func(v []byte) error) error {
	if err := v.p.e.failure(); err != nil {
		return err
	}
	v.p.settle() // writes made since reader
	val, closer, err := v.p.b.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return errKeyNotFound
	}
	if err != nil {
		return fmt.Errorf("store: pebble get %s through batch: %w", describeKey(key), err)
	}
	defer closer.Close()
	return fn(val)
}

func (v pebbleView) scan(lower, upper []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	if err := v.p.e.failure(); err != nil {
		return err
	}
	v.p.settle()
	it, err := v.p.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("store: pebble iterator through batch: %w", err)
	}
	return iterate(it, reverse, fn)
}

func (pebbleView) newBatch() engineBatch { panic("store: a batch's reader is read-only") }
func (pebbleView) sync() error           { panic("store: a batch's reader is read-only") }
func (pebbleView) close() error          { return nil }

func (pebbleView) snapshot() (cursor, error) { panic("store: a batch's reader has no snapshots") }

func (v pebbleView) newCursor() (cursor, error) { return seekCursor{v}, nil }

func (p *pebbleBatch) commit(sync bool) error {
	p.settle()
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	err := p.e.guard(func() error { return p.b.Commit(wo) })
	if err != nil {
		// Pebble forbids reusing a batch whose commit failed.
		p.b = p.e.db.NewBatch()
		return err
	}
	return nil
}

// eachSet implements reprSetter: the repr is read in place, not copied.
func (e *pebbleEngine) eachSet(r []byte, fn func(k, v []byte) error) error {
	rd := batchrepr.Read(r)
	for {
		kind, k, v, ok, err := rd.Next()
		if err != nil {
			return fmt.Errorf("store: batch repr: %w: %w", ErrCorrupt, err)
		}
		if !ok {
			return nil
		}
		if kind == pebble.InternalKeyKindSet {
			if err := fn(k, v); err != nil {
				return err
			}
		}
	}
}
