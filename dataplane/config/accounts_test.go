package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAccountsBlock(t *testing.T) {
	o, err := Parse([]byte(`jetstream: enabled
accounts {
  A: {
    users: [ { user: a, password: "$2a$11$abcdefghijklmnopqrstuu" }, { nkey: UD366XW3T3URO7QVRGPTB44IKNQOJU7UBRX7K3HT4O4XRC66EUWLPTXI } ]
    default_permissions: { publish: "a.>" }
    jetstream: { max_mem: 1M, max_file: "2G", max_streams: 3, max_consumers: 10 }
    exports: [ { stream: "events.>" }, { service: "help", accounts: [B], response_type: stream } ]
  }
  B: {
    users: [ { user: b, password: b, permissions: { subscribe: "x" } } ]
    jetstream: enabled
    imports: [
      { stream: { account: A, subject: "events.>" }, prefix: "a" }
      { service: { account: A, subject: "help" }, to: "ask" }
    ]
  }
  SYS: { limits: { max_conn: 5, max_subs: 100, max_payload: 1000, max_leafnodes: 0 } }
}
system_account: SYS
authorization { users: [ { user: g, password: g } ], timeout: 0.5 }
no_auth_user: b
logtime: false
logtime_utc: true
log_file: "/var/log/nats.log"
tls { cert_file: c, key_file: k, verify_and_map: true }
`), "t.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Accounts) != 3 || o.NoAuthUser != "b" || o.SystemAccount != "SYS" || o.Authorization.Timeout != 500*time.Millisecond {
		t.Fatalf("options: %+v", o)
	}
	a, b := o.Accounts[0], o.Accounts[1]
	if a.Name != "A" || len(a.Users) != 2 || a.Users[0].Account != "A" || a.Users[1].ID() != "UD366XW3T3URO7QVRGPTB44IKNQOJU7UBRX7K3HT4O4XRC66EUWLPTXI" {
		t.Fatalf("account A users: %+v", a.Users)
	}
	if js := a.JetStream; js == nil || js.MaxMemory != 1000*1000 || js.MaxStore != 2<<30 || js.MaxStreams != 3 || js.MaxConsumers != 10 || js.MaxAckPending != -1 {
		t.Fatalf("account A jetstream: %+v", a.JetStream)
	}
	if len(a.Exports) != 2 || a.Exports[1].Service != "help" || a.Exports[1].Accounts[0] != "B" || a.Exports[1].ResponseType != "Stream" {
		t.Fatalf("exports: %+v", a.Exports)
	}
	if b.JetStream == nil || b.JetStream.MaxStore != -1 || len(b.Imports) != 2 || b.Imports[0].Prefix != "a" || b.Imports[1].To != "ask" || b.Imports[1].Service.Account != "A" {
		t.Fatalf("account B: %+v", b)
	}
	if l := o.Accounts[2].Limits; l != (AccountLimits{5, 100, 1000, 0}) || a.Limits != (AccountLimits{-1, -1, -1, -1}) {
		t.Fatalf("limits: %+v, %+v", l, a.Limits)
	}
	if o.Accounts[2].JetStream != nil || o.LogTime || !o.LogTimeUTC || o.LogFile != "/var/log/nats.log" || !o.TLS.VerifyAndMap {
		t.Fatalf("options: %+v", o)
	}
	if !o.StaticAuth() {
		t.Fatal("users configured, but StaticAuth is false")
	}
}

func TestAuthorizationForms(t *testing.T) {
	o, err := Parse([]byte("authorization {\n user: u\n password: p\n timeout: \"3s\"\n default_permissions: { sub: [a, b] }\n}"), "t.conf")
	if err != nil {
		t.Fatal(err)
	}
	if a := o.Authorization; a.User != "u" || a.Password != "p" || a.Timeout != 3*time.Second || len(a.DefaultPermissions.Subscribe.Allow) != 2 {
		t.Fatalf("single user: %+v", a)
	}
	o, err = Parse([]byte("authorization { token: abc }"), "t.conf")
	if err != nil || o.Authorization.Token != "abc" || !o.StaticAuth() {
		t.Fatalf("token: %+v %v", o, err)
	}
}

