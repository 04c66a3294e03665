package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	o := Default()
	want := &Options{
		Host: "0.0.0.0", Port: 4222,
		MaxPayload: 1 << 20, MaxControlLine: 4096, MaxConnections: 65536, MaxAccountSubs: 1 << 16,
		MaxPending: 64 << 20, PingInterval: 2 * time.Minute, PingMax: 2,
		WriteDeadline: 10 * time.Second, LogTime: true,
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("Default() = %+v\nwant %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestParseRealisticFile(t *testing.T) {
	t.Setenv("CONTRAIL_TEST_STORE_DIR", "/var/lib/contrail/js")
	o, err := ParseFile(filepath.Join("testdata", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.ServerName = "contrail-test"
	want.Host, want.Port = "127.0.0.1", 4222
	want.HTTPPort = 8222
	want.MaxPayload = 2 << 20
	want.MaxControlLine = 8 << 10
	want.MaxConnections = 10000
	want.MaxPending = 128 << 20
	want.PingInterval = 2 * time.Minute
	want.PingMax = 3
	want.WriteDeadline = 10 * time.Second
	want.TLS = &TLSOptions{
		CertFile: "./certs/server-cert.pem", KeyFile: "./certs/server-key.pem", CAFile: "./certs/ca.pem",
		Verify: true, Timeout: 3 * time.Second,
		HandshakeFirst: true, HandshakeFirstFallback: 50 * time.Millisecond,
	}
	want.JetStream = &JetStreamOptions{
		Enabled: true, StoreDir: "/var/lib/contrail/js",
		MaxMemory: 1_000_000_000, MaxStore: 10 << 30,
		SyncInterval: 30 * time.Second, Domain: "hub",
	}
	want.SystemAccount = "SYS"
	if !reflect.DeepEqual(o, want) {
		t.Errorf("ParseFile:\n got %+v\n     tls %+v\n     js  %+v\nwant %+v\n     tls %+v\n     js  %+v",
			o, o.TLS, o.JetStream, want, want.TLS, want.JetStream)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseFileErrors(t *testing.T) {
	_, err := ParseFile(filepath.Join("testdata", "bad_include.conf"))
	want := filepath.Join("testdata", "includes", "bad.conf") + `: line 3: unknown key "max_payolad"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if _, err := ParseFile(filepath.Join("testdata", "missing.conf")); err == nil || !strings.HasPrefix(err.Error(), "config: reading config:") {
		t.Fatalf("missing file: err = %v", err)
	}
}

func TestParseFields(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want func(o *Options)
	}{
		{"listen host:port", "listen: 10.0.0.1:4333", func(o *Options) { o.Host, o.Port = "10.0.0.1", 4333 }},
		{"listen port only resets host", "host: 1.2.3.4\nlisten: 4333", func(o *Options) { o.Host, o.Port = "0.0.0.0", 4333 }},
		{"listen ipv6", `listen: "[::1]:4333"`, func(o *Options) { o.Host, o.Port = "::1", 4333 }},
		{"listen empty host", `listen: ":4333"`, func(o *Options) { o.Host, o.Port = "0.0.0.0", 4333 }},
		{"host and port", "host: 127.0.0.1\nport: 5222", func(o *Options) { o.Host, o.Port = "127.0.0.1", 5222 }},
		{"net alias", "net: ::1", func(o *Options) { o.Host = "::1" }},
		{"random port", "port: -1", func(o *Options) { o.Port = -1 }},
		{"later key wins", "listen: 1.1.1.1:1\nport: 2", func(o *Options) { o.Host, o.Port = "1.1.1.1", 2 }},
		{"keys ignore case", "PORT: 5\nMax_Payload: 1KB", func(o *Options) { o.Port, o.MaxPayload = 5, 1024 }},
		{"http port", "http: 8222", func(o *Options) { o.HTTPPort = 8222 }},
		{"http host:port", "http: 127.0.0.1:8222", func(o *Options) { o.HTTPHost, o.HTTPPort = "127.0.0.1", 8222 }},
		{"http_port", "http_port: 8223", func(o *Options) { o.HTTPPort = 8223 }},
		{"monitor_port", "monitor_port: 8224", func(o *Options) { o.HTTPPort = 8224 }},
		{"http_host", "http_host: 10.1.1.1", func(o *Options) { o.HTTPHost = "10.1.1.1" }},
		{"max_payload size", "max_payload: 8MB", func(o *Options) { o.MaxPayload = 8 << 20 }},
		{"max_control_line", "max_control_line: 2048", func(o *Options) { o.MaxControlLine = 2048 }},
		{"max_connections", "max_connections: 10", func(o *Options) { o.MaxConnections = 10 }},
		{"max_conn", "max_conn: 11", func(o *Options) { o.MaxConnections = 11 }},
		{"max_pending", "max_pending: 1GB", func(o *Options) { o.MaxPending = 1 << 30 }},
		{"max_account_subscriptions", "max_account_subscriptions: 1000", func(o *Options) { o.MaxAccountSubs = 1000 }},
		{"ping_interval string", `ping_interval: "30s"`, func(o *Options) { o.PingInterval = 30 * time.Second }},
		{"ping_interval compound bare", `ping_interval: 1m30s`, func(o *Options) { o.PingInterval = 90 * time.Second }},
		{"ping_interval seconds", "ping_interval: 60", func(o *Options) { o.PingInterval = time.Minute }},
		{"ping_interval float seconds", "ping_interval: 0.5", func(o *Options) { o.PingInterval = 500 * time.Millisecond }},
		{"ping_max", "ping_max: 5", func(o *Options) { o.PingMax = 5 }},
		{"write_deadline string", `write_deadline: "1h30m"`, func(o *Options) { o.WriteDeadline = 90 * time.Minute }},
		{"write_deadline seconds", "write_deadline: 3", func(o *Options) { o.WriteDeadline = 3 * time.Second }},
		{"server_name", "server_name: n1", func(o *Options) { o.ServerName = "n1" }},
		{"debug trace", "debug: true\ntrace: yes", func(o *Options) { o.Debug, o.Trace = true, true }},
		{"operator", "operator: ./op.jwt", func(o *Options) { o.Operator = "./op.jwt" }},
		{"operator alias", "root_operator: ./op.jwt", func(o *Options) { o.Operator = "./op.jwt" }},
		{"resolver", "resolver: MEMORY", func(o *Options) { o.Resolver = "MEMORY" }},
		{"resolver url", `resolver: URL(http://localhost:9090/jwt/v1/accounts/)`, func(o *Options) { o.Resolver = "URL(http://localhost:9090/jwt/v1/accounts/)" }},
		{"system_account", "system_account: SYS", func(o *Options) { o.SystemAccount = "SYS" }},
		{"system alias", "system: SYS2", func(o *Options) { o.SystemAccount = "SYS2" }},
		{"variable-only keys are not unknown", "LIMIT: 2048\nmax_control_line: $LIMIT", func(o *Options) { o.MaxControlLine = 2048 }},
		{"variable-only block is not unknown", "T { cert_file: c, key_file: k }\ntls: $T", func(o *Options) {
			o.TLS = &TLSOptions{CertFile: "c", KeyFile: "k", Timeout: DefaultTLSTimeout}
		}},
		{"empty file", "", func(o *Options) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.src), "test.conf")
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tt.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tt.src, got, want)
			}
		})
	}
}

