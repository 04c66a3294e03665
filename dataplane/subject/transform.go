package subject

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Subject transforms rewrite a literal subject that matches a source filter
// into a destination built from literal tokens, references to the source's
// wildcard tokens and mapping functions. Streams use them for
// subject_transform and republish, sources and mirrors for their subject
// transforms, accounts for subject mappings.
//
// The destination grammar, token by token:
//
//	literal          copied as is; no whitespace ("$JS", "$x" are literals)
//	$N               the Nth '*' of the source (1-based; below 1 reads the
//	                 subject's first token, as nats-server does)
//	{{wildcard(N)}}  same as $N
//	{{partition(n, N...)}}  FNV-1a 32 of the referenced tokens concatenated
//	                        without separators, mod n ("0" when n is 0)
//	{{partition(n)}}        FNV-1a 32 of the whole subject, mod n
//	{{splitFromLeft(N, p)}} {{splitFromRight(N, p)}}
//	{{sliceFromLeft(N, s)}} {{sliceFromRight(N, s)}}
//	{{split(N, delim)}} {{left(N, n)}} {{right(N, n)}}
//	{{random(n)}}
//	>                last token only, and only if the source ends in '>':
//	                 the subject tokens the source's '>' matched
//
// Lengths and positions count bytes; the integer-argument functions leave
// the token whole when the argument is not strictly between 0 and its
// length. Without a wildcard in the source only literals, partition (whose
// token indexes are then ignored) and random are allowed.
//
// The results agree with nats-server's for every transform and subject both
// accept, so partitions computed here and by a nats-server deployment
// coincide. Deliberate differences: a negative partition or random count is
// rejected; a {{...}} token must be one well-formed call from end to end;
// literal destination tokens may not hold NUL; the source must pass
// ValidFilterString; a source token such as "*x" is a literal (nats-server
// matches any token against it); and Apply rejects subjects with empty or
// wildcard tokens even for the identity transform.

// ErrBadTransform is wrapped by every error NewTransform returns.
var ErrBadTransform = errors.New("invalid subject transform")

// TransformError says why NewTransform rejected a transform. It unwraps to
// ErrBadTransform.
type TransformError struct {
	// Source is set when the source filter is at fault; otherwise the
	// destination is.
	Source bool
	// Token is the offending destination token, when there is one.
	Token string
	// Reason describes the problem.
	Reason string
}

func (e *TransformError) Error() string {
	side := "destination"
	if e.Source {
		side = "source"
	}
	if e.Token != "" {
		return ErrBadTransform.Error() + ": " + side + " token " + strconv.Quote(e.Token) + ": " + e.Reason
	}
	return ErrBadTransform.Error() + ": " + side + ": " + e.Reason
}

func (e *TransformError) Unwrap() error { return ErrBadTransform }

type opKind uint8

const (
	opLiteral opKind = iota
	opWildcard
	opPartition
	opSplitFromLeft
	opSplitFromRight
	opSliceFromLeft
	opSliceFromRight
	opSplit
	opLeft
	opRight
	opRandom
)

// mappingFuncs names the destination functions. An upper-case letter in a
// name matches either case, a lower-case one only itself: nats-server
// accepts "partition" and "Partition", "splitFromLeft" and "SplitFromLeft"
// or "splitfromleft", but not "PARTITION".
var mappingFuncs = [...]struct {
	name string
	kind opKind
}{
	{"Wildcard", opWildcard},
	{"Partition", opPartition},
	{"SplitFromLeft", opSplitFromLeft},
	{"SplitFromRight", opSplitFromRight},
	{"SliceFromLeft", opSliceFromLeft},
	{"SliceFromRight", opSliceFromRight},
	{"Split", opSplit},
	{"Left", opLeft},
	{"Right", opRight},
	{"Random", opRandom},
}

// op produces one destination token (or, for the split and slice
// functions, possibly several).
type op struct {
	kind opKind
	// lit is the literal token, or the split delimiter.
	lit string
	// slot indexes the captured span of the single source token the
	// function reads.
	slot int
	// slots are the captured spans partition hashes; nil hashes the whole
	// subject.
	slots []int
	// n is the integer argument: partition or random count, split
	// position, slice size, left/right length.
	n int32
}

// span is a captured subject token, subject[lo:hi].
type span struct{ lo, hi int }

