package tier

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
	"strings"
)

// Segment object layout (all integers big-endian unless varint):
//
//	header   magic "CTSEG\x00\x00\x01"(8) len(4) payload crc32c(payload)(4)
//	         payload: stream(8) incarnation(8) name(uvarint+bytes)
//	                  first(8) last(8) count(8) bytes(8) min_time(8) max_time(8)
//	blocks   records back to back, a block closed once it passes the
//	         target block size; a record is
//	         seq(8) time(8) ttl(varint) subject hdr data (each uvarint+bytes)
//	index    count(uvarint), then per message in sequence order:
//	         seq(8) block(uvarint) offset(uvarint) length(uvarint)
//	         time(varint) subject(uvarint+bytes)
//	footer   blocks(uvarint), per block offset(uvarint) length(uvarint)
//	         crc32c(4); index offset(8) index length(8) index crc32c(4)
//	trailer  footer length(4) crc32c(footer)(4) magic(8)
//
// The object describes itself: the trailer finds the footer, the footer
// the index and every block with its checksum, the index every message.
// A reader that knows where the index starts (the manifest says) fetches
// index, footer and trailer with one ranged GET and each block with one
// more, and verifies every byte it uses.

var segMagic = [8]byte{'C', 'T', 'S', 'E', 'G', 0, 0, 1}

const trailerLen = 4 + 4 + 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Record is one message in a segment.
type Record struct {
	Seq     uint64
	Time    int64
	TTL     int64
	Subject string
	Header  []byte
	Data    []byte
}

// SegmentHeader identifies a segment: which stream (and which
// incarnation of its name, so a re-created stream never collides), the
// sequence range it covers and what it holds.
type SegmentHeader struct {
	Stream      uint64
	Incarnation int64
	Name        string
	First, Last uint64
	Count       uint64
	Bytes       uint64
	MinTime     int64
	MaxTime     int64
}

// Built is a sealed segment: the object's bytes and where its index
// starts, which the manifest records.
type Built struct {
	Object   []byte
	IndexOff int64
}

// Build seals recs (ascending sequences within [h.First, h.Last]) into a
// segment object with blocks of about blockSize bytes. h.Count,
// h.MinTime and h.MaxTime are filled from recs; h.Bytes is the caller's
// accounting and kept as given.
func Build(h SegmentHeader, recs []Record, blockSize int) (Built, error) {
	var b Builder
	b.Reset(h, blockSize, len(recs)*64+int(h.Bytes))
	for i := range recs {
		r := &recs[i]
		b.Add(r.Seq, r.Time, r.TTL, r.Subject, r.Header, r.Data)
	}
	return b.Finish(h.Last, h.Bytes)
}

// Builder seals a segment one record at a time, so a caller streaming
// messages out of the store copies each body once, straight into the
// object. Reset reuses the buffers of the segment before: a mover that
// seals segment after segment allocates nothing per segment once warm.
// The zero Builder is ready for Reset.
type Builder struct {
	h          SegmentHeader
	blockSize  int
	out, index []byte
	blocks     []blockRef
	// payloadAt is where the header's payload starts in out; start where
	// the open block starts.
	payloadAt, start int
	count, prev      uint64
	minT, maxT       int64
	err              error
}

type blockRef struct {
	off, n int
	crc    uint32
}

// headerFixed is the header payload's size besides the name.
const headerFixed = 8 + 8 + 6*8

// Reset starts a segment of h's stream from h.First (Finish sets the
// rest of the header), with blocks of about blockSize bytes; sizeHint is
// the object size expected, to allocate once.
func (b *Builder) Reset(h SegmentHeader, blockSize, sizeHint int) {
	b.h, b.blockSize = h, blockSize
	b.out = append(b.out[:0], segMagic[:]...)
	if need := 256 + sizeHint; cap(b.out) < need {
		b.out = append(make([]byte, 0, need), segMagic[:]...)
	}
	// The header's length is known now, its counts only at Finish: room
	// is left for it and filled in then.
	var nameLen [binary.MaxVarintLen64]byte
	plen := headerFixed + binary.PutUvarint(nameLen[:], uint64(len(h.Name))) + len(h.Name)
	b.out = binary.BigEndian.AppendUint32(b.out, uint32(plen))
	b.payloadAt = len(b.out)
	b.out = append(b.out, make([]byte, plen+4)...)
	b.index = append(b.index[:0], 0) // the count goes first: written at Finish
	b.blocks = b.blocks[:0]
	b.start = len(b.out)
	b.count, b.prev, b.minT, b.maxT, b.err = 0, 0, 0, 0, nil
}

