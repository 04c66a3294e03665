package conf

import (
	"encoding/hex"
	"strings"
)

// value parses one value of any kind.
func (p *parser) value() (*Value, error) {
	at := p.s.pos()
	switch r := p.s.peek(); r {
	case '[':
		return p.nested(at, p.array)
	case '{':
		return p.nested(at, p.mapValue)
	case '"':
		return p.dqString(at)
	case '\'':
		return p.sqString(at)
	case '(':
		return p.block(at)
	default:
		if !p.startsValue() {
			return nil, p.errf(at, "expected a value, found %s", describeRune(r))
		}
	}
	return p.bare(at)
}

func (p *parser) nested(at Pos, parse func(Pos) (*Value, error)) (*Value, error) {
	if p.depth >= maxNesting {
		return nil, p.errf(at, "maps and arrays nested deeper than %d levels", maxNesting)
	}
	p.depth++
	defer func() { p.depth-- }()
	return parse(at)
}

// array parses [a, b, c]; elements are separated by commas or newlines
// and a trailing comma is allowed.
func (p *parser) array(at Pos) (*Value, error) {
	p.s.next() // '['
	v := &Value{Kind: KindArray, Pos: at, Array: []*Value{}}
	for {
		p.s.skipBlank()
		switch r := p.s.peek(); r {
		case ']':
			p.s.next()
			return v, nil
		case eof:
			return nil, p.errf(at, "unterminated array: missing ']'")
		case ',':
			return nil, p.errf(p.s.pos(), "unexpected ',' in array: missing element")
		}
		elem, err := p.value()
		if err != nil {
			return nil, err
		}
		v.Array = append(v.Array, elem)
		if err := p.arrayElemEnd(); err != nil {
			return nil, err
		}
	}
}

func (p *parser) arrayElemEnd() error {
	p.s.skipSpaces()
	if p.s.atComment() {
		p.s.skipComment()
	}
	switch r := p.s.peek(); r {
	case ',', '\n':
		p.s.next()
		return nil
	case ']', eof:
		return nil
	default:
		return p.errf(p.s.pos(), "unexpected %s in array; expected ',' or ']'", describeRune(r))
	}
}

// mapValue parses { ... }. The new map is a variable scope: keys defined
// in it shadow outer ones while it is open.
func (p *parser) mapValue(at Pos) (*Value, error) {
	p.s.next() // '{'
	m := &Map{}
	p.scopes = append(p.scopes, m)
	defer func() { p.scopes = p.scopes[:len(p.scopes)-1] }()
	if err := p.mapBody(m, at, '}'); err != nil {
		return nil, err
	}
	return &Value{Kind: KindMap, Pos: at, Map: m}, nil
}

// dqString parses a double-quoted string with nats-server's escapes:
// \t \n \r \" \\ and \xHH. Like nats-server it may span lines.
func (p *parser) dqString(at Pos) (*Value, error) {
	p.s.next() // '"'
	from := p.s.off
	var b strings.Builder
	for {
		prev := p.s.off
		switch r := p.s.next(); r {
		case eof:
			return nil, p.errf(at, "unterminated string")
		case '"':
			return &Value{Kind: KindString, Pos: at, Str: b.String(), Raw: p.s.src[from:prev]}, nil
		case '\\':
			if err := p.escape(&b, at); err != nil {
				return nil, err
			}
		default:
			b.WriteString(p.s.src[prev:p.s.off]) // verbatim, even if not UTF-8
		}
	}
}

// escape decodes one escape after '\\'; open is the string's start.
func (p *parser) escape(b *strings.Builder, open Pos) error {
	at := p.s.pos()
	switch r := p.s.next(); r {
	case 't':
		b.WriteByte('\t')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case '"':
		b.WriteByte('"')
	case '\\':
		b.WriteByte('\\')
	case 'x':
		if p.s.off+2 > len(p.s.src) {
			return p.errf(at, `invalid escape: \x needs two hexadecimal digits`)
		}
		raw, err := hex.DecodeString(p.s.src[p.s.off : p.s.off+2])
		if err != nil {
			return p.errf(at, `invalid escape: \x needs two hexadecimal digits`)
		}
		p.s.next()
		p.s.next()
		b.Write(raw)
	case eof:
		return p.errf(open, "unterminated string")
	default:
		return p.errf(at, `invalid escape \%c in string; allowed are \t \n \r \" \\ \xHH`, r)
	}
	return nil
}

