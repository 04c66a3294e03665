package conf

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// noEnv is a Parser that sees an empty environment, so tests do not
// depend on the machine they run on.
var noEnv = &Parser{LookupEnv: func(string) (string, bool) { return "", false }}

func mustParse(t *testing.T, src string) *Map {
	t.Helper()
	m, err := noEnv.Parse([]byte(src), "test.conf")
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return m
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]any
	}{
		{"colon", "port: 4222", map[string]any{"port": int64(4222)}},
		{"equals", "port = 4222", map[string]any{"port": int64(4222)}},
		{"space", "port 4222", map[string]any{"port": int64(4222)}},
		{"tab and semicolon", "port\t4222;", map[string]any{"port": int64(4222)}},
		{"trailing comma", "a: 1,\nb: 2,", map[string]any{"a": int64(1), "b": int64(2)}},
		{"several per line", "a: 1; b: 2, c: 3", map[string]any{"a": int64(1), "b": int64(2), "c": int64(3)}},
		{"negative", "n: -12", map[string]any{"n": int64(-12)}},
		{"float", "f: 1.5", map[string]any{"f": 1.5}},
		{"negative float", "f: -0.25", map[string]any{"f": -0.25}},
		{"ip is string", "host: 127.0.0.1", map[string]any{"host": "127.0.0.1"}},
		{"ip:port is string", "listen: 0.0.0.0:4222", map[string]any{"listen": "0.0.0.0:4222"}},
		{"host:port", "listen: localhost:4222", map[string]any{"listen": "localhost:4222"}},
		{"ipv6", `listen: "[::1]:4222"`, map[string]any{"listen": "[::1]:4222"}},
		{"path", "dir: ./data", map[string]any{"dir": "./data"}},
		{"url is not a comment", "url: nats://h:4222", map[string]any{"url": "nats://h:4222"}},
		{"hash inside bare", "pw: a#b", map[string]any{"pw": "a#b"}},
		{"duration quoted", `d: "1h30m"`, map[string]any{"d": "1h30m"}},
		{"duration bare seconds", "d: 10s", map[string]any{"d": "10s"}},
		{"duration bare compound", "d: 1m30s", map[string]any{"d": "1m30s"}},
		{"bare 2m is a size", "d: 2m", map[string]any{"d": int64(2000000)}},
		{"starts with digit", "name: 3rd", map[string]any{"name": "3rd"}},
		{"lone dash", "x: -", map[string]any{"x": "-"}},
		{"dash word", "x: -abc", map[string]any{"x": "-abc"}},
		{"true", "a: true", map[string]any{"a": true}},
		{"yes", "a: yes", map[string]any{"a": true}},
		{"on", "a: ON", map[string]any{"a": true}},
		{"false", "a: False", map[string]any{"a": false}},
		{"no", "a: no", map[string]any{"a": false}},
		{"off", "a: off", map[string]any{"a": false}},
		{"quoted bool is string", `a: "true"`, map[string]any{"a": "true"}},
		{"dq escapes", `s: "a\tb\nc\"d\\e\x41"`, map[string]any{"s": "a\tb\nc\"d\\eA"}},
		{"sq no escapes", `s: 'a\tb'`, map[string]any{"s": `a\tb`}},
		{"dq multi-line", "s: \"a\nb\"", map[string]any{"s": "a\nb"}},
		{"empty string", `s: ""`, map[string]any{"s": ""}},
		{"unicode", "s: héllo", map[string]any{"s": "héllo"}},
		{"datetime", "t: 2024-01-02T03:04:05Z", map[string]any{"t": time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}},
		{"date only is string", "t: 2024-01-02", map[string]any{"t": "2024-01-02"}},
		{"quoted keys", `"a b": 1, 'c': 2`, map[string]any{"a b": int64(1), "c": int64(2)}},
		{"array commas", "a: [1, two, 3.5]", map[string]any{"a": []any{int64(1), "two", 3.5}}},
		{"array newlines", "a: [\n  1\n  2\n]", map[string]any{"a": []any{int64(1), int64(2)}}},
		{"array trailing comma and comments", "a: [\n 1, # one\n 2, // two\n]", map[string]any{"a": []any{int64(1), int64(2)}}},
		{"empty array", "a: []", map[string]any{"a": []any{}}},
		{"nested arrays", "a: [[1], [2, [3]]]", map[string]any{"a": []any{[]any{int64(1)}, []any{int64(2), []any{int64(3)}}}}},
		{"map no separator", "tls { verify: true }", map[string]any{"tls": map[string]any{"verify": true}}},
		{"map with colon", "tls: { verify: true }", map[string]any{"tls": map[string]any{"verify": true}}},
		{"map brace touching key", "tls{verify: true}", map[string]any{"tls": map[string]any{"verify": true}}},
		{"map brace on next line", "tls\n{\n verify: true\n}", map[string]any{"tls": map[string]any{"verify": true}}},
		{"map brace after colon and blank lines", "tls:\n\n# c\n{ verify: true }", map[string]any{"tls": map[string]any{"verify": true}}},
		{"map inline commas", "m {a: 1, b: 2}", map[string]any{"m": map[string]any{"a": int64(1), "b": int64(2)}}},
		{"empty map", "m {}", map[string]any{"m": map[string]any{}}},
		{"nested maps", "a { b { c: 1 } }", map[string]any{"a": map[string]any{"b": map[string]any{"c": int64(1)}}}},
		{"array of maps", "u: [{n: a}, {n: b}]", map[string]any{"u": []any{map[string]any{"n": "a"}, map[string]any{"n": "b"}}}},
		{"comments", "# top\n// slash\nport: 1 # trailing\nhost: h // trailing\n", map[string]any{"port": int64(1), "host": "h"}},
		{"braced document", "{\n  port: 1\n  host: h\n}\n", map[string]any{"port": int64(1), "host": "h"}},
		{"crlf", "port: 1\r\nhost: h\r\n", map[string]any{"port": int64(1), "host": "h"}},
		{"bom", "\ufeffport: 1", map[string]any{"port": int64(1)}},
		{"block string", "jwt: (\nline1\nline2\n)\nport: 1", map[string]any{"jwt": "\nline1\nline2", "port": int64(1)}},
		{"empty document", "", map[string]any{}},
		{"only comments", "# nothing\n\n// here\n", map[string]any{}},
		{"duplicate last wins", "port: 1\nport: 2", map[string]any{"port": int64(2)}},
		{"include as ordinary key", "include: 5", map[string]any{"include": int64(5)}},
		{"include key with spaced separator", "include = 5", map[string]any{"include": int64(5)}},
		{"include as map name", "include { a: 1 }", map[string]any{"include": map[string]any{"a": int64(1)}}},
		{"quoted include is a key", `"include" x`, map[string]any{"include": "x"}},
		{"bcrypt", "pass: $2a$11$abcdefghij", map[string]any{"pass": "$2a$11$abcdefghij"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParse(t, tt.src).Interface()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q)\n got %#v\nwant %#v", tt.src, got, tt.want)
			}
		})
	}
}