// TestAuthConfigErrors: every mistake names its line and what is wrong.
func TestAuthConfigErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"users not a list", "authorization {\n users: { user: a }\n}", `line 2: authorization.users: expected array, got map`},
		{"user not a map", "authorization { users: [ a ] }", `line 1: authorization.users: expected map, got string "a"`},
		{"password wrong type", "authorization {\n users: [\n  { user: a, password: 5 }\n ]\n}", `line 3: authorization.users.password: expected string, got integer 5`},
		{"unknown user key", "authorization {\n users: [\n  { user: a, passwrd: x }\n ]\n}", `line 3: unknown key "authorization.users.passwrd"`},
		{"user with nkey and password", "authorization { users: [ { user: a, nkey: UD366XW3T3URO7QVRGPTB44IKNQOJU7UBRX7K3HT4O4XRC66EUWLPTXI } ] }", `line 1: authorization.users: a user has a nkey or a user and password, not both`},
		{"user account key (nats-server does not know it either)", "authorization {\n users: [ { user: a, account: B } ]\n}", `line 2: unknown key "authorization.users.account"`},
		{"duplicate users", "authorization {\n users: [\n  { user: a }\n  { user: a }\n ]\n}", `line 4: duplicate user "a"`},
		{"duplicate across blocks", "accounts {\n A: { users: [ { user: a } ] }\n}\nauthorization {\n users: [\n  { user: a }\n ]\n}", `line 2: duplicate user "a"`},
		{"no_auth_user naming nobody", "authorization { users: [ { user: a } ] }\nno_auth_user: b", `line 2: no_auth_user: "b" is not a user of the authorization or accounts block`},
		{"no_auth_user without users", "\nno_auth_user: b", `line 2: no_auth_user: "b" is not a user`},
		{"no_auth_user wrong type", "no_auth_user: [b]", `line 1: no_auth_user: expected string, got array`},
		{"single user with users", "authorization {\n user: u\n users: [ { user: a } ]\n}", `line 2: authorization: a single user/password and a users list cannot be combined`},
		{"token with users", "authorization {\n token: t\n users: [ { user: a } ]\n}", `line 2: authorization: a token and a users list cannot be combined`},
		{"token with account users", "authorization {\n token: t\n}\naccounts { A: { users: [ { user: a } ] } }", `line 2: authorization: a token cannot be combined with users in accounts`},
		{"timeout wrong type", "authorization {\n timeout: true\n}", `line 2: authorization.timeout: expected duration, got boolean true`},
		{"default_permissions wrong type", "authorization { default_permissions: [a] }", `line 1: authorization.default_permissions: expected map, got array`},
		{"allow_responses bad expires", "authorization { users: [ { user: a, permissions: { allow_responses: { expires: \"soon\" } } } ] }", `line 1: authorization.users.permissions.allow_responses.expires: invalid duration "soon"`},
		{"accounts wrong type", "accounts: 5", `line 1: accounts: expected map or list of account names, got integer 5`},
		{"account not a map", "accounts {\n A: 1\n}", `line 2: accounts.A: expected map, got integer 1`},
		{"unknown account key", "accounts {\n A: {\n  userz: []\n }\n}", `line 3: unknown key "accounts.A.userz"`},
		{"account limits unknown", "accounts {\n A: { limits: {\n  max_conns: 1\n } }\n}", `line 3: unknown key "accounts.A.limits.max_conns"`},
		{"account mappings", "accounts {\n A: {\n  mappings: { a: b }\n }\n}", `line 3: "accounts.A.mappings" is not supported by Contrail`},
		{"account jetstream bad string", "accounts { A: { jetstream: sometimes } }", `line 1: accounts.A.jetstream: expected "enabled" or "disabled", got "sometimes"`},
		{"account jetstream bad limit", "accounts {\n A: { jetstream: {\n  max_streams: \"many\"\n } }\n}", `line 3: accounts.A.jetstream.max_streams: expected integer, got string "many"`},
		{"account jetstream unknown limit", "accounts {\n A: { jetstream: {\n  max_stream: 1\n } }\n}", `line 3: unknown key "accounts.A.jetstream.max_stream"`},
		{"export without subject", "accounts {\n A: { exports: [\n  { accounts: [A] }\n ] }\n}", `line 3: accounts.A.exports: an export needs a stream or a service subject`},
		{"export both kinds", "accounts { A: { exports: [ { stream: a, service: b } ] } }", `line 1: accounts.A.exports: an export is a stream or a service, not both`},
		{"export to unknown account", "accounts {\n A: { exports: [\n  { stream: a, accounts: [Z] }\n ] }\n}", `line 3: accounts.A.exports: account "Z" is not defined`},
		{"export bad response type", "accounts { A: { exports: [ { service: a, response_type: lots } ] } }", `line 1: accounts.A.exports.response_type: unknown response type "lots"`},
		{"export latency", "accounts {\n A: { exports: [\n  { service: a, latency: x }\n ] }\n}", `line 3: "accounts.A.exports.latency" is not supported by Contrail`},
		{"import from unknown account", "accounts {\n A: { imports: [\n  { stream: { account: Z, subject: a } }\n ] }\n}", `line 3: accounts.A.imports: account "Z" is not defined`},
		{"import not exported", "accounts {\n A: { exports: [ { stream: \"a.>\" } ] }\n B: { imports: [\n  { service: { account: A, subject: a.b } }\n ] }\n}", `line 4: accounts.B.imports: service "a.b" of account A is not exported to B`},
		{"import export for another account", "accounts {\n A: { exports: [ { stream: a, accounts: [C] } ] }\n B: { imports: [\n  { stream: { account: A, subject: a } }\n ] }\n C: {}\n}", `line 4: accounts.B.imports: stream "a" of account A is not exported to B`},
		{"import prefix and to", "accounts {\n A: { exports: [ { stream: a } ] }\n B: { imports: [\n  { stream: { account: A, subject: a }, prefix: p, to: q }\n ] }\n}", `line 4: accounts.B.imports: a stream import has a prefix or a to, not both`},
		{"import without subject", "accounts {\n A: {}\n B: { imports: [\n  { stream: { account: A } }\n ] }\n}", `line 4: accounts.B.imports: an import needs an account and a subject`},
		{"import source wrong type", "accounts {\n A: {}\n B: { imports: [\n  { stream: A }\n ] }\n}", `line 4: accounts.B.imports.stream: expected map, got string "A"`},
		{"system account unknown", "accounts { A: {} }\nsystem_account: SYS", `line 2: system_account: "SYS" is not an account of the accounts block`},
		{"accounts with operator", "operator: op.jwt\naccounts {\n A: {}\n}", `line 3: accounts: an operator's accounts come from JWTs`},
		{"logtime wrong type", "logtime: 1", `line 1: logtime: expected boolean, got integer 1`},
		{"log_file wrong type", "log_file: true", `line 1: log_file: expected string, got boolean true`},
		{"verify_and_map wrong type", "tls { verify_and_map: yes_please }", `line 1: tls.verify_and_map: expected boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "test.conf")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q)\n got %v\nwant %q", tt.src, err, tt.want)
			}
		})
	}
	_, err := Parse([]byte("accounts { A: { nkey: x } }"), "test.conf")
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("account nkey: %v is not ErrUnsupported", err)
	}
}
