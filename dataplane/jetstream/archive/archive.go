// Package archive is the format of a stream backup: what STREAM.SNAPSHOT
// sends and STREAM.RESTORE takes back (`nats backup stream`, `nats
// backup restore stream`).
//
// A backup is a logical copy, not a copy of the store's files: it holds
// the stream's config and state, every message with its sequence and
// time, and each kept consumer's config and delivery state, so it can be
// restored into any store layout and any node count. The bytes on the
// wire are an s2 stream (the client tracks its progress by decoding
// s2), which holds:
//
//	magic "CTRLARC1"
//	records: kind(1) length(uvarint) body crc32c(kind || body)(4, big-endian)
//
// in the order: one stream record, its messages in ascending sequence,
// its consumers, one end record that counts what came before it. A
// reader checks every record's checksum, the order and the counts, so a
// truncated or damaged backup is refused as a whole and never restored
// in part.
package archive

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/klauspost/compress/s2"
)

// Magic opens every archive's decompressed bytes.
const Magic = "CTRLARC1"

// MaxRecord bounds one record's body: a reader refuses a longer one
// before allocating it. A message record holds one message, which
// JetStream bounds far below this.
const MaxRecord = 64 << 20

// Record kinds.
const (
	kindStream   byte = 'S'
	kindMsg      byte = 'M'
	kindConsumer byte = 'C'
	kindEnd      byte = 'E'
)

// ErrCorrupt is an archive that fails its checks: a bad checksum, a
// record out of order, counts that do not match, or an end missing.
var ErrCorrupt = errors.New("archive corrupt")

// ErrFormat is input that is not an archive of this format at all, such
// as a backup taken from nats-server, whose archive holds its own store
// files.
var ErrFormat = errors.New("not a Contrail stream backup")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Stream is the archive's first record: the stream as it was when the
// backup was taken.
type Stream struct {
	// Config is the stream's config as JSON, as STREAM.INFO shows it.
	Config json.RawMessage `json:"config"`
	// Created is the stream's creation time.
	Created time.Time `json:"created"`
	// State is the stream's state summary, which the messages after it
	// make up exactly.
	State State `json:"state"`
	// Sources is how far the stream had taken each of its sources, so
	// that a restored stream goes on from there, neither taking those
	// messages again nor skipping any.
	Sources []Source `json:"sources,omitempty"`
}

// Source is the progress of one of a stream's sources: the last origin
// sequence taken, from the origin of that identity.
type Source struct {
	Key      string `json:"key"`
	Seq      uint64 `json:"seq"`
	Identity string `json:"identity,omitempty"`
}

// State is a stream's sequence range and counts. Sequences between
// FirstSeq and LastSeq that no message record holds were deleted.
type State struct {
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Msgs      uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstTime int64  `json:"first_ts"`
	LastTime  int64  `json:"last_ts"`
}

// Msg is one message of the stream.
type Msg struct {
	Seq     uint64
	Time    int64 // unix nanos
	Subject string
	Header  []byte
	Data    []byte
}

// Consumer is one consumer kept with the stream.
type Consumer struct {
	Name string `json:"name"`
	// Config is the consumer's config as JSON.
	Config  json.RawMessage `json:"config"`
	Created time.Time       `json:"created"`
	// State is the consumer's delivery state in the data plane's own
	// encoding (what its store record holds).
	State json.RawMessage `json:"state,omitempty"`
}

// end is the last record: what came before it, counted.
type end struct {
	Msgs      uint64 `json:"messages"`
	Consumers int    `json:"consumers"`
}

// Writer writes one archive. Records must come in the archive's order;
// Close writes the end record and flushes.
type Writer struct {
	z         *s2.Writer
	buf       []byte
	stream    bool
	want      uint64 // the stream record's message count
	lastSeq   uint64
	msgs      uint64
	consumers int
	closed    bool
}