// Transform maps subjects matching a source filter to a destination. A
// compiled Transform is immutable and safe for concurrent use.
type Transform struct {
	src, dest string
	stoks     []string // source filter tokens
	// slotOf maps a source token position to the span slot its token is
	// captured into, or -1 when no destination token reads it.
	slotOf []int
	nslots int
	ops    []op // destination tokens, without a trailing '>'
	fwc    bool // both sides end in '>'
	// constant is set when the destination is all literal: every match
	// maps to dest itself.
	constant bool
}

// Source returns the source filter (">" when it was given empty).
func (t *Transform) Source() string { return t.src }

// Destination returns the destination template.
func (t *Transform) Destination() string { return t.dest }

func (t *Transform) String() string { return t.src + " -> " + t.dest }

// NewTransform compiles the transform src → dest. An empty src means ">".
// The source must be a valid filter; dest is checked the way nats-server
// checks a stream subject_transform or account mapping destination.
//
// An empty dest is an error here; nats-server configurations use it to
// mean "no transform", which callers must handle before compiling.
func NewTransform(src, dest string) (*Transform, error) {
	if src == "" {
		src = ">"
	}
	if !ValidFilterString(src) {
		return nil, &TransformError{Source: true, Reason: strconv.Quote(src) + " is not a valid subject filter"}
	}
	if dest == "" {
		return nil, &TransformError{Reason: "empty destination"}
	}

	t := &Transform{src: src, dest: dest}
	var pwcPos []int // source position of each '*', in order
	for rest, more := src, true; more; {
		var tok string
		tok, rest, more = cut(rest)
		switch tok {
		case "*":
			pwcPos = append(pwcPos, len(t.stoks))
		case ">":
			t.fwc = true
		}
		t.stoks = append(t.stoks, tok)
	}
	t.slotOf = make([]int, len(t.stoks))
	for i := range t.slotOf {
		t.slotOf[i] = -1
	}
	c := compiler{t: t, pwcPos: pwcPos, wild: len(pwcPos) > 0 || t.fwc}

	destFwc := false
	constant := true
	for rest, more := dest, true; more; {
		var tok string
		tok, rest, more = cut(rest)
		switch {
		case tok == "":
			return nil, &TransformError{Reason: "empty token in " + strconv.Quote(dest)}
		case tok == ">":
			if more {
				return nil, &TransformError{Reason: "'>' must be the last token of " + strconv.Quote(dest)}
			}
			destFwc = true
			continue
		case tok == "*":
			return nil, &TransformError{Reason: "'*' is not allowed in a destination; reference source wildcards with $N or {{wildcard(N)}}"}
		}
		o, err := c.token(tok)
		if err != nil {
			return nil, err
		}
		if o.kind != opLiteral {
			constant = false
		}
		t.ops = append(t.ops, o)
	}
	if destFwc != t.fwc {
		if t.fwc {
			return nil, &TransformError{Reason: "source " + strconv.Quote(src) + " ends in '>' but destination " + strconv.Quote(dest) + " does not"}
		}
		return nil, &TransformError{Reason: "destination " + strconv.Quote(dest) + " ends in '>' but source " + strconv.Quote(src) + " does not"}
	}
	t.constant = constant && !t.fwc
	return t, nil
}

type compiler struct {
	t      *Transform
	pwcPos []int
	// wild is set when the source has any wildcard; without one only
	// literals, partition and random are allowed in the destination.
	wild bool
}

// ref resolves a 1-based wildcard reference to a span slot. Like
// nats-server, an index below 1 reads the subject's first token.
func (c *compiler) ref(tok string, idx int) (int, error) {
	if !c.wild {
		return 0, &TransformError{Token: tok, Reason: "wildcard index out of range: the source " + strconv.Quote(c.t.src) + " has no wildcards"}
	}
	if idx > len(c.pwcPos) {
		return 0, &TransformError{Token: tok, Reason: "wildcard index " + strconv.Itoa(idx) + " out of range: the source " + strconv.Quote(c.t.src) + " has " + strconv.Itoa(len(c.pwcPos)) + " '*'"}
	}
	pos := 0
	if idx >= 1 {
		pos = c.pwcPos[idx-1]
	}
	if c.t.slotOf[pos] < 0 {
		c.t.slotOf[pos] = c.t.nslots
		c.t.nslots++
	}
	return c.t.slotOf[pos], nil
}

