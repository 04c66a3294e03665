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
	if len(recs) == 0 {
		return Built{}, fmt.Errorf("tier: empty segment")
	}
	h.Count = uint64(len(recs))
	h.MinTime, h.MaxTime = recs[0].Time, recs[0].Time
	for _, r := range recs {
		h.MinTime, h.MaxTime = min(h.MinTime, r.Time), max(h.MaxTime, r.Time)
	}
	out := make([]byte, 0, 256+len(recs)*64+int(h.Bytes))
	out = append(out, segMagic[:]...)
	hp := binary.BigEndian.AppendUint64(nil, h.Stream)
	hp = binary.BigEndian.AppendUint64(hp, uint64(h.Incarnation))
	hp = appendField(hp, []byte(h.Name))
	for _, v := range [...]uint64{h.First, h.Last, h.Count, h.Bytes, uint64(h.MinTime), uint64(h.MaxTime)} {
		hp = binary.BigEndian.AppendUint64(hp, v)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(hp)))
	out = append(out, hp...)
	out = binary.BigEndian.AppendUint32(out, crc(hp))

	type blockRef struct {
		off, n int
		crc    uint32
	}
	var blocks []blockRef
	index := binary.AppendUvarint(nil, uint64(len(recs)))
	start := len(out)
	var prev uint64
	for i, r := range recs {
		if r.Seq < h.First || r.Seq > h.Last || (i > 0 && r.Seq <= prev) {
			return Built{}, fmt.Errorf("tier: record %d out of order or range [%d, %d]", r.Seq, h.First, h.Last)
		}
		prev = r.Seq
		if len(out)-start >= blockSize {
			blocks = append(blocks, blockRef{start, len(out) - start, crc(out[start:])})
			start = len(out)
		}
		recOff := len(out) - start
		out = binary.BigEndian.AppendUint64(out, r.Seq)
		out = binary.BigEndian.AppendUint64(out, uint64(r.Time))
		out = binary.AppendVarint(out, r.TTL)
		out = appendField(out, []byte(r.Subject))
		out = appendField(out, r.Header)
		out = appendField(out, r.Data)
		index = binary.BigEndian.AppendUint64(index, r.Seq)
		index = binary.AppendUvarint(index, uint64(len(blocks)))
		index = binary.AppendUvarint(index, uint64(recOff))
		index = binary.AppendUvarint(index, uint64(len(out)-start-recOff))
		index = binary.AppendVarint(index, r.Time)
		index = appendField(index, []byte(r.Subject))
	}
	blocks = append(blocks, blockRef{start, len(out) - start, crc(out[start:])})
	indexOff := len(out)
	out = append(out, index...)
	footer := binary.AppendUvarint(nil, uint64(len(blocks)))
	for _, b := range blocks {
		footer = binary.AppendUvarint(footer, uint64(b.off))
		footer = binary.AppendUvarint(footer, uint64(b.n))
		footer = binary.BigEndian.AppendUint32(footer, b.crc)
	}
	footer = binary.BigEndian.AppendUint64(footer, uint64(indexOff))
	footer = binary.BigEndian.AppendUint64(footer, uint64(len(index)))
	footer = binary.BigEndian.AppendUint32(footer, crc(index))
	out = append(out, footer...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(footer)))
	out = binary.BigEndian.AppendUint32(out, crc(footer))
	out = append(out, segMagic[:]...)
	return Built{Object: out, IndexOff: int64(indexOff)}, nil
}

func appendField(b, f []byte) []byte {
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