func TestParseErrorsCollected(t *testing.T) {
	src := `# line 1
port: abc
max_payload: 3GB
lsiten: 4222
tls {
  verfy: true
  cipher_suites: []
}
gateway {
  port: 6222
}
ping_interval: 2m
write_deadline: "soon"
debug: "true"
`
	_, err := Parse([]byte(src), "test.conf")
	if err == nil {
		t.Fatal("want errors")
	}
	want := []string{
		`line 2: port: expected integer, got string "abc"`,
		`line 3: max_payload: 3221225472 is out of range`,
		`line 4: unknown key "lsiten"`,
		`line 6: unknown key "tls.verfy"`,
		`line 7: "tls.cipher_suites" is not supported by Contrail`,
		`line 9: "gateway" is not supported by Contrail`,
		`line 12: ping_interval: unquoted 2m is the integer 2000000, not a duration; quote it: "2m"`,
		`line 13: write_deadline: invalid duration "soon" (want e.g. "10s", "2m", "1h30m")`,
		`line 14: debug: expected boolean, got string "true"`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrUnsupported) {
		t.Errorf("errors.Is: unknown=%v unsupported=%v, want both", errors.Is(err, ErrUnknownKey), errors.Is(err, ErrUnsupported))
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Line != 2 {
		t.Errorf("errors.As FieldError: %+v", fe)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"syntax error keeps position", "port: 1\nhost: \"x", `config: test.conf:2:7: unterminated string`},
		{"undefined variable", "port: $NOT_DEFINED_ANYWHERE_42", `config: test.conf:1:7: undefined variable $NOT_DEFINED_ANYWHERE_42`},
		{"listen not host:port", "listen: nohost", `line 1: listen: "nohost" is not a port or host:port`},
		{"listen bad port", `listen: "h:abc"`, `line 1: listen: invalid port "abc" in "h:abc"`},
		{"listen wrong type", "listen: true", `line 1: listen: expected port or host:port, got boolean true`},
		{"listen huge port", "listen: 99999999999", `line 1: listen: port 99999999999 is out of range`},
		{"http wrong type", "http: [1]", `line 1: http: expected port or host:port, got array`},
		{"host wrong type", "host: 5", `line 1: host: expected string, got integer 5`},
		{"tls not a map", "tls: true", `line 1: tls: expected map, got boolean true`},
		{"tls timeout", "tls { timeout: [] }", `line 1: tls.timeout: expected duration, got array`},
		{"handshake_first bad string", `tls { handshake_first: "sometimes" }`, `line 1: tls.handshake_first: invalid value "sometimes"`},
		{"handshake_first bad type", `tls { handshake_first: 5 }`, `line 1: tls.handshake_first: expected boolean, "auto" or duration, got integer 5`},
		{"jetstream bad string", "jetstream: maybe", `line 1: jetstream: expected "enabled" or "disabled", got "maybe"`},
		{"jetstream bad type", "jetstream: 1", `line 1: jetstream: expected boolean, "enabled" or map, got integer 1`},
		{"jetstream unsupported", "jetstream {\n  cipher: aes\n}", `line 2: "jetstream.cipher" is not supported by Contrail`},
		{"jetstream limits unsupported", "jetstream {\n  limits {\n    max_ack_pending: 5\n  }\n}", `line 3: "jetstream.limits.max_ack_pending" is not supported by Contrail`},
		{"jetstream limits batch unknown", "jetstream {\n  limits { batch {\n    max_size: 5\n  } }\n}", `line 3: unknown key "jetstream.limits.batch.max_size"`},
		{"jetstream unknown", "jetstream {\n  max_memroy: 1\n}", `line 2: unknown key "jetstream.max_memroy"`},
		{"jetstream bad size string", `jetstream { max_file: "10X" }`, `line 1: jetstream.max_file: invalid size "10X" (want e.g. 512M or 1G)`},
		{"jetstream bad size type", `jetstream { max_mem: true }`, `line 1: jetstream.max_mem: expected size, got boolean true`},
		{"jetstream bad sync", `jetstream { sync: "often" }`, `line 1: jetstream.sync: invalid duration "often"`},
		{"duration out of range", "ping_interval: 99999999999999", `line 1: ping_interval: 99999999999999 seconds is out of range`},
		{"operator list", "operator: [a, b]", `line 1: operator: a list of operators is not supported by Contrail yet`},
		{"resolver block without dir", "resolver {\n type: full\n}", `line 1: resolver: dir has no value`},
		{"cache resolver", "resolver {\n type: cache\n dir: x\n}", `line 1: resolver: type cache fetches accounts from other servers`},
		{"resolver block bad type", "resolver {\n type: fancy\n dir: x\n}", `line 1: resolver: type "fancy": want full`},
		{"resolver block bad key", "resolver {\n type: full\n dir: x\n ttl: 1\n}", `line 4: unknown key "resolver.ttl"`},
		{"unsupported auth callout", "\n\nauthorization { auth_callout: {} }", `line 3: "authorization.auth_callout" is not supported by Contrail`},
		{"authorization user without name", "authorization { users: [ {permissions: {publish: x}} ] }", `line 1: authorization.users: a user needs a user name or an nkey`},
		{"authorization bad nkey", "authorization { users: [ {nkey: UNOTAKEY} ] }", `line 1: authorization.users: "UNOTAKEY" is not a user public nkey`},
		{"unsupported leafnodes", "leafnodes { port: 7422 }", `line 1: "leafnodes" is not supported by Contrail`},
		{"unsupported websocket", "websocket { port: 8080 }", `line 1: "websocket" is not supported by Contrail`},
		{"unsupported gateway", "gateway { port: 7222 }", `line 1: "gateway" is not supported by Contrail`},
		{"unsupported mqtt", "mqtt { port: 1883 }", `line 1: "mqtt" is not supported by Contrail`},
		{"unsupported account nkey", "accounts { A: { nkey: x } }", `line 1: "accounts.A.nkey" is not supported by Contrail`},
		{"wrong value type via variable reports use line", "P: \"x\"\n\nport: $P", `line 3: port: expected integer, got string "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "test.conf")
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Parse(%q)\n got %v\nwant prefix %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestParseTLS(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want TLSOptions
	}{
		{"defaults", `tls { cert_file: c, key_file: k }`, TLSOptions{CertFile: "c", KeyFile: "k", Timeout: 2 * time.Second}},
		{"verify and ca", `tls { ca_file: ca.pem, verify: true }`, TLSOptions{CAFile: "ca.pem", Verify: true, Timeout: 2 * time.Second}},
		{"timeout float", `tls { timeout: 0.5 }`, TLSOptions{Timeout: 500 * time.Millisecond}},
		{"timeout string", `tls { timeout: "250ms" }`, TLSOptions{Timeout: 250 * time.Millisecond}},
		{"handshake_first bool", `tls { handshake_first: true }`, TLSOptions{Timeout: 2 * time.Second, HandshakeFirst: true}},
		{"handshake_first off", `tls { handshake_first: "off" }`, TLSOptions{Timeout: 2 * time.Second}},
		{"handshake_first on string", `tls { handshake_first: "on" }`, TLSOptions{Timeout: 2 * time.Second, HandshakeFirst: true}},
		{"handshake_first auto", `tls { handshake_first: auto }`, TLSOptions{Timeout: 2 * time.Second, HandshakeFirst: true, HandshakeFirstFallback: 50 * time.Millisecond}},
		{"handshake_first duration", `tls { handshake_first: 300ms }`, TLSOptions{Timeout: 2 * time.Second, HandshakeFirst: true, HandshakeFirstFallback: 300 * time.Millisecond}},
		{"first alias", `tls { first: true }`, TLSOptions{Timeout: 2 * time.Second, HandshakeFirst: true}},
		{"immediate alias", `tls { immediate: auto_fallback }`, TLSOptions{Timeout: 2 * time.Second, HandshakeFirst: true, HandshakeFirstFallback: 50 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Parse([]byte(tt.src), "t.conf")
			if err != nil {
				t.Fatal(err)
			}
			if o.TLS == nil || *o.TLS != tt.want {
				t.Errorf("TLS = %+v, want %+v", o.TLS, tt.want)
			}
		})
	}
}

func TestParseJetStream(t *testing.T) {
	// Without sync_interval, JetStream fsyncs before every ack: zero.
	def := func(j JetStreamOptions) *JetStreamOptions { return &j }
	tests := []struct {
		name string
		src  string
		want *JetStreamOptions
	}{
		{"absent", "port: 1", nil},
		{"true", "jetstream: true", def(JetStreamOptions{Enabled: true})},
		{"on", "jetstream: on", def(JetStreamOptions{Enabled: true})},
		{"false", "jetstream: false", def(JetStreamOptions{})},
		{"enabled", "jetstream: enabled", def(JetStreamOptions{Enabled: true})},
		{"Enable", "jetstream: Enable", def(JetStreamOptions{Enabled: true})},
		{"disabled", "jetstream: disabled", def(JetStreamOptions{})},
		{"empty block enables", "jetstream {}", def(JetStreamOptions{Enabled: true})},
		{"block can disable", "jetstream { enabled: false }", def(JetStreamOptions{})},
		{"full block", `jetstream {
			store_dir: ./data
			max_memory_store: 512MB
			max_file_store: 1TB
			sync_interval: "1m"
			domain: leaf
		}`, &JetStreamOptions{Enabled: true, StoreDir: "./data", MaxMemory: 512 << 20, MaxStore: 1 << 40, SyncInterval: time.Minute, Domain: "leaf"}},
		{"aliases", `jetstream { storedir: d, max_mem: 1K, max_file: "2K" }`, def(JetStreamOptions{Enabled: true, StoreDir: "d", MaxMemory: 1000, MaxStore: 2048})},
		{"max_mem_store alias and store alias", `jetstream { store: s, max_mem_store: 7 }`, def(JetStreamOptions{Enabled: true, StoreDir: "s", MaxMemory: 7})},
		{"size strings", `jetstream { max_mem: "1g", max_file: "3T" }`, def(JetStreamOptions{Enabled: true, MaxMemory: 1 << 30, MaxStore: 3 << 40})},
		{"empty size string", `jetstream { max_mem: "" }`, def(JetStreamOptions{Enabled: true})},
		{"sync always", `jetstream { sync: always }`, &JetStreamOptions{Enabled: true, SyncAlways: true}},
		{"ingest bounds", `jetstream { max_buffered_msgs: 5000, max_buffered_size: "8M", node_max_buffered_msgs: 50000, node_max_buffered_size: 64MB }`,
			def(JetStreamOptions{Enabled: true, MaxBufferedMsgs: 5000, MaxBufferedSize: 8 << 20, NodeMaxBufferedMsgs: 50000, NodeMaxBufferedSize: 64 << 20})},
		{"batch limits", `jetstream { limits { batch { max_inflight_per_stream: 2, max_inflight_total: 9, max_msgs: 3, timeout: "2s" } } }`,
			def(JetStreamOptions{Enabled: true, Batch: BatchLimits{MaxInflightPerStream: 2, MaxInflightTotal: 9, MaxMsgs: 3, Timeout: 2 * time.Second}})},
		{"empty limits", `jetstream { limits {} }`, def(JetStreamOptions{Enabled: true})},
		{"store compression", `jetstream { store_compression: snappy }`, def(JetStreamOptions{Enabled: true, StoreCompression: "snappy"})},
		{"sync seconds", `jetstream { sync_interval: 10 }`, def(JetStreamOptions{Enabled: true, SyncInterval: 10 * time.Second})},
		{"top-level store_dir", "store_dir: /js\njetstream: enabled", def(JetStreamOptions{Enabled: true, StoreDir: "/js"})},
		{"top-level store_dir alone", "storedir: /js", def(JetStreamOptions{StoreDir: "/js"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Parse([]byte(tt.src), "js.conf")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.JetStream, tt.want) {
				t.Errorf("JetStream = %+v, want %+v", o.JetStream, tt.want)
			}
		})
	}
}

func TestStorageSizeOverflow(t *testing.T) {
	for _, s := range []string{"9999999999999999T", "G", "1.5G", "-"} {
		if n, ok := storageSize(s); ok {
			t.Errorf("storageSize(%q) = %d, want failure", s, n)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	e := &FieldError{Line: 7, Msg: `unknown key "lsiten"`, Err: ErrUnknownKey}
	if e.Error() != `line 7: unknown key "lsiten"` || !errors.Is(e, ErrUnknownKey) {
		t.Errorf("got %q", e)
	}
	e.File = "inc.conf"
	if e.Error() != `inc.conf: line 7: unknown key "lsiten"` {
		t.Errorf("got %q", e)
	}
}

func TestAuthorizationNkeyUsers(t *testing.T) {
	const key = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
	o, err := Parse([]byte(`authorization {
  users = [
    { nkey: `+key+`, permissions: { publish: "orders.>", subscribe: { allow: ["a.*", "b"], deny: "a.secret" }, allow_responses: { max: 2, expires: "1m" } } }
    { nkey: UD366XW3T3URO7QVRGPTB44IKNQOJU7UBRX7K3HT4O4XRC66EUWLPTXI }
  ]
}`), "t.conf")
	if err != nil {
		t.Fatal(err)
	}
	a := o.Authorization
	if a == nil || len(a.Users) != 2 || a.Users[0].Nkey != key || a.Users[1].Permissions != nil || a.Users[1].ID() != "UD366XW3T3URO7QVRGPTB44IKNQOJU7UBRX7K3HT4O4XRC66EUWLPTXI" {
		t.Fatalf("users: %+v", a)
	}
	p := a.Users[0].Permissions
	if len(p.Publish.Allow) != 1 || p.Publish.Allow[0] != "orders.>" || len(p.Subscribe.Allow) != 2 ||
		len(p.Subscribe.Deny) != 1 || p.AllowResponses == nil || p.AllowResponses.MaxMsgs != 2 || p.AllowResponses.Expires != "1m" {
		t.Fatalf("permissions: %+v", p)
	}
}

func TestDirResolverBlock(t *testing.T) {
	o, err := Parse([]byte(`operator: op.jwt
resolver {
  type: full
  dir: "./jwt"
  allow_delete: true
  interval: "2m"
  timeout: "1.9s"
  limit: 1000
}`), "r.conf")
	if err != nil {
		t.Fatal(err)
	}
	r := o.DirResolver
	if r == nil || r.Dir != "./jwt" || !r.AllowDelete || r.Limit != 1000 || r.Interval != 2*time.Minute || r.Timeout != 1900*time.Millisecond {
		t.Fatalf("resolver block: %+v", r)
	}
}