// sqString parses a single-quoted string, which has no escapes.
func (p *parser) sqString(at Pos) (*Value, error) {
	p.s.next() // '\''
	from := p.s.off
	for r := p.s.peek(); r != '\''; r = p.s.peek() {
		if r == eof {
			return nil, p.errf(at, "unterminated string")
		}
		p.s.next()
	}
	s := p.s.src[from:p.s.off]
	p.s.next()
	return &Value{Kind: KindString, Pos: at, Str: s, Raw: s}, nil
}

// block parses nats-server's raw multi-line string: everything after '('
// up to a line holding nothing but ')'.
func (p *parser) block(at Pos) (*Value, error) {
	p.s.next() // '('
	rest := p.s.src[p.s.off:]
	end := -1
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] == '\n' && rest[i+1] == ')' && (i+2 == len(rest) || rest[i+2] == '\n' || rest[i+2] == '\r') {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, p.errf(at, "unterminated block: missing ')' on a line of its own")
	}
	for stop := p.s.off + end + 2; p.s.off < stop; {
		p.s.next()
	}
	return &Value{Kind: KindString, Pos: at, Str: rest[:end], Raw: rest[:end]}, nil
}

// isBareEnd reports characters that end an unquoted value.
func isBareEnd(r rune) bool {
	switch r {
	case eof, ' ', '\t', '\r', '\f', '\v', '\n', ',', ';', ']', '}':
		return true
	}
	return false
}

// bare parses an unquoted value: a $variable, boolean, number, datetime
// or, failing those, a string such as 127.0.0.1:4222 or ./data.
func (p *parser) bare(at Pos) (*Value, error) {
	from := p.s.off
	for !isBareEnd(p.s.peek()) {
		p.s.next()
	}
	tok := p.s.src[from:p.s.off]
	if tok == "" {
		return nil, p.errf(at, "expected a value, found %s", describeRune(p.s.peek()))
	}
	if tok[0] == '$' && !p.noVars {
		return p.variable(at, tok[1:])
	}
	v, err := classify(tok)
	if err != nil {
		return nil, p.errf(at, "%s", err)
	}
	v.Pos = at
	return v, nil
}

// variable resolves $name: the nearest enclosing map that already defines
// name, else the environment.
func (p *parser) variable(at Pos, name string) (*Value, error) {
	if isBcrypt(name) {
		return &Value{Kind: KindString, Pos: at, Str: "$" + name, Raw: "$" + name}, nil
	}
	for i := len(p.scopes) - 1; i >= 0; i-- {
		if e, ok := p.scopes[i].Lookup(name); ok {
			e.Used = true
			v := *e.Value
			v.Pos, v.Variable = at, name
			return &v, nil
		}
	}
	if s, ok := p.sess.cfg.lookupEnv(name); ok {
		v := p.envValue(s, name)
		v.Pos, v.Variable = at, name
		return v, nil
	}
	return nil, p.errf(at, "undefined variable $%s: no earlier key or environment variable of that name", name)
}

// isBcrypt spots bcrypt hashes ($2a$...), which nats-server lets users
// write unquoted although they start with '$'.
func isBcrypt(name string) bool {
	return strings.HasPrefix(name, "2a$") || strings.HasPrefix(name, "2b$") || strings.HasPrefix(name, "2y$")
}

// envValue reads an environment variable's text as a value, as nats-server
// does, so PORT=4222 gives an integer. Variables inside it stay literal, to
// rule out reference loops; text that is not one clean value is a string.
func (p *parser) envValue(s, name string) *Value {
	sub := &parser{s: newScanner(s, "$"+name), sess: p.sess, noVars: true}
	sub.s.skipSpaces()
	if sub.startsValue() {
		if v, err := sub.value(); err == nil {
			sub.s.skipSpaces()
			if sub.s.peek() == eof {
				return v
			}
		}
	}
	return &Value{Kind: KindString, Str: s, Raw: s}
}