// Add appends one message; sequences must ascend from h.First. The
// bytes are copied.
func (b *Builder) Add(seq uint64, t, ttl int64, subject string, hdr, data []byte) {
	if b.err != nil {
		return
	}
	if seq < b.h.First || (b.count > 0 && seq <= b.prev) {
		b.err = fmt.Errorf("tier: record %d out of order or below %d", seq, b.h.First)
		return
	}
	if b.count == 0 {
		b.minT, b.maxT = t, t
	}
	b.count, b.prev = b.count+1, seq
	b.minT, b.maxT = min(b.minT, t), max(b.maxT, t)
	if len(b.out)-b.start >= b.blockSize {
		b.blocks = append(b.blocks, blockRef{b.start, len(b.out) - b.start, crc(b.out[b.start:])})
		b.start = len(b.out)
	}
	recOff := len(b.out) - b.start
	out := binary.BigEndian.AppendUint64(b.out, seq)
	out = binary.BigEndian.AppendUint64(out, uint64(t))
	out = binary.AppendVarint(out, ttl)
	out = appendField(out, subject)
	out = appendField(out, hdr)
	out = appendField(out, data)
	b.out = out
	index := binary.BigEndian.AppendUint64(b.index, seq)
	index = binary.AppendUvarint(index, uint64(len(b.blocks)))
	index = binary.AppendUvarint(index, uint64(recOff))
	index = binary.AppendUvarint(index, uint64(len(b.out)-b.start-recOff))
	index = binary.AppendVarint(index, t)
	b.index = appendField(index, subject)
}

// Trim lets the buffers go if they hold more than max bytes, so a
// builder kept between segments does not pin a large one.
func (b *Builder) Trim(max int) {
	if cap(b.out)+cap(b.index) > max {
		*b = Builder{}
	}
}

// Finish seals the segment as covering [h.First, last] (every message
// added is in it) and holding bytes by the caller's accounting. The
// object aliases the builder's buffer: it is valid until the next Reset.
func (b *Builder) Finish(last, bytes uint64) (Built, error) {
	if b.err != nil {
		return Built{}, b.err
	}
	if b.count == 0 {
		return Built{}, fmt.Errorf("tier: empty segment")
	}
	if b.prev > last {
		return Built{}, fmt.Errorf("tier: record %d out of range [%d, %d]", b.prev, b.h.First, last)
	}
	h := b.h
	h.Last, h.Count, h.Bytes, h.MinTime, h.MaxTime = last, b.count, bytes, b.minT, b.maxT
	hp := binary.BigEndian.AppendUint64(b.out[b.payloadAt:b.payloadAt], h.Stream)
	hp = binary.BigEndian.AppendUint64(hp, uint64(h.Incarnation))
	hp = appendField(hp, h.Name)
	for _, v := range [...]uint64{h.First, h.Last, h.Count, h.Bytes, uint64(h.MinTime), uint64(h.MaxTime)} {
		hp = binary.BigEndian.AppendUint64(hp, v)
	}
	binary.BigEndian.PutUint32(b.out[b.payloadAt+len(hp):], crc(hp))

	b.blocks = append(b.blocks, blockRef{b.start, len(b.out) - b.start, crc(b.out[b.start:])})
	// The index starts with its count, a uvarint: the one byte reserved
	// at Reset is replaced by as many as the count takes.
	indexOff := len(b.out)
	out := binary.AppendUvarint(b.out, b.count)
	out = append(out, b.index[1:]...)
	index := out[indexOff:]
	footerAt := len(out)
	out = binary.AppendUvarint(out, uint64(len(b.blocks)))
	for _, bl := range b.blocks {
		out = binary.AppendUvarint(out, uint64(bl.off))
		out = binary.AppendUvarint(out, uint64(bl.n))
		out = binary.BigEndian.AppendUint32(out, bl.crc)
	}
	out = binary.BigEndian.AppendUint64(out, uint64(indexOff))
	out = binary.BigEndian.AppendUint64(out, uint64(len(index)))
	out = binary.BigEndian.AppendUint32(out, crc(index))
	footer := out[footerAt:]
	out = binary.BigEndian.AppendUint32(out, uint32(len(footer)))
	out = binary.BigEndian.AppendUint32(out, crc(footer))
	out = append(out, segMagic[:]...)
	b.out = out
	return Built{Object: out, IndexOff: int64(indexOff)}, nil
}

// appendField appends f with its length before it, as every variable
// field of a segment is written.
func appendField[T string | []byte](b []byte, f T) []byte {
	return append(binary.AppendUvarint(b, uint64(len(f))), f...)
}

// Block is where one record block lies in its object.
type Block struct {
	Off, Len int64
	CRC      uint32
}

// Index is a segment's parsed index and block table.
type Index struct {
	Blocks []Block
	seqs   []uint64
	loc    []recLoc
}

