package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPTenantFlow runs the main path against a control plane whose cell
// is the reference nats-server in operator mode.
func TestCPTenantFlow(t *testing.T) {
	w := startCPWorld(t)
	a, _ := w.api.signup("ops@example.com", "Acme")
	tenantFlow(t, a, w.dir, true)
}

// TestCPAuth covers sign-up, login, throttling and tokens.
func TestCPAuth(t *testing.T) {
	w := startCPWorld(t)
	anon := w.api
	anon.do("GET", "/healthz", nil, 200, nil) // open to all, as the spec says
	a, s := anon.signup("Ann@Example.com", "Acme")
	if s.User.Email != "Ann@Example.com" || s.Organization.Name != "Acme" || s.User.ID == "" || s.Organization.ID == "" {
		t.Fatalf("signup = %+v", s)
	}
	p := anon.problemOf("POST", "/v1/signup", map[string]string{"email": "ann@example.com", "password": "another long password", "organization": "X"}, 409, false)
	if !strings.HasSuffix(p.Type, "/conflict") {
		t.Fatalf("duplicate email problem = %+v", p)
	}

	var login struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	anon.do("POST", "/v1/login", map[string]string{"email": "ann@example.com", "password": "correct horse battery"}, 200, &login)
	var accts items[cpAccount]
	anon.as(login.Token).do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 0 {
		t.Fatalf("new organization has accounts: %+v", accts.Items)
	}
	anon.problemOf("POST", "/v1/login", map[string]string{"email": "ann@example.com", "password": "wrong password!!"}, 401, false)

	// No token, a forged one, a malformed header: 401.
	anon.problemOf("GET", "/v1/accounts", nil, 401, false)
	anon.as("eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl").problemOf("GET", "/v1/accounts", nil, 401, false)
	anon.as(s.Token+"x").problemOf("GET", "/v1/tokens", nil, 401, false)

	// API tokens: the secret once, listed without it, revoked at once.
	var tok cpToken
	a.do("POST", "/v1/tokens", map[string]any{"name": "ci", "ttl_seconds": 3600}, 201, &tok)
	if tok.Token == "" || tok.ID == "" {
		t.Fatalf("token = %+v", tok)
	}
	ci := a.as(tok.Token)
	var toks items[cpToken]
	ci.do("GET", "/v1/tokens", nil, 200, &toks)
	if len(toks.Items) != 1 || toks.Items[0].ID != tok.ID || toks.Items[0].Token != "" {
		t.Fatalf("tokens = %+v", toks.Items)
	}
	ci.createAccount("by-token", nil)
	a.do("DELETE", "/v1/tokens/"+tok.ID, nil, 204, nil)
	ci.problemOf("GET", "/v1/accounts", nil, 401, false)
	a.problemOf("DELETE", "/v1/tokens/"+tok.ID, nil, 404, false)
	a.do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 1 {
		t.Fatalf("accounts = %+v", accts.Items)
	}

	// Throttling: five free failures for an email, then 429 with
	// Retry-After, even with the right password.
	anon.signup("bob@example.com", "Bobs")
	for i := 0; i < 5; i++ {
		anon.problemOf("POST", "/v1/login", map[string]string{"email": "bob@example.com", "password": "not the password"}, 401, false)
	}
	p = anon.problemOf("POST", "/v1/login", map[string]string{"email": "bob@example.com", "password": "correct horse battery"}, 429, false)
	if p.header.Get("Retry-After") == "" || !strings.HasSuffix(p.Type, "/too-many-requests") {
		t.Fatalf("throttled login: %+v, Retry-After %q", p, p.header.Get("Retry-After"))
	}
}

