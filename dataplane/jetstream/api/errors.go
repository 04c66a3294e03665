package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

//go:generate go run ./internal/errgen -in errors.txt -out errors_gen.go

// ErrorCode is a JetStream err_code. Clients branch on the number, never on
// the text, so it is the identity of an error; it also implements error so
// that errors.Is(err, CodeStreamNotFound) works on anything wrapping an
// *Error.
type ErrorCode uint16

// Error returns the code's description template, placeholders unfilled,
// which is enough to say what kind of failure a bare code stands for.
func (c ErrorCode) Error() string {
	if s, ok := errorSpecs[c]; ok {
		return s.desc
	}
	return fmt.Sprintf("unknown JetStream error %d", uint16(c))
}

// Status returns the HTTP-like code nats-server pairs with c, or 500 for a
// code missing from the table.
func (c ErrorCode) Status() int {
	if s, ok := errorSpecs[c]; ok {
		return s.status
	}
	return 500
}

// Name returns our name for c as errors.txt spells it, for logs and metrics
// labels where a bare number says little.
func (c ErrorCode) Name() string {
	if s, ok := errorSpecs[c]; ok {
		return s.name
	}
	return ""
}

// Codes lists every code in the table, so tests and docs can walk it.
func Codes() []ErrorCode {
	out := make([]ErrorCode, 0, len(errorSpecs))
	for c := range errorSpecs {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// errorSpec is one row of errors.txt.
type errorSpec struct {
	status int
	name   string
	desc   string
}

// Error is a JetStream API error exactly as it travels inside a reply's
// "error" member: {"code":404,"err_code":10059,"description":"stream not found"}.
// Handlers return it from the checks in this package and put it in the
// response envelope unchanged.
type Error struct {
	// Code is the HTTP-like status (400, 404, 500, 503…).
	Code int `json:"code"`
	// ErrCode is the JetStream-specific code clients branch on.
	ErrCode ErrorCode `json:"err_code,omitempty"`
	// Description is the text users (and some tools) read and match.
	Description string `json:"description,omitempty"`
}

// Error formats the error the way nats-server logs it: "description (code)".
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d)", e.Description, uint16(e.ErrCode))
}

// Is lets errors.Is match an *Error by err_code, against either a bare
// ErrorCode or another *Error: two "stream not found" errors are the same
// error whatever their text.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case ErrorCode:
		return e.ErrCode == t
	case *Error:
		return t != nil && e.ErrCode == t.ErrCode
	}
	return false
}

// newError fills the template for code with the placeholder/value pairs in
// kv. Values are rendered as nats-server renders them: strings as they are,
// errors by their Error text, anything else with %v.
func newError(code ErrorCode, kv ...any) *Error {
	s, ok := errorSpecs[code]
	if !ok {
		return &Error{Code: 500, ErrCode: code, Description: code.Error()}
	}
	desc := s.desc
	if len(kv) > 0 {
		pairs := make([]string, 0, len(kv))
		for i := 0; i+1 < len(kv); i += 2 {
			pairs = append(pairs, kv[i].(string), fmt.Sprint(kv[i+1]))
		}
		desc = strings.NewReplacer(pairs...).Replace(desc)
	}
	return &Error{Code: s.status, ErrCode: code, Description: desc}
}

// Prefer returns the *Error inside err if there is one, and fallback
// otherwise. It mirrors the nats-server rule that a specific API error
// raised deep inside an operation reaches the client unchanged, while any
// other failure is reported as the operation's generic error.
func Prefer(err error, fallback *Error) *Error {
	var ae *Error
	if errors.As(err, &ae) && ae != nil {
		return ae
	}
	return fallback
}
