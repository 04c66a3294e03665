package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// DefaultMaxIncludeDepth bounds include nesting when Parser leaves it
	// unset, so a file that includes itself fails instead of looping.
	DefaultMaxIncludeDepth = 10
	// maxIncludeFiles bounds the files one parse may load, so a few
	// includes repeated at every level cannot fan out exponentially.
	maxIncludeFiles = 1000
	// maxNesting bounds map/array nesting so hostile input cannot make
	// the recursive parser run away.
	maxNesting = 100
)

// Parser holds the hooks a parse uses to reach the outside world. The zero
// value reads real files and the real environment; tests and fuzzing swap
// in fakes.
type Parser struct {
	// ReadFile loads included files; nil means os.ReadFile.
	ReadFile func(name string) ([]byte, error)
	// LookupEnv resolves $NAME when no enclosing key defines NAME; nil
	// means os.LookupEnv.
	LookupEnv func(key string) (string, bool)
	// MaxIncludeDepth bounds include nesting; 0 means
	// DefaultMaxIncludeDepth.
	MaxIncludeDepth int
}

// Parse parses a configuration with the default Parser. name is used in
// positions and as the base directory for relative includes.
func Parse(data []byte, name string) (*Map, error) {
	return (&Parser{}).Parse(data, name)
}

// ParseFile reads and parses a configuration file with the default Parser.
func ParseFile(path string) (*Map, error) {
	return (&Parser{}).ParseFile(path)
}

// Parse parses data as a configuration file called name. Relative includes
// resolve against name's directory.
func (p *Parser) Parse(data []byte, name string) (*Map, error) {
	sess := &session{cfg: p}
	return sess.parser(string(data), name, 0).document()
}

// ParseFile reads path and parses it.
func (p *Parser) ParseFile(path string) (*Map, error) {
	data, err := p.readFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return p.Parse(data, path)
}

func (p *Parser) readFile(name string) ([]byte, error) {
	if p.ReadFile != nil {
		return p.ReadFile(name)
	}
	return os.ReadFile(name)
}

func (p *Parser) lookupEnv(key string) (string, bool) {
	if p.LookupEnv != nil {
		return p.LookupEnv(key)
	}
	return os.LookupEnv(key)
}

func (p *Parser) maxIncludeDepth() int {
	if p.MaxIncludeDepth > 0 {
		return p.MaxIncludeDepth
	}
	return DefaultMaxIncludeDepth
}

// session is state shared by a file and everything it includes.
type session struct {
	cfg   *Parser
	loads int
}

func (sess *session) parser(src, file string, incDepth int) *parser {
	return &parser{s: newScanner(src, file), sess: sess, incDepth: incDepth}
}

// parser is a recursive-descent parser over one source text.
type parser struct {
	s        scanner
	sess     *session
	scopes   []*Map // enclosing maps, innermost last, for $variables
	depth    int    // map/array nesting
	incDepth int    // include nesting
	noVars   bool   // environment values: "$" is literal text
}

func (p *parser) errf(at Pos, format string, args ...any) error {
	return &Error{Pos: at, Msg: fmt.Sprintf(format, args...)}
}

// document parses a whole file. Like nats-server, it accepts a file whose
// content is wrapped in one pair of braces, JSON style.
func (p *parser) document() (*Map, error) {
	top := &Map{}
	p.scopes = append(p.scopes, top)
	p.s.skipBlank()
	if p.s.peek() != '{' {
		return top, p.mapBody(top, Pos{}, eof)
	}
	open := p.s.pos()
	p.s.next()
	if err := p.mapBody(top, open, '}'); err != nil {
		return nil, err
	}
	p.s.skipBlank()
	if r := p.s.peek(); r != eof {
		return nil, p.errf(p.s.pos(), "unexpected %s after the closing '}'", describeRune(r))
	}
	return top, nil
}

// mapBody parses entries until closer ('}' or eof), consuming it.
func (p *parser) mapBody(m *Map, open Pos, closer rune) error {
	for {
		p.s.skipBlank()
		switch r := p.s.peek(); {
		case r == closer:
			p.s.next()
			return nil
		case r == eof:
			return p.errf(open, "unterminated map: missing '}'")
		case r == '}':
			return p.errf(p.s.pos(), "unexpected '}' with no open map")
		}
		if err := p.entry(m); err != nil {
			return err
		}
		if err := p.entryEnd(closer); err != nil {
			return err
		}
	}
}

func (p *parser) entry(m *Map) error {
	at := p.s.pos()
	key, bare, err := p.key()
	if err != nil {
		return err
	}
	if bare && strings.EqualFold(key, "include") && p.atIncludePath() {
		return p.include(m, at)
	}
	if err := p.separator(key); err != nil {
		return err
	}
	v, err := p.value()
	if err != nil {
		return err
	}
	m.set(&Entry{Key: key, KeyPos: at, Value: v})
	return nil
}

// isKeyEnd reports characters that end a bare key.
func isKeyEnd(r rune) bool {
	switch r {
	case eof, ' ', '\t', '\r', '\f', '\v', '\n', ':', '=', '{', '}', '[', ']', ',', ';', '#', '"', '\'':
		return true
	}
	return false
}

