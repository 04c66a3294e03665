package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func envParser(env map[string]string) *Parser {
	return &Parser{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}}
}

func TestVariables(t *testing.T) {
	env := map[string]string{
		"PORT":   "4222",
		"HOST":   "10.0.0.1",
		"SPACED": "two words",
		"MAP":    "{ a: 1 }",
		"SELF":   "$SELF",
		"EMPTY":  "",
		"SIZE":   "1GB",
	}
	tests := []struct {
		name string
		src  string
		want map[string]any
	}{
		{"earlier key", "P: 4222\nport: $P", map[string]any{"P": int64(4222), "port": int64(4222)}},
		{"outer scope", "P: 1\nm { v: $P }", map[string]any{"P": int64(1), "m": map[string]any{"v": int64(1)}}},
		{"inner shadows outer", "P: 1\nm { P: 2, v: $P }", map[string]any{"P": int64(1), "m": map[string]any{"P": int64(2), "v": int64(2)}}},
		{"in array", "P: 1\na: [$P, $P]", map[string]any{"P": int64(1), "a": []any{int64(1), int64(1)}}},
		{"map variable", "T { v: true }\ntls: $T", map[string]any{"T": map[string]any{"v": true}, "tls": map[string]any{"v": true}}},
		{"key beats env", "PORT: 1\nport: $PORT", map[string]any{"PORT": int64(1), "port": int64(1)}},
		{"env integer", "port: $PORT", map[string]any{"port": int64(4222)}},
		{"env string", "host: $HOST", map[string]any{"host": "10.0.0.1"}},
		{"env size", "s: $SIZE", map[string]any{"s": int64(1 << 30)}},
		{"env with spaces is a string", "s: $SPACED", map[string]any{"s": "two words"}},
		{"env map", "m: $MAP", map[string]any{"m": map[string]any{"a": int64(1)}}},
		{"env referring to itself stays literal", "s: $SELF", map[string]any{"s": "$SELF"}},
		{"empty env", "s: $EMPTY", map[string]any{"s": ""}},
		{"quoted dollar is literal", `s: "$PORT"`, map[string]any{"s": "$PORT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := envParser(env).Parse([]byte(tt.src), "v.conf")
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Interface(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestVariableMetadata(t *testing.T) {
	m, err := envParser(map[string]string{"E": "x"}).Parse([]byte("P: 4222\n\nport: $P\nother: $E\nunused: 1\n"), "v.conf")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.Lookup("P")
	if !p.Used {
		t.Error("P should be marked Used")
	}
	if u, _ := m.Lookup("unused"); u.Used {
		t.Error("unused should not be marked Used")
	}
	port, _ := m.Lookup("port")
	if port.Value.Variable != "P" || port.Value.Pos.Line != 3 || port.Value.Pos.Col != 7 {
		t.Errorf("port value: variable %q at %v, want P at 3:7", port.Value.Variable, port.Value.Pos)
	}
	if p.Value.Pos.Line != 1 {
		t.Errorf("the definition kept its own position, got %v", p.Value.Pos)
	}
	other, _ := m.Lookup("other")
	if other.Value.Variable != "E" || other.Value.Pos.Line != 4 {
		t.Errorf("env value: variable %q at %v", other.Value.Variable, other.Value.Pos)
	}
}

func TestVariableNotYetDefined(t *testing.T) {
	_, err := noEnv.Parse([]byte("a: $B\nB: 1\n"), "v.conf")
	if err == nil || !strings.Contains(err.Error(), "v.conf:1:4: undefined variable $B") {
		t.Fatalf("err = %v", err)
	}
}

func TestIncludeFiles(t *testing.T) {
	m, err := noEnv.ParseFile(filepath.Join("testdata", "include", "main.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"port":       int64(4222),
		"CHILD_NAME": "from-child",
		"deep":       true,
		"limits":     map[string]any{"max_payload": int64(1 << 20)},
		"copied":     "from-child",
	}
	if got := m.Interface(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	deep, _ := m.Lookup("deep")
	if wantFile := filepath.Join("testdata", "include", "sub", "grandchild.conf"); deep.KeyPos.File != wantFile || deep.KeyPos.Line != 1 {
		t.Errorf("deep at %v, want %s:1", deep.KeyPos, wantFile)
	}
}

func TestIncludeErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"cycle", "self.conf", []string{"nested deeper than 10 levels"}},
		{"error inside include", "badinclude.conf", []string{
			filepath.Join("testdata", "include", "badinclude.conf") + `:2:1: include "sub/bad.conf"`,
			filepath.Join("testdata", "include", "sub", "bad.conf") + ":2:9: unterminated string",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := noEnv.ParseFile(filepath.Join("testdata", "include", tt.file))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestIncludeMissingIsNotExist(t *testing.T) {
	_, err := noEnv.Parse([]byte("include nope.conf"), filepath.Join(t.TempDir(), "main.conf"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Pos.Line != 1 {
		t.Fatalf("err = %#v, want *Error at line 1", err)
	}
}

func TestIncludeFanOutIsBounded(t *testing.T) {
	// Every file includes the next level twice: without a cap on loaded
	// files this is 2^depth parses.
	p := &Parser{
		MaxIncludeDepth: 30,
		LookupEnv:       noEnv.LookupEnv,
		ReadFile: func(name string) ([]byte, error) {
			var n int
			fmt.Sscanf(filepath.Base(name), "x%d.conf", &n)
			if n >= 20 {
				return []byte("leaf: 1\n"), nil
			}
			return []byte(fmt.Sprintf("include x%d.conf\ninclude x%d.conf\n", n+1, n+1)), nil
		},
	}
	_, err := p.Parse([]byte("include x0.conf\n"), "root.conf")
	if err == nil || !strings.Contains(err.Error(), "more than 1000 included files") {
		t.Fatalf("err = %v", err)
	}
}

func TestIncludeAbsoluteAndCustomDepth(t *testing.T) {
	var seen []string
	p := &Parser{
		MaxIncludeDepth: 1,
		ReadFile: func(name string) ([]byte, error) {
			seen = append(seen, name)
			return []byte("x: 1\n"), nil
		},
	}
	abs := filepath.Join(t.TempDir(), "abs.conf")
	if _, err := p.Parse([]byte("include "+abs), "dir/main.conf"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]byte("include rel.conf"), "dir/main.conf"); err != nil {
		t.Fatal(err)
	}
	if want := []string{abs, filepath.Join("dir", "rel.conf")}; !reflect.DeepEqual(seen, want) {
		t.Errorf("read %v, want %v", seen, want)
	}
	p.ReadFile = func(string) ([]byte, error) { return []byte("include again.conf"), nil }
	if _, err := p.Parse([]byte("include a.conf"), "m.conf"); err == nil || !strings.Contains(err.Error(), "deeper than 1 levels") {
		t.Errorf("depth 1: err = %v", err)
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "none.conf"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultParserUsesEnvironment(t *testing.T) {
	t.Setenv("CONTRAIL_CONF_TEST_PORT", "5222")
	m, err := Parse([]byte("port: $CONTRAIL_CONF_TEST_PORT"), "")
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := m.Lookup("port"); e.Value.Int != 5222 {
		t.Errorf("port = %s", e.Value.Describe())
	}
}
