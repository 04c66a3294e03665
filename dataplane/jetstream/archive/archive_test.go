package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
)

// sample writes an archive of three messages (a gap at 3) and one
// consumer.
func sample(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	st := &Stream{Config: json.RawMessage(`{"name":"S"}`), Created: time.Unix(10, 0).UTC(),
		State: State{FirstSeq: 1, LastSeq: 5, Msgs: 3}}
	if err := w.Stream(st); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Msg{
		{Seq: 1, Time: 100, Subject: "a", Data: []byte("one")},
		{Seq: 2, Time: 200, Subject: "b", Header: []byte("NATS/1.0\r\nX: y\r\n\r\n"), Data: nil},
		{Seq: 4, Time: 400, Subject: "a", Data: bytes.Repeat([]byte("z"), 5000)},
	} {
		if err := w.Msg(&m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Consumer(&Consumer{Name: "C", Config: json.RawMessage(`{"durable_name":"C"}`), State: json.RawMessage(`{"dseq":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads an archive to its end and returns what it held.
func readAll(b []byte) (*Stream, []Msg, []*Consumer, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := r.Stream()
	if err != nil {
		return nil, nil, nil, err
	}
	var msgs []Msg
	var cons []*Consumer
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return st, msgs, cons, nil
		}
		if err != nil {
			return nil, nil, nil, err
		}
		switch v := rec.(type) {
		case *Msg:
			m := *v
			m.Header, m.Data = bytes.Clone(v.Header), bytes.Clone(v.Data)
			msgs = append(msgs, m)
		case *Consumer:
			cons = append(cons, v)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	st, msgs, cons, err := readAll(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.State.LastSeq != 5 || string(st.Config) != `{"name":"S"}` || !st.Created.Equal(time.Unix(10, 0)) {
		t.Errorf("stream record: %+v", st)
	}
	if len(msgs) != 3 || msgs[0].Seq != 1 || string(msgs[0].Data) != "one" || msgs[1].Header == nil ||
		len(msgs[1].Data) != 0 || msgs[2].Seq != 4 || len(msgs[2].Data) != 5000 || msgs[2].Time != 400 {
		t.Errorf("messages: %+v", msgs)
	}
	if len(cons) != 1 || cons[0].Name != "C" || string(cons[0].State) != `{"dseq":2}` {
		t.Errorf("consumers: %+v", cons)
	}
}

// A prefix of an archive is refused (every one near its start, then a
// spread): only the end record ends one.
func TestTruncatedRefused(t *testing.T) {
	full := sample(t)
	for n := 0; n < len(full); n += 1 + n/64 {
		if _, _, _, err := readAll(full[:n]); err == nil {
			t.Fatalf("a prefix of %d of %d bytes read as a whole archive", n, len(full))
		}
	}
}

// A flipped bit anywhere in the decompressed records fails a checksum.
func TestDamageRefused(t *testing.T) {
	raw, err := io.ReadAll(s2.NewReader(bytes.NewReader(sample(t))))
	if err != nil {
		t.Fatal(err)
	}
	for i := len(Magic); i < len(raw); i += 1 + i/256 {
		bad := bytes.Clone(raw)
		bad[i] ^= 0x10
		var z bytes.Buffer
		w := s2.NewWriter(&z)
		w.Write(bad)
		w.Close()
		if _, _, _, err := readAll(z.Bytes()); err == nil {
			t.Fatalf("a flipped bit at %d of %d went unnoticed", i, len(raw))
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a flipped bit at %d: %v, want ErrCorrupt", i, err)
		}
	}
}

// An s2 stream of another format (a backup of nats-server's, which holds
// its store files) is ErrFormat; what is not s2 at all is ErrCorrupt.
func TestOtherFormatsRefused(t *testing.T) {
	var z bytes.Buffer
	w := s2.NewWriter(&z)
	w.Write([]byte("NATSARC1 something else entirely"))
	w.Close()
	if _, err := NewReader(bytes.NewReader(z.Bytes())); !errors.Is(err, ErrFormat) {
		t.Errorf("another format: %v, want ErrFormat", err)
	}
	for name, in := range map[string][]byte{"not s2": []byte(strings.Repeat("x", 100)), "empty": nil} {
		if _, err := NewReader(bytes.NewReader(in)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// A record claiming more than MaxRecord is refused before it is read.
func TestHugeRecordRefused(t *testing.T) {
	var z bytes.Buffer
	w := s2.NewWriter(&z)
	w.Write([]byte(Magic))
	w.Write([]byte{kindStream, 0xff, 0xff, 0xff, 0xff, 0x0f})
	w.Close()
	r, err := NewReader(bytes.NewReader(z.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stream(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("huge record: %v", err)
	}
}

// The writer keeps the order a reader checks.
func TestWriterOrder(t *testing.T) {
	w, _ := NewWriter(io.Discard)
	if err := w.Msg(&Msg{Seq: 1}); err == nil {
		t.Error("a message before the stream record was written")
	}
	w.Stream(&Stream{})
	w.Msg(&Msg{Seq: 5})
	if err := w.Msg(&Msg{Seq: 5}); err == nil {
		t.Error("a repeated sequence was written")
	}
	w.Consumer(&Consumer{Name: "c"})
	if err := w.Msg(&Msg{Seq: 6}); err == nil {
		t.Error("a message after a consumer was written")
	}
}

// The messages must make up the state the stream record declares, on
// both sides: a writer that was given fewer refuses to close, and a
// reader refuses an archive whose end disagrees.
func TestMessageCountChecked(t *testing.T) {
	w, _ := NewWriter(io.Discard)
	w.Stream(&Stream{State: State{Msgs: 2}})
	w.Msg(&Msg{Seq: 1})
	if err := w.Close(); err == nil {
		t.Error("an archive one message short closed")
	}
	// The same archive, ended by hand past the writer's check.
	var buf bytes.Buffer
	w, _ = NewWriter(&buf)
	w.Stream(&Stream{State: State{Msgs: 2}})
	w.Msg(&Msg{Seq: 1})
	w.record(kindEnd, []byte(`{"messages":1,"consumers":0}`))
	w.z.Close()
	if _, _, _, err := readAll(buf.Bytes()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("an archive whose stream record counts 2 of its 1 message: %v", err)
	}
}
