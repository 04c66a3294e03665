// Package protocol parses the NATS client protocol (what a client sends)
// and writes what a server sends back. It is allocation-free on the hot
// path: parsed fields are sub-slices of the caller's buffer.
package protocol

import (
	"bytes"
	"errors"
	"fmt"
)

// Kind names a client protocol operation.
type Kind uint8

// The operations a client sends.
const (
	KindConnect Kind = iota + 1
	KindPub
	KindHPub
	KindSub
	KindUnsub
	KindPing
	KindPong
	KindOK
	KindErr
)

// Sentinel parse errors; the server maps each to nats-server's -ERR text.
var (
	// ErrUnknownOp is any malformed or unknown operation.
	ErrUnknownOp = errors.New("unknown protocol operation")
	// ErrControlLine is a control line longer than the limit.
	ErrControlLine = errors.New("maximum control line exceeded")
	// ErrMaxPayload is a message larger than the limit.
	ErrMaxPayload = errors.New("maximum payload violation")
)

// Op is one parsed operation. Its byte slices alias the parsed buffer and
// are valid only until the buffer is reused.
type Op struct {
	Kind    Kind
	Subject []byte // PUB, HPUB, SUB
	Reply   []byte // PUB, HPUB; may be empty
	Queue   []byte // SUB; may be empty
	SID     []byte // SUB, UNSUB
	Max     int    // UNSUB; 0 when absent
	HdrLen  int    // HPUB: length of the header block at the start of Msg
	Msg     []byte // PUB, HPUB: headers (HPUB) then payload
	Arg     []byte // CONNECT JSON, -ERR text
}

// Limits bound what a single operation may hold.
type Limits struct {
	MaxControlLine int
	MaxPayload     int
}

// Parse parses the first operation in buf. It returns the bytes the
// operation used, or n == 0 and a nil error when buf holds only part of
// one. An error means the stream cannot be trusted any further.
func Parse(buf []byte, lim Limits, op *Op) (n int, err error) {
	n, err = parse(buf, lim, op)
	if err != nil {
		return 0, err
	}
	return n, nil
}

func parse(buf []byte, lim Limits, op *Op) (n int, err error) {
	eol := bytes.IndexByte(buf, '\n')
	if eol < 0 {
		if len(buf) > lim.MaxControlLine {
			return 0, ErrControlLine
		}
		return 0, nil
	}
	if eol > lim.MaxControlLine {
		return 0, ErrControlLine
	}
	line := buf[:eol]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	verb, args := splitVerb(line)
	*op = Op{}
	switch len(verb) {
	case 3:
		switch {
		case eqFold(verb, "PUB"):
			op.Kind = KindPub
			return parsePub(buf, eol+1, args, lim, op)
		case eqFold(verb, "SUB"):
			op.Kind = KindSub
			return eol + 1, parseSub(args, op)
		case eqFold(verb, "+OK"):
			op.Kind = KindOK
			return eol + 1, nil
		}
	case 4:
		switch {
		case eqFold(verb, "HPUB"):
			op.Kind = KindHPub
			return parsePub(buf, eol+1, args, lim, op)
		case eqFold(verb, "PING"):
			// Trailing text is ignored, as nats-server does.
			op.Kind = KindPing
			return eol + 1, nil
		case eqFold(verb, "PONG"):
			op.Kind = KindPong
			return eol + 1, nil
		case eqFold(verb, "-ERR"):
			op.Kind = KindErr
			op.Arg = args
			return eol + 1, nil
		}
	case 5:
		if eqFold(verb, "UNSUB") {
			op.Kind = KindUnsub
			return eol + 1, parseUnsub(args, op)
		}
	case 7:
		if eqFold(verb, "CONNECT") {
			op.Kind = KindConnect
			if len(args) == 0 {
				return 0, ErrUnknownOp
			}
			op.Arg = args
			return eol + 1, nil
		}
	}
	return 0, ErrUnknownOp
}