// token compiles one destination token other than '>'.
func (c *compiler) token(tok string) (op, error) {
	if len(tok) > 1 && tok[0] == '$' {
		idx, err := strconv.Atoi(tok[1:])
		if err == nil {
			slot, err := c.ref(tok, idx)
			return op{kind: opWildcard, slot: slot}, err
		}
		// Not a number: a literal such as "$JS".
	}
	if len(tok) > 4 && strings.HasPrefix(tok, "{{") && strings.HasSuffix(tok, "}}") {
		return c.call(tok)
	}
	if strings.ContainsAny(tok, " \t\n\f\r\x00") {
		return op{}, &TransformError{Token: tok, Reason: "whitespace in a destination token"}
	}
	return op{kind: opLiteral, lit: tok}, nil
}

func isReSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

func trimReSpace(s string) string {
	for len(s) > 0 && isReSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isReSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// funcNameIs matches a function name against its pattern in mappingFuncs.
func funcNameIs(got, pattern string) bool {
	if len(got) != len(pattern) {
		return false
	}
	for i := 0; i < len(got); i++ {
		p, g := pattern[i], got[i]
		if g != p && !('A' <= p && p <= 'Z' && g == p+('a'-'A')) {
			return false
		}
	}
	return true
}

// call compiles a "{{ name ( args ) }}" token; whitespace is allowed
// around the name and the parentheses.
func (c *compiler) call(tok string) (op, error) {
	body := trimReSpace(tok[2 : len(tok)-2])
	open := strings.IndexByte(body, '(')
	if open < 0 || body[len(body)-1] != ')' {
		return op{}, &TransformError{Token: tok, Reason: "unknown mapping function: expected {{name(arguments)}}"}
	}
	name := trimReSpace(body[:open])
	inner := body[open+1 : len(body)-1]
	kind := opLiteral
	for _, f := range mappingFuncs {
		if funcNameIs(name, f.name) {
			kind = f.kind
			break
		}
	}
	// nats-server's argument pattern does not span line breaks.
	if kind == opLiteral || strings.IndexByte(inner, '\n') >= 0 {
		return op{}, &TransformError{Token: tok, Reason: "unknown mapping function " + strconv.Quote(name)}
	}
	args := splitArgs(inner)
	bad := func(reason string) (op, error) {
		return op{}, &TransformError{Token: tok, Reason: name + ": " + reason}
	}

	switch kind {
	case opWildcard:
		if len(args) == 1 && args[0] == "" {
			return bad("not enough arguments: want a wildcard index")
		}
		if len(args) > 1 {
			return bad("too many arguments: want a wildcard index")
		}
		idx, err := atoiArg(args[0])
		if err != nil {
			return bad("wildcard index " + strconv.Quote(args[0]) + " is not an integer")
		}
		slot, err := c.ref(tok, idx)
		return op{kind: opWildcard, slot: slot}, err

	case opPartition:
		n, err := atoiArg(args[0])
		if err != nil || n > math.MaxInt32 || n < 0 {
			return bad("partition count " + strconv.Quote(args[0]) + " is not an integer in 0..2147483647")
		}
		o := op{kind: opPartition, n: int32(n)}
		idxs := make([]int, 0, len(args)-1)
		for _, a := range args[1:] {
			idx, err := atoiArg(a)
			if err != nil {
				return bad("wildcard index " + strconv.Quote(a) + " is not an integer")
			}
			idxs = append(idxs, idx)
		}
		// With a literal source nats-server ignores the indexes and
		// hashes the whole subject, as partition(n) does.
		if c.wild && len(idxs) > 0 {
			o.slots = make([]int, len(idxs))
			for i, idx := range idxs {
				if o.slots[i], err = c.ref(tok, idx); err != nil {
					return op{}, err
				}
			}
		}
		return o, nil

	case opSplitFromLeft, opSplitFromRight, opSliceFromLeft, opSliceFromRight, opLeft, opRight, opSplit:
		if len(args) < 2 {
			return bad("not enough arguments: want a wildcard index and a second argument")
		}
		if len(args) > 2 {
			return bad("too many arguments: want a wildcard index and a second argument")
		}
		idx, err := atoiArg(args[0])
		if err != nil {
			return bad("wildcard index " + strconv.Quote(args[0]) + " is not an integer")
		}
		o := op{kind: kind}
		if kind == opSplit {
			// The delimiter is taken verbatim; an empty one splits
			// into characters.
			if strings.ContainsAny(args[1], " .") {
				return bad("delimiter " + strconv.Quote(args[1]) + " may not hold a space or '.'")
			}
			o.lit = args[1]
		} else {
			v, err := strconv.ParseInt(strings.Trim(args[1], " "), 10, 32)
			if err != nil {
				return bad("argument " + strconv.Quote(args[1]) + " is not a 32-bit integer")
			}
			o.n = int32(v)
		}
		o.slot, err = c.ref(tok, idx)
		return o, err

	default: // opRandom
		if len(args) != 1 {
			return bad("want exactly one argument, the count")
		}
		n, err := atoiArg(args[0])
		if err != nil || n > math.MaxInt32 || n < 0 {
			return bad("random count " + strconv.Quote(args[0]) + " is not an integer in 0..2147483647")
		}
		return op{kind: opRandom, n: int32(n)}, nil
	}
}

// splitArgs splits a function's argument list at commas, dropping the
// whitespace after each comma (but not before it).
func splitArgs(s string) []string {
	args := make([]string, 0, 1+strings.Count(s, ","))
	for {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return append(args, s)
		}
		args = append(args, s[:i])
		s = s[i+1:]
		for len(s) > 0 && isReSpace(s[0]) {
			s = s[1:]
		}
	}
}

// atoiArg parses an integer argument, ignoring surrounding spaces.
func atoiArg(s string) (int, error) { return strconv.Atoi(strings.Trim(s, " ")) }

// literalToken reports whether tok may appear in a published subject as
// far as matching cares: non-empty and not a wildcard.
func literalToken(tok string) bool {
	return tok != "" && tok != "*" && tok != ">"
}

// walk matches subject against the source, capturing the spans the
// destination reads unless spans is nil. rem is where the tokens matched by
// a trailing '>' start.
func (t *Transform) walk(subject string, spans []span) (rem int, ok bool) {
	i, last := 0, false
	for k, st := range t.stoks {
		if last {
			return 0, false // subject has fewer tokens than the source
		}
		if st == ">" {
			// One or more remaining tokens, all of them valid.
			first := true
			for j := i; ; {
				e := strings.IndexByte(subject[j:], sep)
				end := len(subject)
				if e >= 0 {
					end = j + e
				}
				if !literalToken(subject[j:end]) {
					return 0, false
				}
				if first && spans != nil {
					if s := t.slotOf[k]; s >= 0 {
						spans[s] = span{j, end}
					}
					first = false
				}
				if e < 0 {
					return i, true
				}
				j = end + 1
			}
		}
		end := len(subject)
		if e := strings.IndexByte(subject[i:], sep); e >= 0 {
			end = i + e
		} else {
			last = true
		}
		tok := subject[i:end]
		if !literalToken(tok) || (st != "*" && st != tok) {
			return 0, false
		}
		if s := t.slotOf[k]; s >= 0 && spans != nil {
			spans[s] = span{i, end}
		}
		i = end + 1
	}
	return 0, last
}

// maxStackSlots bounds the captured spans kept on the stack.
const maxStackSlots = 8

// Match reports whether the literal subject is matched by the source
// filter. Subjects with empty or wildcard tokens never match.
func (t *Transform) Match(subject string) bool {
	_, ok := t.walk(subject, nil)
	return ok
}

// Apply maps a literal subject. ok is false when the subject does not match
// the source (or has empty or wildcard tokens). As with nats-server the
// result is not revalidated: split may leave an empty token, for example
// when a wildcard token consists only of delimiters.
func (t *Transform) Apply(subject string) (mapped string, ok bool) {
	var buf [maxStackSlots]span
	spans := buf[:]
	if t.nslots > maxStackSlots {
		spans = make([]span, t.nslots)
	}
	rem, ok := t.walk(subject, spans)
	switch {
	case !ok:
		return "", false
	case t.constant:
		return t.dest, true
	case len(t.ops) == 0: // destination is just '>'
		return subject[rem:], true
	}

	// One allocation: grow to an upper bound of the result first.
	size := len(t.ops)
	if t.fwc {
		size += len(subject) - rem
	}
	for i := range t.ops {
		o := &t.ops[i]
		switch o.kind {
		case opLiteral:
			size += len(o.lit)
		case opPartition, opRandom:
			size += 10
		default:
			// At most one separator per byte.
			size += 2 * (spans[o.slot].hi - spans[o.slot].lo)
		}
	}
	var b strings.Builder
	b.Grow(size)
	for i := range t.ops {
		if i > 0 {
			b.WriteByte(sep)
		}
		t.ops[i].write(&b, subject, spans)
	}
	if t.fwc {
		b.WriteByte(sep)
		b.WriteString(subject[rem:])
	}
	return b.String(), true
}