// NewWriter starts an archive on w.
func NewWriter(w io.Writer) (*Writer, error) {
	z := s2.NewWriter(w, s2.WriterConcurrency(1))
	if _, err := z.Write([]byte(Magic)); err != nil {
		return nil, err
	}
	return &Writer{z: z}, nil
}

// Stream writes the stream record, which comes first.
func (w *Writer) Stream(s *Stream) error {
	if w.stream {
		return errors.New("archive: stream record written twice")
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	w.stream, w.want = true, s.State.Msgs
	return w.record(kindStream, b)
}

// Msg writes one message; sequences must ascend.
func (w *Writer) Msg(m *Msg) error {
	if !w.stream || w.consumers > 0 {
		return errors.New("archive: message out of order")
	}
	if m.Seq <= w.lastSeq {
		return fmt.Errorf("archive: message %d after %d", m.Seq, w.lastSeq)
	}
	b := w.buf[:0]
	b = binary.BigEndian.AppendUint64(b, m.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Time))
	b = binary.AppendUvarint(b, uint64(len(m.Subject)))
	b = append(b, m.Subject...)
	b = binary.AppendUvarint(b, uint64(len(m.Header)))
	b = append(b, m.Header...)
	b = binary.AppendUvarint(b, uint64(len(m.Data)))
	b = append(b, m.Data...)
	w.buf = b
	w.lastSeq = m.Seq
	w.msgs++
	return w.record(kindMsg, b)
}

// Consumer writes one consumer, after the messages.
func (w *Writer) Consumer(c *Consumer) error {
	if !w.stream {
		return errors.New("archive: consumer before the stream")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	w.consumers++
	return w.record(kindConsumer, b)
}

// Close ends the archive: the end record, then the compressor's flush.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if !w.stream {
		return errors.New("archive: closed without a stream record")
	}
	if w.msgs != w.want {
		// The messages must make up the state the archive declares: a
		// backup missing some is refused here, not found short later.
		return fmt.Errorf("archive: %d messages written, the stream record counts %d", w.msgs, w.want)
	}
	b, err := json.Marshal(end{Msgs: w.msgs, Consumers: w.consumers})
	if err != nil {
		return err
	}
	if err := w.record(kindEnd, b); err != nil {
		return err
	}
	return w.z.Close()
}

func (w *Writer) record(kind byte, body []byte) error {
	if len(body) > MaxRecord {
		return fmt.Errorf("archive: record of %d bytes exceeds %d", len(body), MaxRecord)
	}
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = kind
	n := 1 + binary.PutUvarint(hdr[1:], uint64(len(body)))
	crc := crc32.Update(crc32.Update(0, castagnoli, hdr[:1]), castagnoli, body)
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc)
	for _, p := range [][]byte{hdr[:n], body, sum[:]} {
		if _, err := w.z.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// Reader reads one archive, checking it as it goes.
type Reader struct {
	r         *bufio.Reader
	stream    *Stream
	lastSeq   uint64
	msgs      uint64
	consumers int
	done      bool
	body      []byte
}

// NewReader opens an archive on r. It reads the magic at once: an s2
// stream of another format fails here with ErrFormat, input that is not
// a sound s2 stream with ErrCorrupt.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(s2.NewReader(r, s2.ReaderMaxBlockSize(4<<20)), 64<<10)
	var magic [len(Magic)]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, truncated(err)
	}
	if string(magic[:]) != Magic {
		return nil, ErrFormat
	}
	return &Reader{r: br}, nil
}

// Stream reads the stream record, which must come first.
func (r *Reader) Stream() (*Stream, error) {
	if r.stream != nil {
		return r.stream, nil
	}
	kind, body, err := r.record()
	if err != nil {
		return nil, err
	}
	if kind != kindStream {
		return nil, fmt.Errorf("%w: first record is %q, not the stream", ErrCorrupt, kind)
	}
	var s Stream
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("%w: stream record: %w", ErrCorrupt, err)
	}
	r.stream = &s
	return &s, nil
}

