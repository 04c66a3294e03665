// Package conf parses the nats-server configuration file format into a tree
// of values that remember where they were written, so the code that gives
// the tree meaning can point users at the exact line of a mistake.
//
// The syntax follows nats-server: `key: value`, `key = value` or
// `key value`; `key { ... }` maps; `[a, b]` arrays; `#` and `//` comments;
// optional `;` or `,` after a value; quoted and bare strings; integers with
// size suffixes; floats; booleans; Zulu datetimes; `$NAME` variables; and
// `include file.conf`. Where nats-server would fail on an oddly formed bare
// value (for example "1m30s" or "-x") this package reads it as a string and
// leaves the judgement to the caller, which knows what the key expects.
package conf

import (
	"fmt"
	"strconv"
	"time"
)

// Kind says which field of a Value holds its content.
type Kind uint8

// The kinds of value a configuration file can hold.
const (
	KindString Kind = iota + 1
	KindInt
	KindFloat
	KindBool
	KindTime
	KindArray
	KindMap
)

var kindNames = [...]string{
	KindString: "string",
	KindInt:    "integer",
	KindFloat:  "float",
	KindBool:   "boolean",
	KindTime:   "datetime",
	KindArray:  "array",
	KindMap:    "map",
}

// String names the kind the way error messages talk about it.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Pos locates something in a configuration file so errors can name it.
// Line and Col count from 1; Col counts characters, not bytes.
type Pos struct {
	File string
	Line int
	Col  int
}

// String renders the position as file:line:col, the form editors and
// terminals recognise; the file is left out when it is unknown.
func (p Pos) String() string {
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Value is one parsed value. Only the field matching Kind is meaningful;
// the others are zero.
type Value struct {
	Kind Kind
	// Pos is where the value starts (for a $variable, where it was used).
	Pos Pos
	// Raw is a scalar's source text without quotes. It lets a caller tell
	// an unquoted `2m` (the integer 2000000 to nats-server) from 2000000.
	Raw string
	// Variable names the $variable the value came through, or is empty.
	Variable string

	Str   string
	Int   int64
	Float float64
	Bool  bool
	Time  time.Time
	Array []*Value
	Map   *Map
}

// Interface returns the value as plain Go data (string, int64, float64,
// bool, time.Time, []any, map[string]any), for callers and tests that do
// not need positions.
func (v *Value) Interface() any {
	switch v.Kind {
	case KindString:
		return v.Str
	case KindInt:
		return v.Int
	case KindFloat:
		return v.Float
	case KindBool:
		return v.Bool
	case KindTime:
		return v.Time
	case KindArray:
		out := make([]any, len(v.Array))
		for i, e := range v.Array {
			out[i] = e.Interface()
		}
		return out
	case KindMap:
		return v.Map.Interface()
	}
	return nil
}

// Describe renders the value for "expected X, got Y" messages, showing
// how an integer was written when a size suffix changed its meaning.
func (v *Value) Describe() string {
	switch v.Kind {
	case KindString:
		return "string " + strconv.Quote(truncate(v.Str, 60))
	case KindInt:
		n := strconv.FormatInt(v.Int, 10)
		if v.Raw != "" && v.Raw != n {
			return "integer " + n + " (written " + v.Raw + ")"
		}
		return "integer " + n
	case KindFloat:
		return "float " + strconv.FormatFloat(v.Float, 'g', -1, 64)
	case KindBool:
		return "boolean " + strconv.FormatBool(v.Bool)
	case KindTime:
		return "datetime " + v.Time.Format(time.RFC3339)
	}
	return v.Kind.String()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}

// Entry is one key of a map with its value. Keys keep the case they were
// written in; nats-server compares them case-insensitively, so callers
// usually should too.
type Entry struct {
	Key    string
	KeyPos Pos
	Value  *Value
	// Used is set when the key was referenced as a $variable. nats-server
	// does not report such keys as unknown, since they exist to be used.
	Used bool
}

// Map is an ordered map: entries keep file order so that errors come out
// in a stable, readable order. A later duplicate key replaces the earlier
// value in place, as in nats-server where the last assignment wins.
type Map struct {
	entries []*Entry
	index   map[string]int
}

// Len is the number of distinct keys.
func (m *Map) Len() int { return len(m.entries) }

// Entries returns the entries in file order. The slice is a copy; the
// entries are shared with the map.
func (m *Map) Entries() []*Entry {
	return append([]*Entry(nil), m.entries...)
}

// Lookup finds an entry by exact (case-sensitive) key, the way $variable
// references resolve.
func (m *Map) Lookup(key string) (*Entry, bool) {
	i, ok := m.index[key]
	if !ok {
		return nil, false
	}
	return m.entries[i], true
}

// Interface returns the map as a plain map[string]any.
func (m *Map) Interface() map[string]any {
	out := make(map[string]any, len(m.entries))
	for _, e := range m.entries {
		out[e.Key] = e.Value.Interface()
	}
	return out
}

func (m *Map) set(e *Entry) {
	if i, ok := m.index[e.Key]; ok {
		m.entries[i] = e
		return
	}
	if m.index == nil {
		m.index = make(map[string]int)
	}
	m.index[e.Key] = len(m.entries)
	m.entries = append(m.entries, e)
}

// Error is a syntax error, or a failed include, at a position. Err holds
// the cause when there is one (the include's own error, an I/O error).
type Error struct {
	Pos Pos
	Msg string
	Err error
}

// Error renders "file:line:col: message[: cause]".
func (e *Error) Error() string {
	s := e.Pos.String() + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }
