package conf

import (
	"errors"
	"testing"
)

// FuzzParse checks that no input panics or hangs the parser, and that
// what it returns is well formed: every error has a position and every
// parsed value a line. Included files read back the input itself, so
// include depth and fan-out limits are exercised too. Seeds live in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"port: 4222\n",
		"tls { cert_file: \"a\", verify: true }\n",
		"a: [1, 2k, 3.5, \"x\", 'y', on]\n",
		"V: 1\nm { v: $V, w: $A }\n",
		"include self.conf\n",
		"{ a: (\nblock\n) }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := &Parser{
			ReadFile: func(string) ([]byte, error) { return data, nil },
			LookupEnv: func(k string) (string, bool) {
				v, ok := map[string]string{"A": "1", "M": "{ x: [1, $M] }"}[k]
				return v, ok
			},
		}
		m, err := p.Parse(data, "fuzz.conf")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Pos.Line < 1 || ce.Pos.Col < 1 {
				t.Fatalf("error without a position: %#v", err)
			}
			return
		}
		checkMap(t, m)
		_ = m.Interface()
	})
}

func checkMap(t *testing.T, m *Map) {
	t.Helper()
	for _, e := range m.Entries() {
		if got, ok := m.Lookup(e.Key); !ok || got != e {
			t.Fatalf("Lookup(%q) does not return its entry", e.Key)
		}
		if e.KeyPos.Line < 1 {
			t.Fatalf("key %q has no line", e.Key)
		}
		checkValue(t, e.Value)
	}
}

func checkValue(t *testing.T, v *Value) {
	t.Helper()
	if v.Pos.Line < 1 || v.Pos.Col < 1 {
		t.Fatalf("%s value has no position: %v", v.Kind, v.Pos)
	}
	_ = v.Describe()
	switch v.Kind {
	case KindArray:
		for _, e := range v.Array {
			checkValue(t, e)
		}
	case KindMap:
		checkMap(t, v.Map)
	case KindString, KindInt, KindFloat, KindBool, KindTime:
	default:
		t.Fatalf("value of unknown kind %d", v.Kind)
	}
}
