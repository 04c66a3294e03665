package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

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
// it with its full path), and every value must have the field's type.
// Fields absent from the body keep the values v already holds, so callers
// pre-fill defaults (or, for PATCH, the current values).
func decode(c echo.Context, v any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBody+1))
	if err != nil {
		return invalid("body", "could not be read")
	}
	if len(body) > maxBody {
		return invalid("body", fmt.Sprintf("larger than %d bytes", maxBody))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("body", "a JSON object is required")
	}
	var raw any
	if err := json.Unmarshal(body, &raw); err != nil {
		return invalid("body", "not valid JSON: "+err.Error())
	}
	if _, ok := raw.(map[string]any); !ok {
		return invalid("body", "must be a JSON object")
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
