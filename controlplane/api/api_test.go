package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
	"github.com/contrail/contrail/tenant"
)

// fakeProv is the provisioner seam: accounts and users are made and
// signed for real (over the memory store), but Sync only records what it
// was asked to push and fails while syncErr is set, as with a cell down.
type fakeProv struct {
	*provision.Provisioner
	mu      sync.Mutex
	synced  []string // account ids
	kicks   int
	syncErr error
}

func (f *fakeProv) Sync(_ context.Context, _, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = append(f.synced, id)
	return f.syncErr
}

func (f *fakeProv) Kick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kicks++
}

func (f *fakeProv) calls() (synced []string, kicks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.synced...), f.kicks
}

// fakeCells answers usage questions without a cell.
type fakeCells struct{ err error }

func (f fakeCells) Usage(context.Context, string, string) (*provision.Usage, error) {
	return &provision.Usage{Connections: 2, Streams: 1}, f.err
}

func (f fakeCells) Streams(context.Context, string, string) ([]provision.Stream, error) {
	return nil, f.err
}

type testAPI struct {
	t     *testing.T
	srv   *Server
	repo  *records.Repo
	prov  *fakeProv
	keys  *provision.Keys
	cells *fakeCells
}

func newTestAPI(t *testing.T) *testAPI {
	t.Helper()
	repo := records.New(state.NewMem())
	keys, err := provision.LoadKeys(repo)
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prov := &fakeProv{Provisioner: provision.New(keys, repo, nil, log)}
	cells := &fakeCells{}
	srv := New(Config{Repo: repo, Signer: signer, Throttle: auth.NewThrottle(), Prov: prov, Keys: keys, Cells: cells,
		DefaultCell: "c1", NatsURLs: map[string]string{"c1": "nats://cell1:4222"}, Spec: []byte("openapi: 3.1.0\n"),
		Log: log, Collectors: prov.Collectors()})
	return &testAPI{t: t, srv: srv, repo: repo, prov: prov, keys: keys, cells: cells}
}

// person stores a person and organization directly (sign-up's password
// hashing is slow and tested once) and returns an API token for them.
func (a *testAPI) person(email string) (token string, p *records.Person) {
	a.t.Helper()
	p = a.signUp(email, "!")
	return a.token(p), p
}

// signUp stores a person with the password hash and their organization.
func (a *testAPI) signUp(email, hash string) *records.Person {
	a.t.Helper()
	o := &records.Org{ID: records.NewID("org"), Name: "org of " + email}
	p := &records.Person{ID: records.NewID("usr"), Email: email, PasswordHash: hash, OrgID: o.ID, CreatedAt: time.Now().UTC()}
	if err := a.repo.SignUp(p, o); err != nil {
		a.t.Fatal(err)
	}
	return p
}

