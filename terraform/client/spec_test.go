package client

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/contrail/contrail/openapi"
)

// wireTypes pairs each of the client's wire types with the schemas of
// openapi.yaml it is sent as (request) or read from (response). The types
// are written by hand; TestWireTypesMatchSpec holds them to the spec so
// a renamed, retyped or newly required field there fails here, not in a
// user's plan.
var wireTypes = []struct {
	v       any
	schemas []string
	request bool
}{
	{Account{}, []string{"Account"}, false},
	{AccountRequest{}, []string{"AccountRequest", "AccountPatch"}, true},
	{User{}, []string{"User", "NewUser"}, false},
	{UserRequest{}, []string{"UserRequest"}, true},
	{Token{}, []string{"Token", "NewToken"}, false},
	{TokenRequest{}, []string{"TokenRequest"}, true},
	{StreamConfig{}, []string{"StreamConfig"}, true},
	{Stream{}, []string{"StreamInfo"}, false},
	{StreamSummary{}, []string{"Stream"}, false},
	{Error{}, []string{"Problem"}, false},
}

// TestWireTypesMatchSpec checks every JSON field of the wire types
// against its schema, recursively: the field is a property there, of a
// compatible type, and in what the client sends, every property the
// schema requires is a field that is always sent. (Fields the client does
// not read may be missing from a response type.)
func TestWireTypesMatchSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wireTypes {
		for _, name := range w.schemas {
			if ref := doc.Components.Schemas[name]; ref == nil || ref.Value == nil {
				t.Errorf("%T: openapi.yaml has no schema %s", w.v, name)
			}
		}
		// A response type may stand for several schemas (a user, and the
		// new user with its creds): each of its fields must be in one of
		// them at least, and fit wherever it is.
		missing := map[string]int{}
		for _, name := range w.schemas {
			ref := doc.Components.Schemas[name]
			if ref == nil || ref.Value == nil {
				continue
			}
			problems, absent := matchType(reflect.TypeOf(w.v), ref.Value, w.request, "")
			for _, p := range problems {
				t.Errorf("%T against %s%s", w.v, name, p)
			}
			for _, a := range absent {
				if w.request {
					t.Errorf("%T against %s%s: not a property of the schema", w.v, name, a)
				}
				missing[a]++
			}
		}
		for a, n := range missing {
			if n == len(w.schemas) && !w.request {
				t.Errorf("%T%s: in none of %v", w.v, a, w.schemas)
			}
		}
	}
}

// TestWireTypesListed keeps wireTypes complete: every struct type of the
// package with JSON tags is in it (items, the list wrapper, is checked
// through what it wraps).
func TestWireTypesListed(t *testing.T) {
	listed := map[string]bool{"items": true}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || rt.PkgPath() != reflect.TypeOf(Client{}).PkgPath() || listed[rt.Name()] {
			return
		}
		listed[rt.Name()] = true
		for i := range rt.NumField() {
			walk(rt.Field(i).Type)
		}
	}
	for _, w := range wireTypes {
		walk(reflect.TypeOf(w.v))
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok || listed[ts.Name.Name] {
				return true
			}
			for _, fld := range st.Fields.List {
				if fld.Tag != nil && strings.Contains(fld.Tag.Value, "json:") {
					t.Errorf("%s: %s has JSON fields but is not in wireTypes, so nothing checks it against openapi.yaml", f, ts.Name.Name)
					break
				}
			}
			return true
		})
	}
}

// matchType returns where Go type rt does not fit schema s, and the
// fields of rt that are not properties of s; at names the place, as a
// dotted path of JSON names.
func matchType(rt reflect.Type, s *openapi3.Schema, request bool, at string) (problems, absent []string) {
	for rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	s = concrete(s)
	bad := func(format string, args ...any) {
		problems = append(problems, at+": "+fmt.Sprintf(format, args...))
	}
	nested := func(rt reflect.Type, s *openapi3.Schema, at string) {
		p, a := matchType(rt, s, request, at)
		problems, absent = append(problems, p...), append(absent, a...)
	}
	switch {
	case rt == reflect.TypeOf(time.Time{}):
		if !s.Type.Is("string") || s.Format != "date-time" {
			bad("a time, where the spec has %v (format %q)", s.Type.Slice(), s.Format)
		}
	case rt.Kind() == reflect.String:
		if !s.Type.Is("string") {
			bad("a string, where the spec has %v", s.Type.Slice())
		}
	case rt.Kind() == reflect.Bool:
		if !s.Type.Is("boolean") {
			bad("a bool, where the spec has %v", s.Type.Slice())
		}
	case rt.Kind() >= reflect.Int && rt.Kind() <= reflect.Uint64:
		if !s.Type.Is("integer") {
			bad("an integer, where the spec has %v", s.Type.Slice())
		}
	case rt.Kind() == reflect.Slice:
		if !s.Type.Is("array") || s.Items == nil {
			bad("a list, where the spec has %v", s.Type.Slice())
			break
		}
		nested(rt.Elem(), s.Items.Value, at+"[]")
	case rt.Kind() == reflect.Map:
		ap := s.AdditionalProperties.Schema
		if !s.Type.Is("object") || ap == nil {
			bad("a map, where the spec has %v without additionalProperties", s.Type.Slice())
			break
		}
		nested(rt.Elem(), ap.Value, at+"{}")
	case rt.Kind() == reflect.Struct:
		if !s.Type.Is("object") {
			bad("an object, where the spec has %v", s.Type.Slice())
			break
		}
		sent := map[string]bool{}
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			prop := s.Properties[name]
			if prop == nil || prop.Value == nil {
				absent = append(absent, at+"."+name)
				continue
			}
			if !slices.Contains(strings.Split(opts, ","), "omitempty") {
				sent[name] = true
			}
			nested(f.Type, prop.Value, at+"."+name)
		}
		if request {
			for _, req := range s.Required {
				if !sent[req] {
					bad("the spec requires %s, which the client does not always send", req)
				}
			}
		}
	default:
		bad("Go type %s has no JSON counterpart here", rt)
	}
	return problems, absent
}

// concrete resolves what a property's schema composes: allOf's first
// part with a type, or oneOf's alternative that is not null (a nullable
// reference).
func concrete(s *openapi3.Schema) *openapi3.Schema {
	for s.Type == nil || len(s.Type.Slice()) == 0 {
		var next *openapi3.Schema
		for _, part := range append(slices.Clone(s.AllOf), s.OneOf...) {
			if part.Value != nil && !part.Value.Type.Is("null") {
				next = part.Value
				break
			}
		}
		if next == nil {
			return s
		}
		s = next
	}
	return s
}