// FNV-1a 32-bit parameters (the hash nats-server partitions with).
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

func fnv1a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime32
	}
	return h
}

// partition hashes the referenced tokens, concatenated without separators,
// or the whole subject when none are referenced, into 0..n-1.
func (o *op) partition(subject string, spans []span) uint32 {
	if o.n == 0 {
		return 0
	}
	h := uint32(fnvOffset32)
	if o.slots == nil {
		h = fnv1a(h, subject)
	} else {
		for _, s := range o.slots {
			h = fnv1a(h, subject[spans[s].lo:spans[s].hi])
		}
	}
	return h % uint32(o.n)
}

func writeUint(b *strings.Builder, v uint32) {
	var d [10]byte
	b.Write(strconv.AppendUint(d[:0], uint64(v), 10))
}

func (o *op) write(b *strings.Builder, subject string, spans []span) {
	switch o.kind {
	case opLiteral:
		b.WriteString(o.lit)
		return
	case opPartition:
		writeUint(b, o.partition(subject, spans))
		return
	case opRandom:
		var v uint32
		if o.n > 0 {
			v = uint32(rand.Int32N(o.n))
		}
		writeUint(b, v)
		return
	}

	tok := subject[spans[o.slot].lo:spans[o.slot].hi]
	n, l := int(o.n), len(tok)
	// The integer-argument functions leave the token whole when the
	// argument is not strictly between 0 and its length.
	inRange := n > 0 && n < l
	switch o.kind {
	case opWildcard:
		b.WriteString(tok)
	case opSplitFromLeft:
		if !inRange {
			b.WriteString(tok)
			return
		}
		b.WriteString(tok[:n])
		b.WriteByte(sep)
		b.WriteString(tok[n:])
	case opSplitFromRight:
		if !inRange {
			b.WriteString(tok)
			return
		}
		b.WriteString(tok[:l-n])
		b.WriteByte(sep)
		b.WriteString(tok[l-n:])
	case opSliceFromLeft:
		// Chunks of n from the left; the last may be shorter.
		if !inRange {
			b.WriteString(tok)
			return
		}
		for i := 0; i < l; i += n {
			if i > 0 {
				b.WriteByte(sep)
			}
			b.WriteString(tok[i:min(i+n, l)])
		}
	case opSliceFromRight:
		// Chunks of n from the right; the first may be shorter.
		if !inRange {
			b.WriteString(tok)
			return
		}
		i := l % n
		if i > 0 {
			b.WriteString(tok[:i])
		}
		for ; i < l; i += n {
			if i > 0 {
				b.WriteByte(sep)
			}
			b.WriteString(tok[i : i+n])
		}
	case opLeft:
		if inRange {
			tok = tok[:n]
		}
		b.WriteString(tok)
	case opRight:
		if inRange {
			tok = tok[l-n:]
		}
		b.WriteString(tok)
	case opSplit:
		writeSplit(b, tok, o.lit)
	}
}

// writeSplit writes the non-empty pieces of tok around delim joined by
// '.'. To agree with nats-server, a token that starts with two or more
// delimiters keeps one leading '.'. An empty delimiter splits tok into
// UTF-8 sequences, as strings.Split does.
func writeSplit(b *strings.Builder, tok, delim string) {
	if delim == "" {
		for i := 0; i < len(tok); {
			_, size := utf8.DecodeRuneInString(tok[i:])
			if i > 0 {
				b.WriteByte(sep)
			}
			b.WriteString(tok[i : i+size])
			i += size
		}
		return
	}
	firstEmpty := false
	for k := 0; ; k++ {
		piece, rest, more := tok, "", false
		if e := strings.Index(tok, delim); e >= 0 {
			piece, rest, more = tok[:e], tok[e+len(delim):], true
		}
		if k == 0 {
			firstEmpty = piece == ""
		}
		if piece != "" {
			if k > 0 && !(k == 1 && firstEmpty) {
				b.WriteByte(sep)
			}
			b.WriteString(piece)
		}
		if !more {
			return
		}
		tok = rest
	}
}
