package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// maxBody bounds request bodies.
const maxBody = 1 << 20

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// decode reads the JSON body into v strictly: the body must be one JSON
// object, every field must be one v has (an unknown field is a 400 naming
// it with its full path), no field may appear twice, every string must be
// valid UTF-8 (lone surrogates included), and every value must have the
// field's type. A body over maxBody is a 413. Fields absent from the body
// keep the values v already holds, so callers pre-fill defaults (or, for
// PATCH, the current values).
func decode(c echo.Context, v any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBody+1))
	if err != nil {
		return invalid("body", "could not be read")
	}
	if len(body) > maxBody {
		return tooLarge("body", fmt.Sprintf("larger than %d bytes", maxBody))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("body", "a JSON object is required")
	}
	if err := checkJSON(body); err != nil {
		return err
	}
	var raw any // an object: checkJSON refused anything else
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a number too large for float64 is still JSON
	if err := dec.Decode(&raw); err != nil {
		return invalid("body", "not valid JSON: "+err.Error())
	}
	if field := unknownField(raw, reflect.TypeOf(v), ""); field != "" {
		return invalid(field, "unknown field")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return invalid(field, fmt.Sprintf("must be %s, got %s", typeName(te.Type), te.Value))
		}
		return invalid("body", err.Error())
	}
	return nil
}

// maxDepth bounds how deeply a body nests; the API's bodies nest four.
const maxDepth = 32

// checkJSON walks the body's tokens and refuses what encoding/json would
// quietly accept: a key given twice (the last would win, where another
// parser might take the first), invalid UTF-8 or a lone surrogate in a
// key or a string (both read as U+FFFD, which is refused with them), and
// deep nesting. Errors name the field as a dotted path.
func checkJSON(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*jsonFrame
	values := 0 // top-level values read
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return invalid("body", "not valid JSON: "+err.Error())
		}
		if len(stack) == 0 && values > 0 {
			return invalid("body", "not valid JSON: data after the top-level value")
		}
		if len(stack) == 0 && tok != json.Delim('{') {
			return invalid("body", "must be a JSON object")
		}
		var top *jsonFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && !top.keyed {
			// Key position: a key or the object's end.
			if tok == json.Delim('}') {
				stack = valueDone(stack[:len(stack)-1], &values)
				continue
			}
			k, _ := tok.(string)
			if k == "" {
				where := top.path
				if where == "" {
					where = "body"
				}
				return invalid(where, "has a field with an empty name")
			}
			top.key, top.keyed = k, true
			if strings.ContainsRune(k, utf8.RuneError) {
				return invalid(top.field(), "field names must be valid UTF-8")
			}
			if top.seen[k] {
				return invalid(top.field(), "given more than once")
			}
			top.seen[k] = true
			continue
		}
		field := "body"
		if top != nil {
			field = top.field()
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxDepth {
				return invalid(field, fmt.Sprintf("nested more than %d deep", maxDepth))
			}
			path := ""
			if top != nil {
				path = field
			}
			stack = append(stack, &jsonFrame{path: path, object: tok == json.Delim('{'), seen: map[string]bool{}})
			continue
		case json.Delim(']'):
			stack = valueDone(stack[:len(stack)-1], &values)
			continue
		}
		if str, ok := tok.(string); ok && strings.ContainsRune(str, utf8.RuneError) {
			return invalid(field, "must be valid UTF-8 text (no invalid bytes or lone surrogates)")
		}
		stack = valueDone(stack, &values)
	}
	return nil
}

// jsonFrame is an object or array checkJSON is inside.
type jsonFrame struct {
	path   string // the container's own dotted path; "" for the body
	object bool
	index  int             // arrays: the element being read
	seen   map[string]bool // objects: keys read so far
	key    string          // objects: the key whose value comes next
	keyed  bool            // objects: key read, value not yet
}

// field is the dotted path of the value being read in f.
func (f *jsonFrame) field() string {
	if !f.object {
		return fmt.Sprintf("%s[%d]", f.path, f.index)
	}
	if f.path == "" {
		return f.key
	}
	return f.path + "." + f.key
}

// valueDone records that a value ended in the innermost container (or
// at the top level) and returns the stack.
func valueDone(stack []*jsonFrame, values *int) []*jsonFrame {
	if len(stack) == 0 {
		*values++
		return stack
	}
	top := stack[len(stack)-1]
	if top.object {
		top.keyed = false
	} else {
		top.index++
	}
	return stack
}

// typeName says a Go type the way a JSON user reads it.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// unknownField returns the dotted path of the first field in the decoded
// JSON value that type t does not have, or "".
func unknownField(v any, t reflect.Type, prefix string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return ""
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sortStrings(keys)
		for _, k := range keys {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				return path
			}
			if f := unknownField(val[k], ft, path); f != "" {
				return f
			}
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return ""
		}
		for i, e := range val {
			if f := unknownField(e, t.Elem(), fmt.Sprintf("%s[%d]", prefix, i)); f != "" {
				return f
			}
		}
	}
	return ""
}

// jsonFields maps a struct's JSON names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