// TestCPIsolation: a second organization sees nothing of the first.
func TestCPIsolation(t *testing.T) {
	w := startCPWorld(t)
	a, _ := w.api.signup("a@example.com", "A")
	b, _ := w.api.signup("b@example.com", "B")
	acc := a.createAccount("secret", nil)
	u, _ := a.createUser(acc.ID, "u", w.dir)
	var tok cpToken
	a.do("POST", "/v1/tokens", map[string]any{"name": "t"}, 201, &tok)

	var accts items[cpAccount]
	b.do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 0 {
		t.Fatalf("B sees accounts: %+v", accts.Items)
	}
	var toks items[cpToken]
	b.do("GET", "/v1/tokens", nil, 200, &toks)
	if len(toks.Items) != 0 {
		t.Fatalf("B sees tokens: %+v", toks.Items)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/accounts/" + acc.ID, nil},
		{"PATCH", "/v1/accounts/" + acc.ID, map[string]any{"name": "mine"}},
		{"DELETE", "/v1/accounts/" + acc.ID, nil},
		{"GET", "/v1/accounts/" + acc.ID + "/users", nil},
		{"POST", "/v1/accounts/" + acc.ID + "/users", map[string]any{"name": "intruder"}},
		{"DELETE", "/v1/accounts/" + acc.ID + "/users/" + u.ID, nil},
		{"GET", "/v1/accounts/" + acc.ID + "/usage", nil},
		{"GET", "/v1/accounts/" + acc.ID + "/streams", nil},
		{"DELETE", "/v1/tokens/" + tok.ID, nil},
	} {
		p := b.problemOf(c.method, c.path, c.body, 404, false)
		if !strings.HasSuffix(p.Type, "/not-found") {
			t.Errorf("%s %s: %+v", c.method, c.path, p)
		}
	}
	// A's things are untouched.
	var got cpAccount
	a.do("GET", "/v1/accounts/"+acc.ID, nil, 200, &got)
	var users items[cpUser]
	a.do("GET", "/v1/accounts/"+acc.ID+"/users", nil, 200, &users)
	if got.Name != "secret" || len(users.Items) != 1 {
		t.Fatalf("A's account changed: %+v, users %+v", got, users.Items)
	}
}

// TestCPBadBodies: every malformed body is a 400 problem naming the field.
func TestCPBadBodies(t *testing.T) {
	w := startCPWorld(t)
	a, _ := w.api.signup("v@example.com", "V")
	acc := a.createAccount("ok", nil)
	users := "/v1/accounts/" + acc.ID + "/users"
	for _, c := range []struct {
		path, method string
		body         any
		field        string
		auth         bool
	}{
		{"/v1/signup", "POST", map[string]any{"email": "not-an-email", "password": "correct horse battery", "organization": "X"}, "email", false},
		{"/v1/signup", "POST", map[string]any{"email": "x@example.com", "password": "short", "organization": "X"}, "password", false},
		{"/v1/signup", "POST", map[string]any{"email": "x@example.com", "password": "correct horse battery", "organization": ""}, "organization", false},
		{"/v1/signup", "POST", map[string]any{"email": "x@example.com", "password": "correct horse battery", "organization": "X", "plan": "gold"}, "plan", false},
		{"/v1/signup", "POST", map[string]any{"email": 7, "password": "correct horse battery", "organization": "X"}, "email", false},
		{"/v1/signup", "POST", `{"email":`, "body", false},
		{"/v1/signup", "POST", `[1,2]`, "body", false},
		{"/v1/login", "POST", map[string]any{"email": "v@example.com"}, "password", false},
		{"/v1/tokens", "POST", map[string]any{"name": ""}, "name", true},
		{"/v1/tokens", "POST", map[string]any{"name": "x", "ttl_seconds": 0}, "ttl_seconds", true},
		{"/v1/tokens", "POST", map[string]any{"name": "x", "ttl_seconds": 400 * 24 * 3600}, "ttl_seconds", true},
		{"/v1/tokens", "POST", map[string]any{"name": "x", "ttl_seconds": "long"}, "ttl_seconds", true},
		{"/v1/accounts", "POST", map[string]any{}, "name", true},
		{"/v1/accounts", "POST", map[string]any{"name": strings.Repeat("n", 65)}, "name", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"max_connections": 0}}, "limits.max_connections", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"max_payload": -2}}, "limits.max_payload", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"jetstream": map[string]any{"max_streams": -5}}}, "limits.jetstream.max_streams", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"jetstream": map[string]any{"max_memory": -3}}}, "limits.jetstream.max_memory", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"jetstream": map[string]any{"max_storage": "lots"}}}, "limits.jetstream.max_storage", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"jetstream": map[string]any{"max_consumers": 0}}}, "limits.jetstream.max_consumers", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"jetstream": map[string]any{"max_ack_pending": 1.5}}}, "limits.jetstream.max_ack_pending", true},
		{"/v1/accounts", "POST", map[string]any{"name": "x", "limits": map[string]any{"jetstream": map[string]any{"replicas": 3}}}, "limits.jetstream.replicas", true},
		{"/v1/accounts/" + acc.ID, "PATCH", map[string]any{"name": ""}, "name", true},
		{"/v1/accounts/" + acc.ID, "PATCH", map[string]any{"limits": map[string]any{"max_connections": -7}}, "limits.max_connections", true},
		{"/v1/accounts/" + acc.ID, "PATCH", map[string]any{"id": "acc_other"}, "id", true},
		{users, "POST", map[string]any{}, "name", true},
		{users, "POST", map[string]any{"name": "u", "expires_in_seconds": 0}, "expires_in_seconds", true},
		{users, "POST", map[string]any{"name": "u", "expires_in_seconds": -1}, "expires_in_seconds", true},
		{users, "POST", map[string]any{"name": "u", "permissions": map[string]any{"publish": map[string]any{"allow": []string{"a..b"}}}}, "permissions.publish.allow[0]", true},
		{users, "POST", map[string]any{"name": "u", "permissions": map[string]any{"subscribe": map[string]any{"deny": []string{"ok", "a.>.b"}}}}, "permissions.subscribe.deny[1]", true},
		{users, "POST", map[string]any{"name": "u", "permissions": map[string]any{"publish": map[string]any{"allow": []string{"with space"}}}}, "permissions.publish.allow[0]", true},
		{users, "POST", map[string]any{"name": "u", "permissions": map[string]any{"publish": map[string]any{"allow": []string{"a*"}}}}, "permissions.publish.allow[0]", true},
		{users, "POST", map[string]any{"name": "u", "permissions": map[string]any{"publish": map[string]any{"allw": []string{"a"}}}}, "permissions.publish.allw", true},
		{users, "POST", map[string]any{"name": "u", "permissions": map[string]any{"publish": "everything"}}, "permissions.publish", true},
	} {
		client := w.api
		if c.auth {
			client = a
		}
		p := client.problemOf(c.method, c.path, c.body, 400, true)
		if p.Field != c.field || !strings.HasSuffix(p.Type, "/validation") || !strings.Contains(p.Detail, c.field) {
			t.Errorf("%s %s %v: problem %+v, want field %q", c.method, c.path, c.body, p, c.field)
		}
	}
	// Nothing was half-applied.
	var accts items[cpAccount]
	a.do("GET", "/v1/accounts", nil, 200, &accts)
	if len(accts.Items) != 1 || accts.Items[0].Name != "ok" {
		t.Fatalf("accounts after bad bodies: %+v", accts.Items)
	}
}