// token issues an API token for p, valid an hour.
func (a *testAPI) token(p *records.Person) string {
	a.t.Helper()
	tok, _, err := a.srv.IssueToken(records.KindAPI, "test", p, time.Hour)
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

// newReq builds a request with a JSON body (if any) and a bearer token
// (if any).
func newReq(method, path, token, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// call sends a request and returns the status and body.
func (a *testAPI) call(method, path, token, body string) (int, []byte) {
	a.t.Helper()
	req := newReq(method, path, token, body)
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// ok sends a request that must answer want and decodes the body into out.
func (a *testAPI) ok(method, path, token, body string, want int, out any) {
	a.t.Helper()
	code, data := a.call(method, path, token, body)
	if code != want {
		a.t.Fatalf("%s %s: %d %s, want %d", method, path, code, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

// problem sends a request that must fail with status and returns the
// problem detail.
func (a *testAPI) problem(method, path, token, body string, status int) Problem {
	a.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)
	if rec.Code != status {
		a.t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, rec.Code, rec.Body, status)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		a.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		a.t.Fatalf("problem %s: %v", rec.Body, err)
	}
	if p.Status != status {
		a.t.Fatalf("problem status %d, want %d", p.Status, status)
	}
	return p
}

func (a *testAPI) createAccount(token, body string) accountView {
	a.t.Helper()
	var v accountView
	a.ok("POST", "/v1/accounts", token, body, http.StatusCreated, &v)
	return v
}

func TestValidationNamesTheField(t *testing.T) {
	a := newTestAPI(t)
	tok, _ := a.person("ann@example.com")
	for _, tc := range []struct {
		path, body, field string
	}{
		{"/v1/signup", `{"email":"nope","password":"correct horse battery","organization":"A"}`, "email"},
		{"/v1/signup", `{"email":"a@example.com","password":"short","organization":"A"}`, "password"},
		{"/v1/signup", `{"email":"a@example.com","password":"correct horse battery","organization":""}`, "organization"},
		{"/v1/signup", `{"email":"a@example.com","password":"correct horse battery","organization":"A","x":1}`, "x"},
		{"/v1/signup", `{"email":7}`, "email"},
		{"/v1/signup", `[]`, "body"},
		{"/v1/signup", ``, "body"},
		{"/v1/signup", `{"email":`, "body"},
		{"/v1/accounts", `{}`, "name"},
		{"/v1/accounts", `{"name":"   "}`, "name"},
		{"/v1/accounts", `{"name":"a","limits":{"jetstream":{"max_streams":0}}}`, "limits.jetstream.max_streams"},
		{"/v1/accounts", `{"name":"a","limits":{"max_connections":-2}}`, "limits.max_connections"},
		{"/v1/accounts", `{"name":"a","limits":{"jetstream":{"max_streams":"many"}}}`, "limits.jetstream.max_streams"},
		{"/v1/accounts", `{"name":"a","limits":{"jetstream":{"bogus":1}}}`, "limits.jetstream.bogus"},
		{"/v1/tokens", `{"name":"ci","ttl_seconds":0}`, "ttl_seconds"},
		// What encoding/json alone would let through.
		{"/v1/accounts", `{"name":"a","name":"b"}`, "name"},
		{"/v1/accounts", `{"name":"a","limits":{"jetstream":{"max_streams":1,"max_streams":2}}}`, "limits.jetstream.max_streams"},
		{"/v1/accounts", "{\"name\":\"\xff\"}", "name"},
		{"/v1/accounts", `{"name":"a\ud800"}`, "name"},
		{"/v1/accounts", `{"name":"a","limits":{"max_payload":1e400}}`, "limits.max_payload"},
		{"/v1/accounts", `{"":1}`, "body"},
		{"/v1/accounts", `{"name":"a"} {}`, "body"},
		{"/v1/accounts", `[` + strings.Repeat("[", 1000), "body"},
		{"/v1/login", `{"email":"` + strings.Repeat("a", 300) + `@example.com","password":"x"}`, "email"},
	} {
		p := a.problem("POST", tc.path, tok, tc.body, http.StatusBadRequest)
		if p.Field != tc.field || p.Type != ProblemBase+"validation" || !strings.HasPrefix(p.Detail, tc.field+": ") {
			t.Errorf("POST %s %s: problem %+v, want field %q", tc.path, tc.body, p, tc.field)
		}
	}
	acc := a.createAccount(tok, `{"name":"orders"}`)
	users := "/v1/accounts/" + acc.ID + "/users"
	for _, tc := range []struct{ body, field string }{
		{`{"name":""}`, "name"},
		{`{"name":"u","permissions":{"publish":{"allow":["a..b"]}}}`, "permissions.publish.allow[0]"},
		{`{"name":"u","permissions":{"subscribe":{"deny":["ok","a.>.b"]}}}`, "permissions.subscribe.deny[1]"},
		{`{"name":"u","permissions":{"publish":{"allow":["x"],"nope":[]}}}`, "permissions.publish.nope"},
		{`{"name":"u","expires_in_seconds":-1}`, "expires_in_seconds"},
	} {
		p := a.problem("POST", users, tok, tc.body, http.StatusBadRequest)
		if p.Field != tc.field {
			t.Errorf("POST users %s: field %q, want %q (%s)", tc.body, p.Field, tc.field, p.Detail)
		}
	}
	p := a.problem("PATCH", "/v1/accounts/"+acc.ID, tok, `{"limits":null}`, http.StatusBadRequest)
	if p.Field != "limits" {
		t.Errorf("PATCH limits null: field %q", p.Field)
	}
	p = a.problem("POST", "/v1/accounts", tok, `{"name":"`+strings.Repeat("a", maxBody)+`"}`, http.StatusRequestEntityTooLarge)
	if p.Field != "body" || p.Type != ProblemBase+"too-large" {
		t.Errorf("a body over 1 MiB: %+v", p)
	}
	// Nothing was half made.
	var list items[accountView]
	a.ok("GET", "/v1/accounts", tok, "", http.StatusOK, &list)
	if len(list.Items) != 1 {
		t.Fatalf("accounts after bad bodies: %+v", list.Items)
	}
	if u, _ := a.repo.Users(acc.ID); len(u) != 0 {
		t.Fatalf("users after bad bodies: %+v", u)
	}
}

func TestAccountLifecycle(t *testing.T) {
	a := newTestAPI(t)
	tok, p := a.person("ann@example.com")
	acc := a.createAccount(tok, `{"name":"orders","limits":{"jetstream":{"max_streams":2}}}`)
	want := tenant.DefaultLimits()
	want.JetStream.MaxStreams = 2
	if acc.Limits != want || acc.NatsURL != "nats://cell1:4222" || acc.Name != "orders" || acc.PublicKey == "" {
		t.Fatalf("created %+v", acc)
	}
	rec, err := a.repo.Account(p.OrgID, acc.ID)
	if err != nil || rec.Generation != 1 || rec.Cell != "c1" {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if synced, _ := a.prov.calls(); len(synced) != 1 || synced[0] != acc.ID {
		t.Fatalf("synced %v, want the new account pushed before answering", synced)
	}

	// PATCH keeps the limits it is not given, re-signs and pushes.
	var got accountView
	a.ok("PATCH", "/v1/accounts/"+acc.ID, tok, `{"name":"orders2","limits":{"max_connections":5}}`, http.StatusOK, &got)
	want.MaxConnections = 5
	if got.Limits != want || got.Name != "orders2" {
		t.Fatalf("after PATCH %+v", got)
	}
	rec, _ = a.repo.Account(p.OrgID, acc.ID)
	ac, err := jwt.DecodeAccountClaims(rec.JWT)
	if err != nil || rec.Generation != 2 || tenant.LimitsOf(ac) != want || ac.Name != "orders2" {
		t.Fatalf("after PATCH: generation %d jwt limits %+v (%v)", rec.Generation, tenant.LimitsOf(ac), err)
	}

	// A user: creds once, never listed; revoking it re-signs with the
	// revocation and pushes.
	var u natsUserView
	a.ok("POST", "/v1/accounts/"+acc.ID+"/users", tok, `{"name":"alice","expires_in_seconds":60}`, http.StatusCreated, &u)
	if !strings.Contains(u.Creds, "NATS USER JWT") || u.ExpiresAt == nil || u.PublicKey == "" {
		t.Fatalf("created user %+v", u)
	}
	var users items[natsUserView]
	a.ok("GET", "/v1/accounts/"+acc.ID+"/users", tok, "", http.StatusOK, &users)
	if len(users.Items) != 1 || users.Items[0].Creds != "" {
		t.Fatalf("users %+v", users.Items)
	}
	a.ok("DELETE", "/v1/accounts/"+acc.ID+"/users/"+u.ID, tok, "", http.StatusNoContent, nil)
	rec, _ = a.repo.Account(p.OrgID, acc.ID)
	if ac, _ = jwt.DecodeAccountClaims(rec.JWT); ac.Revocations[u.PublicKey] == 0 || rec.Generation != 3 {
		t.Fatalf("after revoking: generation %d revocations %v", rec.Generation, ac.Revocations)
	}
	a.problem("DELETE", "/v1/accounts/"+acc.ID+"/users/"+u.ID, tok, "", http.StatusNotFound)

	// Deleting leaves a tombstone for provisioning, gone from the API.
	a.ok("DELETE", "/v1/accounts/"+acc.ID, tok, "", http.StatusNoContent, nil)
	a.problem("GET", "/v1/accounts/"+acc.ID, tok, "", http.StatusNotFound)
	if rec, err := a.repo.AccountRecord(p.OrgID, acc.ID); err != nil || !rec.Deleted || rec.Generation != 4 {
		t.Fatalf("tombstone %+v, %v", rec, err)
	}
	if synced, kicks := a.prov.calls(); len(synced) != 4 || kicks != 0 {
		t.Fatalf("synced %d times, kicked %d; want every change pushed, no kicks", len(synced), kicks)
	}
}

// A push that fails does not fail the request: the change is stored and
// the reconcile loop is kicked to retry it.
func TestPushFailureKicksReconcile(t *testing.T) {
	a := newTestAPI(t)
	tok, _ := a.person("ann@example.com")
	a.prov.syncErr = provision.ErrCellUnavailable
	acc := a.createAccount(tok, `{"name":"orders"}`)
	a.ok("PATCH", "/v1/accounts/"+acc.ID, tok, `{"name":"renamed"}`, http.StatusOK, nil)
	if synced, kicks := a.prov.calls(); len(synced) != 2 || kicks != 2 {
		t.Fatalf("synced %d kicked %d, want 2 and 2", len(synced), kicks)
	}
}

// Another organization's account is a 404 on every route, never a 403,
// and is left untouched.
func TestAnotherOrgsAccountIsNotFound(t *testing.T) {
	a := newTestAPI(t)
	ann, annP := a.person("ann@example.com")
	bob, _ := a.person("bob@example.com")
	acc := a.createAccount(ann, `{"name":"private"}`)
	var u natsUserView
	a.ok("POST", "/v1/accounts/"+acc.ID+"/users", ann, `{"name":"alice"}`, http.StatusCreated, &u)
	base := "/v1/accounts/" + acc.ID
	for _, r := range []struct{ method, path, body string }{
		{"GET", base, ""},
		{"PATCH", base, `{"name":"stolen"}`},
		{"DELETE", base, ""},
		{"GET", base + "/usage", ""},
		{"GET", base + "/streams", ""},
		{"GET", base + "/users", ""},
		{"POST", base + "/users", `{"name":"mallory"}`},
		{"DELETE", base + "/users/" + u.ID, ""},
	} {
		p := a.problem(r.method, r.path, bob, r.body, http.StatusNotFound)
		if p.Type != ProblemBase+"not-found" {
			t.Errorf("%s %s as another org: %+v", r.method, r.path, p)
		}
	}
	var list items[accountView]
	a.ok("GET", "/v1/accounts", bob, "", http.StatusOK, &list)
	if len(list.Items) != 0 {
		t.Fatalf("bob lists %+v", list.Items)
	}
	rec, err := a.repo.Account(annP.OrgID, acc.ID)
	if err != nil || rec.Name != "private" || rec.Generation != 1 {
		t.Fatalf("ann's account after bob's attempts: %+v, %v", rec, err)
	}
	if users, _ := a.repo.Users(acc.ID); len(users) != 1 {
		t.Fatalf("ann's users after bob's attempts: %+v", users)
	}
}

func TestDeletedTokenIsUnauthorized(t *testing.T) {
	a := newTestAPI(t)
	session, _ := a.person("ann@example.com")
	var tok tokenView
	a.ok("POST", "/v1/tokens", session, `{"name":"ci","ttl_seconds":3600}`, http.StatusCreated, &tok)
	a.ok("GET", "/v1/accounts", tok.Token, "", http.StatusOK, nil)
	a.ok("DELETE", "/v1/tokens/"+tok.ID, session, "", http.StatusNoContent, nil)
	p := a.problem("GET", "/v1/accounts", tok.Token, "", http.StatusUnauthorized)
	if p.Type != ProblemBase+"unauthorized" {
		t.Fatalf("deleted token: %+v", p)
	}
	a.ok("GET", "/v1/accounts", session, "", http.StatusOK, nil)
	// Another person cannot delete someone's token.
	bob, _ := a.person("bob@example.com")
	a.problem("DELETE", "/v1/tokens/"+tok.ID, bob, "", http.StatusNotFound)
	// No header, another scheme, garbage: 401.
	a.problem("GET", "/v1/accounts", "", "", http.StatusUnauthorized)
	a.problem("GET", "/v1/accounts", "not.a.jwt", "", http.StatusUnauthorized)
	a.problem("GET", "/v1/nothing-here", "", "", http.StatusUnauthorized)
}

func TestSignupAndLogin(t *testing.T) {
	a := newTestAPI(t)
	var s signupResp
	a.ok("POST", "/v1/signup", "", `{"email":"Ann@Example.com","password":"correct horse battery","organization":"Acme"}`,
		http.StatusCreated, &s)
	if s.Token == "" || s.Organization.Name != "Acme" || s.User.Email != "Ann@Example.com" {
		t.Fatalf("signup %+v", s)
	}
	a.problem("POST", "/v1/signup", "", `{"email":"ann@example.com","password":"another long one","organization":"B"}`, http.StatusConflict)
	var l loginResp
	a.ok("POST", "/v1/login", "", `{"email":"ann@example.com","password":"correct horse battery"}`, http.StatusOK, &l)
	a.ok("GET", "/v1/tokens", l.Token, "", http.StatusOK, nil)
	a.problem("POST", "/v1/login", "", `{"email":"ann@example.com","password":"wrong password"}`, http.StatusUnauthorized)
}

func TestUsageCellUnavailable(t *testing.T) {
	a := newTestAPI(t)
	tok, _ := a.person("ann@example.com")
	acc := a.createAccount(tok, `{"name":"orders"}`)
	var u provision.Usage
	a.ok("GET", "/v1/accounts/"+acc.ID+"/usage", tok, "", http.StatusOK, &u)
	if u.Connections != 2 {
		t.Fatalf("usage %+v", u)
	}
	a.cells.err = provision.ErrCellUnavailable
	a.problem("GET", "/v1/accounts/"+acc.ID+"/usage", tok, "", http.StatusServiceUnavailable)
	a.problem("GET", "/v1/accounts/"+acc.ID+"/streams", tok, "", http.StatusServiceUnavailable)
}

func TestResolver(t *testing.T) {
	a := newTestAPI(t)
	tok, p := a.person("ann@example.com")
	acc := a.createAccount(tok, `{"name":"orders"}`)
	code, body := a.call("GET", "/jwt/v1/accounts/"+acc.PublicKey, "", "")
	rec, _ := a.repo.Account(p.OrgID, acc.ID)
	if code != http.StatusOK || string(body) != rec.JWT {
		t.Fatalf("resolver for the account: %d %q", code, body)
	}
	if code, body := a.call("GET", "/jwt/v1/accounts/"+a.keys.SystemPub, "", ""); code != http.StatusOK || string(body) != a.keys.SystemJWT {
		t.Fatalf("resolver for the system account: %d %q", code, body)
	}
	if code, _ := a.call("GET", "/jwt/v1/accounts/ANOTHERKEY", "", ""); code != http.StatusNotFound {
		t.Fatalf("resolver for an unknown key: %d", code)
	}
	if code, _ := a.call("GET", "/jwt/v1/accounts/", "", ""); code != http.StatusOK {
		t.Fatalf("resolver ping: %d", code)
	}
	// A deleted account is a 404 at once (nodes take it as the delete),
	// and stays one after its record is purged.
	a.ok("DELETE", "/v1/accounts/"+acc.ID, tok, "", http.StatusNoContent, nil)
	if code, _ := a.call("GET", "/jwt/v1/accounts/"+acc.PublicKey, "", ""); code != http.StatusNotFound {
		t.Fatalf("resolver for a deleted account: %d", code)
	}
	rec, _ = a.repo.AccountRecord(p.OrgID, acc.ID)
	if err := a.repo.PurgeAccount(p.OrgID, acc.ID, rec.Generation, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, _ := a.call("GET", "/jwt/v1/accounts/"+acc.PublicKey, "", ""); code != http.StatusNotFound {
		t.Fatalf("resolver for a purged account: %d", code)
	}
}

func TestMetricsIncludeProvisioning(t *testing.T) {
	a := newTestAPI(t)
	code, body := a.call("GET", "/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, name := range []string{"contrail_controlplane_reconcile_passes_total", "contrail_controlplane_pushes_total",
		"contrail_controlplane_push_failures_total", "contrail_controlplane_accounts_behind"} {
		if !strings.Contains(string(body), "\n"+name+" ") && !strings.Contains(string(body), "\n"+name+"{") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
