package conf

import (
	"strconv"
	"unicode/utf8"
)

// eof is what the scanner reports past the end of input.
const eof rune = -1

// scanner walks the source one character at a time, tracking line and
// column. It is a small value so the parser can save and restore it to
// look ahead.
type scanner struct {
	src  string
	file string
	off  int
	line int
	col  int
}

func newScanner(src, file string) scanner {
	s := scanner{src: src, file: file, line: 1, col: 1}
	if len(src) >= 3 && src[:3] == "\xef\xbb\xbf" { // UTF-8 byte order mark
		s.off = 3
	}
	return s
}

func (s *scanner) pos() Pos { return Pos{File: s.file, Line: s.line, Col: s.col} }

func (s *scanner) peek() rune {
	if s.off >= len(s.src) {
		return eof
	}
	if c := s.src[s.off]; c < utf8.RuneSelf {
		return rune(c)
	}
	r, _ := utf8.DecodeRuneInString(s.src[s.off:])
	return r
}

// peekByte returns the byte n bytes ahead, or 0 past the end.
func (s *scanner) peekByte(n int) byte {
	if s.off+n >= len(s.src) {
		return 0
	}
	return s.src[s.off+n]
}

func (s *scanner) next() rune {
	if s.off >= len(s.src) {
		return eof
	}
	r, w := rune(s.src[s.off]), 1
	if r >= utf8.RuneSelf {
		r, w = utf8.DecodeRuneInString(s.src[s.off:])
	}
	s.off += w
	if r == '\n' {
		s.line++
		s.col = 1
	} else {
		s.col++
	}
	return r
}

// isSpace is in-line white space. '\r' counts so CRLF files work.
func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\r' || r == '\f' || r == '\v'
}

func (s *scanner) skipSpaces() {
	for isSpace(s.peek()) {
		s.next()
	}
}

func (s *scanner) atComment() bool {
	r := s.peek()
	return r == '#' || (r == '/' && s.peekByte(1) == '/')
}

// skipComment consumes up to, not including, the end of the line.
func (s *scanner) skipComment() {
	for r := s.peek(); r != '\n' && r != eof; r = s.peek() {
		s.next()
	}
}

// skipBlank consumes white space, newlines and comments.
func (s *scanner) skipBlank() {
	for {
		switch r := s.peek(); {
		case isSpace(r) || r == '\n':
			s.next()
		case s.atComment():
			s.skipComment()
		default:
			return
		}
	}
}

// describeRune renders a character for error messages.
func describeRune(r rune) string {
	switch r {
	case eof:
		return "end of file"
	case '\n':
		return "newline"
	}
	return strconv.QuoteRune(r)
}