// splitVerb separates the verb from the (trimmed) rest of the line.
func splitVerb(line []byte) (verb, rest []byte) {
	i := 0
	for i < len(line) && line[i] != ' ' && line[i] != '\t' {
		i++
	}
	return line[:i], trimSpace(line[i:])
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// eqFold compares an ASCII verb case-insensitively with an upper-case word.
func eqFold(b []byte, upper string) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != upper[i] {
			return false
		}
	}
	return true
}

// Fields splits args on blanks (spaces and tabs) into at most len(out)
// fields; it returns how many there were, or len(out)+1 when there were
// more. It allocates nothing, so the route parser splits its lines with
// it too: one rule for what separates a frame's arguments.
func Fields(args []byte, out [][]byte) int {
	n := 0
	for len(args) > 0 {
		i := 0
		for i < len(args) && args[i] != ' ' && args[i] != '\t' {
			i++
		}
		if i > 0 {
			if n == len(out) {
				return n + 1
			}
			out[n] = args[:i]
			n++
		}
		args = args[i:]
		for len(args) > 0 && (args[0] == ' ' || args[0] == '\t') {
			args = args[1:]
		}
	}
	return n
}

// parseSize reads a non-negative decimal; -1 if it is not one.
func parseSize(b []byte) int {
	if len(b) == 0 || len(b) > 10 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func parsePub(buf []byte, start int, args []byte, lim Limits, op *Op) (int, error) {
	var f [4][]byte
	nf := Fields(args, f[:])
	hdr := 0
	var size int
	if op.Kind == KindPub {
		switch nf {
		case 2:
			op.Subject, size = f[0], parseSize(f[1])
		case 3:
			op.Subject, op.Reply, size = f[0], f[1], parseSize(f[2])
		default:
			return 0, ErrUnknownOp
		}
	} else {
		switch nf {
		case 3:
			op.Subject, hdr, size = f[0], parseSize(f[1]), parseSize(f[2])
		case 4:
			op.Subject, op.Reply, hdr, size = f[0], f[1], parseSize(f[2]), parseSize(f[3])
		default:
			return 0, ErrUnknownOp
		}
		if hdr < 0 || hdr > size {
			return 0, ErrUnknownOp
		}
	}
	if size < 0 {
		return 0, ErrUnknownOp
	}
	if size > lim.MaxPayload {
		return 0, &PayloadError{Size: size, Max: lim.MaxPayload}
	}
	end := start + size
	if len(buf) < end+2 {
		if len(buf) > end && buf[end] != '\r' {
			return 0, ErrUnknownOp
		}
		return 0, nil
	}
	if buf[end] != '\r' || buf[end+1] != '\n' {
		return 0, ErrUnknownOp
	}
	op.HdrLen = hdr
	op.Msg = buf[start:end]
	return end + 2, nil
}

// PayloadError reports a message over the payload limit; it matches
// ErrMaxPayload with errors.Is.
type PayloadError struct{ Size, Max int }

func (e *PayloadError) Error() string {
	return fmt.Sprintf("maximum payload violation: %d vs %d", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrMaxPayload) hold.
func (e *PayloadError) Is(target error) bool { return target == ErrMaxPayload }

func parseSub(args []byte, op *Op) error {
	var f [3][]byte
	switch Fields(args, f[:]) {
	case 2:
		op.Subject, op.SID = f[0], f[1]
	case 3:
		op.Subject, op.Queue, op.SID = f[0], f[1], f[2]
	default:
		return ErrUnknownOp
	}
	return nil
}

func parseUnsub(args []byte, op *Op) error {
	var f [2][]byte
	switch Fields(args, f[:]) {
	case 1:
		op.SID = f[0]
	case 2:
		op.SID = f[0]
		if op.Max = parseSize(f[1]); op.Max < 0 {
			return ErrUnknownOp
		}
	default:
		return ErrUnknownOp
	}
	return nil
}
