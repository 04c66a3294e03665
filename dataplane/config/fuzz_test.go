package config

import (
	"strings"
	"testing"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// FuzzParse feeds arbitrary text through parsing, decoding and validation:
// whatever the input, the result is options or an error, never a panic.
// Includes read back the input and the environment is fixed, so runs are
// reproducible. Seeds live in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"listen: 0.0.0.0:4222\nmax_payload: 2MB\n",
		"tls { cert_file: c, key_file: k, handshake_first: auto }\n",
		"jetstream { max_file: \"1G\", sync: always }\n",
		"P: 1\nport: $P\nlsiten: 1\ncluster {}\n",
	} {
		f.Add([]byte(s))
	}
	p := &conf.Parser{
		LookupEnv: func(string) (string, bool) { return "", false },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := *p
		p.ReadFile = func(string) ([]byte, error) { return data, nil }
		o, err := parseWith(&p, data, "fuzz.conf")
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty error message")
			}
			return
		}
		_ = o.Validate()
	})
}