func TestSizeSuffixes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1k", 1000}, {"1K", 1000}, {"1kb", 1024}, {"1KB", 1024}, {"1ki", 1024}, {"1KiB", 1024},
		{"2m", 2_000_000}, {"2mb", 2 << 20}, {"2mi", 2 << 20}, {"2MiB", 2 << 20},
		{"1g", 1e9}, {"1G", 1e9}, {"1gb", 1 << 30}, {"1GB", 1 << 30}, {"1gi", 1 << 30}, {"1gib", 1 << 30},
		{"3t", 3e12}, {"3tb", 3 << 40}, {"3ti", 3 << 40}, {"3tib", 3 << 40},
		{"1p", 1e15}, {"1pb", 1 << 50}, {"1pi", 1 << 50}, {"1pib", 1 << 50},
		{"1e", 1e18}, {"1eb", 1 << 60}, {"1ei", 1 << 60}, {"1eib", 1 << 60},
		{"-1k", -1000}, {"0gb", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, _ := mustParse(t, "n: "+tt.in).Lookup("n")
			if e.Value.Kind != KindInt || e.Value.Int != tt.want {
				t.Errorf("%s = %s, want integer %d", tt.in, e.Value.Describe(), tt.want)
			}
			if e.Value.Raw != tt.in {
				t.Errorf("Raw = %q, want %q", e.Value.Raw, tt.in)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"unterminated dq", "a: 1\nb: 2\nfoo: \"bar\n", `test.conf:3:6: unterminated string`},
		{"unterminated sq", "a: 'x", `test.conf:1:4: unterminated string`},
		{"unterminated map", "tls {\n  verify: true\n", `test.conf:1:5: unterminated map: missing '}'`},
		{"unterminated array", "a: [1, 2", `test.conf:1:4: unterminated array: missing ']'`},
		{"unterminated block", "a: (\nxx\n", `test.conf:1:4: unterminated block`},
		{"unterminated quoted key", `"abc: 1`, `test.conf:1:1: unterminated quoted key`},
		{"missing value eof", "port:", `test.conf:1:6: missing value for key "port"`},
		{"missing value newline", "port:\nhost: x", `test.conf:1:6: missing value for key "port"`},
		{"missing value comment", "port: # c", `missing value for key "port"`},
		{"bare key at eof", "port", `missing value for key "port"`},
		{"key then newline", "debug\ntrace: true", `test.conf:1:6: missing value for key "debug"`},
		{"stray separator", ": 1", `test.conf:1:1: expected a key, found ':'`},
		{"stray close", "}", `test.conf:1:1: unexpected '}' with no open map`},
		{"junk after value", "a: 1 2", `test.conf:1:6: unexpected '2' after value`},
		{"junk after map", "a { } b: 1", `test.conf:1:7: unexpected 'b' after value`},
		{"bad escape", `a: "x\q"`, `test.conf:1:7: invalid escape \q`},
		{"bad hex escape", `a: "\xZZ"`, `invalid escape: \x needs two hexadecimal digits`},
		{"short hex escape", `a: "\x`, `invalid escape: \x needs two hexadecimal digits`},
		{"backslash at eof", `a: "abc\`, `test.conf:1:4: unterminated string`},
		{"int overflow", "a: 9223372036854775808", `test.conf:1:4: integer 9223372036854775808 is out of range`},
		{"suffix overflow", "a: 9000000000000eb", `integer 9000000000000eb is out of range`},
		{"array leading comma", "a: [, 1]", `test.conf:1:5: unexpected ',' in array`},
		{"array junk", "a: [1 2]", `test.conf:1:7: unexpected '2' in array`},
		{"array bad value", "a: [1, }]", `test.conf:1:8: expected a value, found '}'`},
		{"undefined variable", "a: 1\nb: $NOPE", `test.conf:2:4: undefined variable $NOPE`},
		{"lone dollar", "a: $", `undefined variable $`},
		{"junk after braced doc", "{ a: 1 }\nb: 2", `test.conf:2:1: unexpected 'b' after the closing '}'`},
		{"include without path", "include ''", `include: empty file name`},
		{"include missing file", "include ./nope-does-not-exist.conf", `test.conf:1:1: include "./nope-does-not-exist.conf"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := noEnv.Parse([]byte(tt.src), "test.conf")
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error %q", tt.src, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error\n got %q\nwant it to contain %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestNestingLimit(t *testing.T) {
	deep := "a: " + strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1)
	if _, err := noEnv.Parse([]byte(deep), "x"); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("deep arrays: err = %v, want nesting error", err)
	}
	ok := "a: " + strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting)
	if _, err := noEnv.Parse([]byte(ok), "x"); err != nil {
		t.Fatalf("arrays at the limit: %v", err)
	}
}