// TestCPRestart: a restarted control plane keeps people, tokens, accounts
// and users, its keys, and its files private.
func TestCPRestart(t *testing.T) {
	w := startCPWorld(t)
	a, _ := w.api.signup("r@example.com", "R")
	acc := a.createAccount("keep", map[string]any{"max_connections": 10})
	_, creds := a.createUser(acc.ID, "u", w.dir)
	var tok cpToken
	a.do("POST", "/v1/tokens", map[string]any{"name": "long"}, 201, &tok)
	opJWT := mustRead(t, filepath.Join(w.cp.DataDir, "operator.jwt"))

	w.cp.stop()
	cp := startControlplane(t, w.cp.HTTPAddr, w.cp.DataDir, w.cell.URL)
	if got := mustRead(t, filepath.Join(cp.DataDir, "operator.jwt")); string(got) != string(opJWT) {
		t.Fatal("the operator changed across a restart")
	}
	api := newAPI(t, cp.URL)
	var login struct{ Token string }
	api.do("POST", "/v1/login", map[string]string{"email": "r@example.com", "password": "correct horse battery"}, 200, &login)
	for _, tk := range []string{login.Token, tok.Token} {
		var got cpAccount
		api.as(tk).do("GET", "/v1/accounts/"+acc.ID, nil, 200, &got)
		if got.Limits.MaxConnections != 10 || got.PublicKey != acc.PublicKey {
			t.Fatalf("after restart: %+v", got)
		}
	}
	var users items[cpUser]
	api.as(tok.Token).do("GET", "/v1/accounts/"+acc.ID+"/users", nil, 200, &users)
	if len(users.Items) != 1 {
		t.Fatalf("users after restart: %+v", users.Items)
	}
	nc := connectCreds(t, w.cell.URL, creds)
	roundTrip(t, nc)
	// A user created after the restart works too (the account seed survived).
	_, creds2 := api.as(tok.Token).createUser(acc.ID, "after", w.dir)
	roundTrip(t, connectCreds(t, w.cell.URL, creds2))

	err := filepath.Walk(filepath.Join(cp.DataDir, "controlplane"), func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() && strings.Contains(fi.Name(), ".") && fi.Mode().Perm()&0o077 != 0 && fi.Name() != "LOCK" {
			t.Errorf("%s has mode %v; the store holds the operator key and must be private", fi.Name(), fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(cp.DataDir, "controlplane")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("store dir: %v %v, want mode 0700", fi.Mode().Perm(), err)
	}
}