type recLoc struct {
	block    uint32
	off, len uint32
	time     int64
	subject  string
}

// Entry is one message's place in a segment.
type Entry struct {
	Seq      uint64
	Block    int
	Off, Len int
	Time     int64
	Subject  string
}

// Len is the number of messages the segment holds.
func (x *Index) Len() int { return len(x.seqs) }

// Find returns seq's entry, or ok false if the segment does not hold it.
func (x *Index) Find(seq uint64) (Entry, bool) {
	i := sort.Search(len(x.seqs), func(i int) bool { return x.seqs[i] >= seq })
	if i == len(x.seqs) || x.seqs[i] != seq {
		return Entry{}, false
	}
	return x.entry(i), true
}

// At returns the i-th entry in sequence order.
func (x *Index) At(i int) Entry { return x.entry(i) }

func (x *Index) entry(i int) Entry {
	l := x.loc[i]
	return Entry{Seq: x.seqs[i], Block: int(l.block), Off: int(l.off), Len: int(l.len), Time: l.time, Subject: l.subject}
}

// size is what the parsed index costs in the cache.
func (x *Index) size() int64 {
	n := int64(len(x.Blocks))*24 + int64(len(x.seqs))*48
	for _, l := range x.loc {
		n += int64(len(l.subject))
	}
	return n
}

// ParseTail reads a segment's index from tail, the object's bytes from
// the index offset to its end, verifying the trailer, the footer and the
// index checksums. objSize is the whole object's size, which bounds
// every block the footer names.
func ParseTail(tail []byte, indexOff, objSize int64) (*Index, error) {
	if len(tail) < trailerLen || [8]byte(tail[len(tail)-8:]) != segMagic {
		return nil, fmt.Errorf("%w: no segment trailer", ErrCorrupt)
	}
	t := tail[len(tail)-trailerLen:]
	flen := int(binary.BigEndian.Uint32(t))
	if flen > len(tail)-trailerLen {
		return nil, fmt.Errorf("%w: footer length %d", ErrCorrupt, flen)
	}
	footer := tail[len(tail)-trailerLen-flen : len(tail)-trailerLen]
	if crc(footer) != binary.BigEndian.Uint32(t[4:]) {
		return nil, fmt.Errorf("%w: footer checksum", ErrCorrupt)
	}
	d := decoder{p: footer}
	nb := d.uvarint()
	if nb == 0 || nb > uint64(len(footer)) {
		return nil, fmt.Errorf("%w: %d blocks", ErrCorrupt, nb)
	}
	x := &Index{Blocks: make([]Block, nb)}
	for i := range x.Blocks {
		off, n := int64(d.uvarint()), int64(d.uvarint())
		x.Blocks[i] = Block{Off: off, Len: n, CRC: d.u32()}
		if off < 0 || n < 0 || off+n > indexOff {
			return nil, fmt.Errorf("%w: block %d out of bounds", ErrCorrupt, i)
		}
	}
	ioff, ilen, icrc := int64(d.u64()), int64(d.u64()), d.u32()
	if d.err != nil || len(d.p) != 0 || ioff != indexOff || ilen > int64(len(tail)) || ioff+ilen > objSize {
		return nil, fmt.Errorf("%w: bad footer", ErrCorrupt)
	}
	index := tail[:ilen]
	if crc(index) != icrc {
		return nil, fmt.Errorf("%w: index checksum", ErrCorrupt)
	}
	d = decoder{p: index}
	n := d.uvarint()
	if n > uint64(len(index)) {
		return nil, fmt.Errorf("%w: index count", ErrCorrupt)
	}
	x.seqs, x.loc = make([]uint64, n), make([]recLoc, n)
	for i := range x.seqs {
		x.seqs[i] = d.u64()
		x.loc[i] = recLoc{block: uint32(d.uvarint()), off: uint32(d.uvarint()), len: uint32(d.uvarint()), time: d.varint(), subject: string(d.field())}
		if d.err != nil || int(x.loc[i].block) >= len(x.Blocks) || int64(x.loc[i].off)+int64(x.loc[i].len) > x.Blocks[x.loc[i].block].Len ||
			(i > 0 && x.seqs[i] <= x.seqs[i-1]) {
			return nil, fmt.Errorf("%w: index entry %d", ErrCorrupt, i)
		}
	}
	if d.err != nil || len(d.p) != 0 {
		return nil, fmt.Errorf("%w: index trailing bytes", ErrCorrupt)
	}
	return x, nil
}