// key reads a bare or quoted key; bare reports whether it was unquoted,
// since only a bare `include` is the include directive.
func (p *parser) key() (key string, bare bool, err error) {
	at := p.s.pos()
	if q := p.s.peek(); q == '"' || q == '\'' {
		p.s.next()
		from := p.s.off
		for r := p.s.peek(); r != q; r = p.s.peek() {
			if r == eof || r == '\n' {
				return "", false, p.errf(at, "unterminated quoted key")
			}
			p.s.next()
		}
		key = p.s.src[from:p.s.off]
		p.s.next()
		return key, false, nil
	}
	from := p.s.off
	for !isKeyEnd(p.s.peek()) {
		p.s.next()
	}
	if p.s.off == from {
		return "", false, p.errf(at, "expected a key, found %s", describeRune(p.s.peek()))
	}
	return p.s.src[from:p.s.off], true, nil
}

// separator consumes what lies between a key and its value: ':' or '=',
// or white space. Newlines may come before a '{', as in
//
//	tls
//	{ ... }
func (p *parser) separator(key string) error {
	p.s.skipSpaces()
	if r := p.s.peek(); r == ':' || r == '=' {
		p.s.next()
		p.s.skipSpaces()
	}
	if p.s.peek() == '\n' {
		save := p.s
		p.s.skipBlank()
		if p.s.peek() != '{' {
			p.s = save
		}
	}
	if !p.startsValue() {
		return p.errf(p.s.pos(), "missing value for key %q", key)
	}
	return nil
}

// startsValue reports whether the next character can begin a value.
func (p *parser) startsValue() bool {
	switch p.s.peek() {
	case eof, '\n', ',', ';', '}', ']':
		return false
	}
	return !p.s.atComment()
}

// entryEnd consumes what may follow a map entry: a comment, then a
// newline, ';' or ','. The closer is left for mapBody.
func (p *parser) entryEnd(closer rune) error {
	p.s.skipSpaces()
	if p.s.atComment() {
		p.s.skipComment()
	}
	switch r := p.s.peek(); {
	case r == '\n' || r == ';' || r == ',':
		p.s.next()
		return nil
	case r == closer || r == eof:
		return nil
	default:
		return p.errf(p.s.pos(), "unexpected %s after value; expected a newline, ';' or ','", describeRune(r))
	}
}

// atIncludePath reports whether a bare "include" is the directive: it is
// when a path, not a separator or block, follows on the same line.
func (p *parser) atIncludePath() bool {
	save := p.s
	defer func() { p.s = save }()
	if !isSpace(p.s.peek()) {
		return false
	}
	p.s.skipSpaces()
	switch p.s.peek() {
	case ':', '=', '{', '[':
		return false
	}
	return p.startsValue()
}

// include parses `include path` and merges the included file's keys into
// m. As in nats-server the included file is parsed on its own: it does
// not see the includer's variables, but its keys become visible after.
func (p *parser) include(m *Map, at Pos) error {
	p.s.skipSpaces()
	name, err := p.includePath()
	if err != nil {
		return err
	}
	child, err := p.loadInclude(name, at)
	if err != nil {
		return err
	}
	for _, e := range child.entries {
		m.set(e)
	}
	return nil
}

func (p *parser) includePath() (string, error) {
	at := p.s.pos()
	if q := p.s.peek(); q == '"' || q == '\'' {
		p.s.next()
		from := p.s.off
		for r := p.s.peek(); r != q; r = p.s.peek() {
			if r == eof || r == '\n' {
				return "", p.errf(at, "unterminated include path")
			}
			p.s.next()
		}
		name := p.s.src[from:p.s.off]
		p.s.next()
		if name == "" {
			return "", p.errf(at, "include: empty file name")
		}
		return name, nil
	}
	from := p.s.off
	for r := p.s.peek(); !isSpace(r) && r != '\n' && r != eof && r != ';' && r != ',' && r != '}'; r = p.s.peek() {
		p.s.next()
	}
	return p.s.src[from:p.s.off], nil
}

func (p *parser) loadInclude(name string, at Pos) (*Map, error) {
	if limit := p.sess.cfg.maxIncludeDepth(); p.incDepth >= limit {
		return nil, p.errf(at, "include %q: includes nested deeper than %d levels (an include cycle?)", name, limit)
	}
	if p.sess.loads >= maxIncludeFiles {
		return nil, p.errf(at, "include %q: more than %d included files", name, maxIncludeFiles)
	}
	p.sess.loads++
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(p.s.file), path)
	}
	data, err := p.sess.cfg.readFile(path)
	if err != nil {
		return nil, &Error{Pos: at, Msg: fmt.Sprintf("include %q", name), Err: err}
	}
	m, err := p.sess.parser(string(data), path, p.incDepth+1).document()
	if err != nil {
		return nil, &Error{Pos: at, Msg: fmt.Sprintf("include %q", name), Err: err}
	}
	return m, nil
}