// Next reads the record after the stream record: a *Msg or a *Consumer,
// or io.EOF once the end record is read and its counts match. A Msg's
// slices are valid until the next call.
func (r *Reader) Next() (any, error) {
	if r.done {
		return nil, io.EOF
	}
	if _, err := r.Stream(); err != nil {
		return nil, err
	}
	kind, body, err := r.record()
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindMsg:
		if r.consumers > 0 {
			return nil, fmt.Errorf("%w: message after a consumer", ErrCorrupt)
		}
		m, err := decodeMsg(body)
		if err != nil {
			return nil, err
		}
		if m.Seq <= r.lastSeq {
			return nil, fmt.Errorf("%w: message %d after %d", ErrCorrupt, m.Seq, r.lastSeq)
		}
		r.lastSeq = m.Seq
		r.msgs++
		return m, nil
	case kindConsumer:
		var c Consumer
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%w: consumer record: %w", ErrCorrupt, err)
		}
		r.consumers++
		return &c, nil
	case kindEnd:
		var e end
		if err := json.Unmarshal(body, &e); err != nil {
			return nil, fmt.Errorf("%w: end record: %w", ErrCorrupt, err)
		}
		if e.Msgs != r.msgs || e.Consumers != r.consumers || r.msgs != r.stream.State.Msgs {
			return nil, fmt.Errorf("%w: the archive holds %d messages and %d consumers, its end counts %d and %d, its stream %d messages",
				ErrCorrupt, r.msgs, r.consumers, e.Msgs, e.Consumers, r.stream.State.Msgs)
		}
		switch _, err := r.r.ReadByte(); {
		case err == nil:
			return nil, fmt.Errorf("%w: data after the end record", ErrCorrupt)
		case err != io.EOF:
			// A damaged frame, or the input's own failure (a restore
			// refused meanwhile), which is not the archive's.
			return nil, truncated(err)
		}
		r.done = true
		return nil, io.EOF
	}
	return nil, fmt.Errorf("%w: unknown record kind %q", ErrCorrupt, kind)
}

// record reads one framed record and checks its checksum. A clean end of
// input here is a truncated archive: only the end record may end it.
func (r *Reader) record() (byte, []byte, error) {
	kind, err := r.r.ReadByte()
	if err != nil {
		return 0, nil, truncated(err)
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, nil, truncated(err)
	}
	if n > MaxRecord {
		return 0, nil, fmt.Errorf("%w: record of %d bytes exceeds %d", ErrCorrupt, n, MaxRecord)
	}
	if cap(r.body) < int(n)+4 {
		r.body = make([]byte, int(n)+4)
	}
	b := r.body[:int(n)+4]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return 0, nil, truncated(err)
	}
	body, sum := b[:n], binary.BigEndian.Uint32(b[n:])
	if crc32.Update(crc32.Update(0, castagnoli, []byte{kind}), castagnoli, body) != sum {
		return 0, nil, fmt.Errorf("%w: checksum mismatch in a %q record", ErrCorrupt, kind)
	}
	return kind, body, nil
}

// truncated turns the end of input inside the records into ErrCorrupt;
// other read errors (the transfer failed) pass as they are.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated before its end record", ErrCorrupt)
	}
	if errors.Is(err, s2.ErrCorrupt) || errors.Is(err, s2.ErrUnsupported) || errors.Is(err, s2.ErrCRC) || errors.Is(err, s2.ErrTooLarge) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

func decodeMsg(b []byte) (*Msg, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: short message record", ErrCorrupt)
	}
	m := &Msg{Seq: binary.BigEndian.Uint64(b), Time: int64(binary.BigEndian.Uint64(b[8:]))}
	rest := b[16:]
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, fmt.Errorf("%w: message %d: bad field length", ErrCorrupt, m.Seq)
		}
		fields[i], rest = rest[k:k+int(n)], rest[k+int(n):]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: message %d: trailing bytes", ErrCorrupt, m.Seq)
	}
	m.Subject = string(fields[0])
	if len(fields[1]) > 0 {
		m.Header = fields[1]
	}
	m.Data = fields[2]
	return m, nil
}