func TestPositions(t *testing.T) {
	src := "# header\nport: 4222\n  tls {\n    cert_file: \"a.pem\"\n  }\nlist: [\n  x,\n  é, y\n]\n"
	m := mustParse(t, src)
	check := func(what string, got Pos, line, col int) {
		t.Helper()
		if got.Line != line || got.Col != col || got.File != "test.conf" {
			t.Errorf("%s at %v, want test.conf:%d:%d", what, got, line, col)
		}
	}
	port, _ := m.Lookup("port")
	check("port key", port.KeyPos, 2, 1)
	check("port value", port.Value.Pos, 2, 7)
	tls, _ := m.Lookup("tls")
	check("tls key", tls.KeyPos, 3, 3)
	check("tls value", tls.Value.Pos, 3, 7)
	cert, _ := tls.Value.Map.Lookup("cert_file")
	check("cert_file key", cert.KeyPos, 4, 5)
	check("cert_file value", cert.Value.Pos, 4, 16)
	list, _ := m.Lookup("list")
	check("list[0]", list.Value.Array[0].Pos, 7, 3)
	check("list[2] after a multi-byte rune", list.Value.Array[2].Pos, 8, 6)
}

func TestEntriesKeepFileOrder(t *testing.T) {
	m := mustParse(t, "c: 1\na: 2\nb: 3\na: 4\n")
	var keys []string
	for _, e := range m.Entries() {
		keys = append(keys, e.Key)
	}
	if want := []string{"c", "a", "b"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	if a, _ := m.Lookup("a"); a.Value.Int != 4 || a.KeyPos.Line != 4 {
		t.Errorf("duplicate a = %d at line %d, want 4 at line 4", a.Value.Int, a.KeyPos.Line)
	}
	if m.Len() != 3 {
		t.Errorf("Len = %d, want 3", m.Len())
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{`v: "abc"`, `string "abc"`},
		{`v: 5`, `integer 5`},
		{`v: 2m`, `integer 2000000 (written 2m)`},
		{`v: 1.5`, `float 1.5`},
		{`v: on`, `boolean true`},
		{`v: [1]`, `array`},
		{`v: {}`, `map`},
		{`v: 2024-01-02T03:04:05Z`, `datetime 2024-01-02T03:04:05Z`},
		{`v: "` + strings.Repeat("x", 100) + `"`, `string "` + strings.Repeat("x", 60) + `..."`},
	}
	for _, tt := range tests {
		e, _ := mustParse(t, tt.src).Lookup("v")
		if got := e.Value.Describe(); got != tt.want {
			t.Errorf("Describe(%s) = %q, want %q", tt.src, got, tt.want)
		}
	}
}

func TestKindString(t *testing.T) {
	if KindMap.String() != "map" || Kind(0).String() != "Kind(0)" || Kind(200).String() != "Kind(200)" {
		t.Errorf("unexpected Kind names: %v %v %v", KindMap, Kind(0), Kind(200))
	}
}

func TestPosString(t *testing.T) {
	if got := (Pos{File: "a.conf", Line: 3, Col: 7}).String(); got != "a.conf:3:7" {
		t.Errorf("got %q", got)
	}
	if got := (Pos{Line: 3, Col: 7}).String(); got != "3:7" {
		t.Errorf("got %q", got)
	}
}