// VerifyBlock checks a fetched block against the footer's checksum.
func (x *Index) VerifyBlock(i int, b []byte) error {
	if i < 0 || i >= len(x.Blocks) || int64(len(b)) != x.Blocks[i].Len || crc(b) != x.Blocks[i].CRC {
		return fmt.Errorf("%w: block %d checksum", ErrCorrupt, i)
	}
	return nil
}

// DecodeRecord reads e's record out of its verified block. Header and
// Data alias the block, which the cache never modifies: callers must not
// modify them either.
func DecodeRecord(block []byte, e Entry) (Record, error) {
	if e.Off < 0 || e.Off+e.Len > len(block) {
		return Record{}, fmt.Errorf("%w: record %d outside its block", ErrCorrupt, e.Seq)
	}
	d := decoder{p: block[e.Off : e.Off+e.Len]}
	r := Record{Seq: d.u64(), Time: int64(d.u64()), TTL: d.varint()}
	r.Subject = string(d.field())
	r.Header = nonEmpty(d.field())
	r.Data = nonEmpty(d.field())
	if d.err != nil || len(d.p) != 0 || r.Seq != e.Seq || r.Subject != e.Subject {
		return Record{}, fmt.Errorf("%w: record %d", ErrCorrupt, e.Seq)
	}
	return r, nil
}

// ParseHeader reads and verifies a segment's header from the object's
// first bytes.
func ParseHeader(b []byte) (SegmentHeader, error) {
	var h SegmentHeader
	if len(b) < 12 || [8]byte(b[:8]) != segMagic {
		return h, fmt.Errorf("%w: no segment header", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint32(b[8:]))
	if len(b) < 12+n+4 {
		return h, fmt.Errorf("%w: short header", ErrCorrupt)
	}
	p := b[12 : 12+n]
	if crc(p) != binary.BigEndian.Uint32(b[12+n:]) {
		return h, fmt.Errorf("%w: header checksum", ErrCorrupt)
	}
	d := decoder{p: p}
	h.Stream, h.Incarnation, h.Name = d.u64(), int64(d.u64()), string(d.field())
	h.First, h.Last, h.Count, h.Bytes = d.u64(), d.u64(), d.u64(), d.u64()
	h.MinTime, h.MaxTime = int64(d.u64()), int64(d.u64())
	if d.err != nil || len(d.p) != 0 {
		return h, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	return h, nil
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = ErrCorrupt
	}
	d.p = nil
}

func (d *decoder) u64() uint64 {
	if len(d.p) < 8 {
		d.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(d.p)
	d.p = d.p[8:]
	return v
}

func (d *decoder) u32() uint32 {
	if len(d.p) < 4 {
		d.fail()
		return 0
	}
	v := binary.BigEndian.Uint32(d.p)
	d.p = d.p[4:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) field() []byte {
	n := d.uvarint()
	if n > uint64(len(d.p)) {
		d.fail()
		return nil
	}
	f := d.p[:n]
	d.p = d.p[n:]
	return f
}

// SegmentKey names one upload attempt of a segment: a hash first, which
// spreads objects across the store's partitions (S3 scales request rates
// per prefix), then the node, the stream with its incarnation, the range
// and the attempt's unique id, so a retried or abandoned upload never
// overwrites another and every object is traceable to its stream.
func SegmentKey(node string, stream uint64, incarnation int64, first, last uint64, uploadID string) string {
	rest := fmt.Sprintf("%s/%d-%d/%020d-%020d-%s.seg", node, stream, incarnation, first, last, uploadID)
	return fmt.Sprintf("%08x/%s", crc(append([]byte(rest), uploadID...)), rest)
}

// ParseSegmentKey reads back what SegmentKey put in a key: the node that
// uploaded it and the stream (with its incarnation) it belongs to. ok is
// false for a key SegmentKey did not make.
func ParseSegmentKey(key string) (node string, stream uint64, incarnation int64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || len(parts[0]) != 8 || !strings.HasSuffix(parts[3], ".seg") {
		return "", 0, 0, false
	}
	if crc([]byte(strings.Join(parts[1:], "/")+uploadIDOf(parts[3]))) != parseHex32(parts[0]) {
		return "", 0, 0, false
	}
	id, inc, found := strings.Cut(parts[2], "-")
	if !found {
		return "", 0, 0, false
	}
	stream, err1 := strconv.ParseUint(id, 10, 64)
	incarnation, err2 := strconv.ParseInt(inc, 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return parts[1], stream, incarnation, true
}

// uploadIDOf is the attempt id at the end of a segment object's name
// (first-last-id.seg).
func uploadIDOf(name string) string {
	name = strings.TrimSuffix(name, ".seg")
	return name[strings.LastIndexByte(name, '-')+1:]
}

func parseHex32(s string) uint32 {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return 0
	}
	return uint32(v)
}
