package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
	"github.com/contrail/contrail/controlplane/usage"
	"github.com/contrail/contrail/openapi/spectest"
)

// specCheck holds exchanges with httptest's default host to the spec.
var specCheck = sync.OnceValues(func() (*spectest.Checker, error) { return spectest.New("http://example.com") })

// send serves one request and holds the request (unless bad marks it
// malformed on purpose) and the response to openapi.yaml.
func (a *testAPI) send(req *http.Request, bad bool) *httptest.ResponseRecorder {
	a.t.Helper()
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)

	check, err := specCheck()
	if err != nil {
		a.t.Fatal(err)
	}
	// httptest's request names only the path; the spec is matched
	// against the full URL.
	full := req.Clone(req.Context())
	full.URL.Scheme, full.URL.Host = "http", req.Host
	for _, err := range check.Check(spectest.Exchange{Request: full, RequestBody: body, SkipRequest: bad,
		Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}) {
		a.t.Error(err)
	}
	return rec
}

// expect sends a request through the spec check and requires status.
func (a *testAPI) expect(req *http.Request, status int, out any) *httptest.ResponseRecorder {
	a.t.Helper()
	rec := a.send(req, req.Context().Value(badKey{}) != nil)
	if rec.Code != status {
		a.t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL, rec.Code, rec.Body, status)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			a.t.Fatalf("%s %s: %v in %s", req.Method, req.URL, err, rec.Body)
		}
	}
	return rec
}

// fieldOf sends a request that must be a 400 naming field.
func (a *testAPI) fieldOf(req *http.Request) string {
	a.t.Helper()
	var p Problem
	a.expect(req, http.StatusBadRequest, &p)
	return p.Field
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestUsageHistoryRoute(t *testing.T) {
	a := newTestAPI(t)
	clock := &testClock{now: time.Now().UTC().Truncate(time.Second)}
	a.srv.Now = clock.Now
	tok, me := a.person("hist@example.com")
	_, them := a.person("other@example.com")
	acc := a.createAccount(tok, `{"name":"h"}`)
	smp, err := usage.New(usage.Config{Store: state.NewMem(), Accounts: a.repo, Cells: a.cells, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	a.srv.Usage, a.srv.UsageInterval = smp, time.Minute
	path := "/v1/accounts/" + acc.ID + "/usage/history"

	var h historyView
	a.expect(newReq("GET", path, tok, ""), http.StatusOK, &h)
	if h.Window != "1h" || len(h.Series.Connections) != 0 || h.IntervalSeconds != 60 {
		t.Fatalf("history before any sample: %+v", h)
	}
	first := clock.Now()
	if err := smp.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Hour)
	if err := smp.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Fresh tokens: the first ones lived an hour.
	tok, other := a.token(me), a.token(them)
	a.expect(newReq("GET", path, tok, ""), http.StatusOK, &h)
	if len(h.Series.Connections) != 1 || h.Series.Connections[0].Y != 2 || h.Series.Streams[0].Y != 1 ||
		h.Series.Connections[0].X != clock.Now().Unix() {
		t.Fatalf("last hour: %+v, want one sample of 2 connections at %d", h.Series, clock.Now().Unix())
	}
	a.expect(newReq("GET", path+"?window=24h", tok, ""), http.StatusOK, &h)
	if len(h.Series.Messages) != 2 || h.Series.Messages[0].X != first.Unix() || !h.To.Equal(clock.Now()) {
		t.Fatalf("last day: %+v, want two samples from %d", h, first.Unix())
	}
	for _, bad := range []string{"?window=7d", "?window=1h&window=24h", "?window=%00", "?window=1H"} {
		if f := a.fieldOf(badReq(newReq("GET", path+bad, tok, ""))); f != "window" {
			t.Fatalf("%s: field %q, want window", bad, f)
		}
	}
	a.expect(newReq("GET", path, other, ""), http.StatusNotFound, nil)
	a.expect(newReq("GET", path, "", ""), http.StatusUnauthorized, nil)
	a.expect(newReq("GET", "/v1/accounts/acc_nope/usage/history", tok, ""), http.StatusNotFound, nil)
}

// badReq marks a request malformed on purpose; send checks only its
// response.
func badReq(req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), badKey{}, true))
}

type badKey struct{}

// streamCells serves a fixed list of streams.
type streamCells struct {
	fakeCells
	streams []provision.Stream
}

func (s *streamCells) Streams(context.Context, string, string) ([]provision.Stream, error) {
	return s.streams, nil
}

func TestStreamsArePaged(t *testing.T) {
	a := newTestAPI(t)
	cells := &streamCells{}
	for i := range 5 {
		cells.streams = append(cells.streams, provision.Stream{Name: fmt.Sprintf("S%d", i), Subjects: []string{fmt.Sprintf("s%d.>", i)},
			Storage: "file", Replicas: 1, Messages: uint64(i), Consumers: i})
	}
	a.srv.Cells = cells
	tok, _ := a.person("streams@example.com")
	acc := a.createAccount(tok, `{"name":"s"}`)
	path := "/v1/accounts/" + acc.ID + "/streams"
	var p page[provision.Stream]
	a.expect(newReq("GET", path, tok, ""), http.StatusOK, &p)
	if len(p.Items) != 5 || p.Total != 5 || p.Limit != defaultPageLimit {
		t.Fatalf("first page: %+v", p)
	}
	a.expect(newReq("GET", path+"?offset=1&limit=2", tok, ""), http.StatusOK, &p)
	if len(p.Items) != 2 || p.Items[0].Name != "S1" || p.Items[1].Name != "S2" || p.Total != 5 || p.Offset != 1 {
		t.Fatalf("offset 1 limit 2: %+v", p)
	}
	a.expect(newReq("GET", path+"?offset=4&limit=1000", tok, ""), http.StatusOK, &p)
	if len(p.Items) != 1 || p.Items[0].Name != "S4" {
		t.Fatalf("last page: %+v", p)
	}
	a.expect(newReq("GET", path+"?offset=99999999", tok, ""), http.StatusOK, &p)
	if len(p.Items) != 0 || p.Total != 5 {
		t.Fatalf("past the end: %+v", p)
	}
	for q, field := range map[string]string{
		"?offset=-1": "offset", "?offset=x": "offset", "?offset=99999999999999999999": "offset",
		"?limit=0": "limit", "?limit=1001": "limit", "?limit=-5": "limit", "?limit=2.5": "limit", "?limit=1&limit=2": "limit",
	} {
		if f := a.fieldOf(badReq(newReq("GET", path+q, tok, ""))); f != field {
			t.Fatalf("%s: field %q, want %q", q, f, field)
		}
	}
}

// signUpWithPassword stores a person whose password is pw.
func (a *testAPI) signUpWithPassword(email, pw string) {
	a.t.Helper()
	hash, err := auth.HashPassword(pw)
	if err != nil {
		a.t.Fatal(err)
	}
	a.signUp(email, hash)
}

func withCookie(req *http.Request, c *http.Cookie, fetchSite string) *http.Request {
	req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	if fetchSite != "" {
		req.Header.Set("Sec-Fetch-Site", fetchSite)
	}
	return req
}

func TestSessionCookie(t *testing.T) {
	a := newTestAPI(t)
	a.signUpWithPassword("cookie@example.com", "correct horse battery")
	login := `{"email":"cookie@example.com","password":"correct horse battery"}`

	// A login from another site is refused before the password is checked.
	req := newReq("POST", "/v1/session", "", login)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	a.expect(req, http.StatusForbidden, nil)

	var s sessionView
	rec := a.expect(newReq("POST", "/v1/session", "", login), http.StatusCreated, &s)
	if s.User.Email != "cookie@example.com" || s.Kind != records.KindSession {
		t.Fatalf("session: %+v", s)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	c := cookies[0]
	if c.Name != SessionCookie || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" || c.MaxAge <= 0 {
		t.Fatalf("session cookie %+v: want __Host-, HttpOnly, Secure, SameSite=Strict, Path=/, host-only", c)
	}
	if strings.Contains(rec.Body.String(), c.Value) {
		t.Fatal("the session token is in the body as well as the cookie")
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q on the session answer", cc)
	}

	a.expect(withCookie(newReq("GET", "/v1/session", "", ""), c, "same-origin"), http.StatusOK, &s)
	// Reads from anywhere are harmless; writes from another origin are not.
	a.expect(withCookie(newReq("GET", "/v1/accounts", "", ""), c, "cross-site"), http.StatusOK, nil)
	for _, site := range []string{"cross-site", "same-site"} {
		var p Problem
		a.expect(withCookie(newReq("POST", "/v1/accounts", "", `{"name":"forged"}`), c, site), http.StatusForbidden, &p)
		if !strings.HasSuffix(p.Type, "/forbidden") {
			t.Fatalf("problem %+v", p)
		}
	}
	req = withCookie(newReq("POST", "/v1/accounts", "", `{"name":"forged"}`), c, "")
	req.Header.Set("Origin", "http://evil.example")
	a.expect(req, http.StatusForbidden, nil)
	var list items[accountView]
	a.expect(withCookie(newReq("GET", "/v1/accounts", "", ""), c, ""), http.StatusOK, &list)
	if len(list.Items) != 0 {
		t.Fatalf("a forged request created %+v", list.Items)
	}
	a.expect(withCookie(newReq("POST", "/v1/accounts", "", `{"name":"mine"}`), c, "same-origin"), http.StatusCreated, nil)

	// Log out: the cookie is cleared and the token revoked.
	rec = a.expect(withCookie(newReq("DELETE", "/v1/session", "", ""), c, "same-origin"), http.StatusNoContent, nil)
	if cl := rec.Result().Cookies(); len(cl) != 1 || cl[0].MaxAge >= 0 {
		t.Fatalf("logout cookies %+v, want the session cookie cleared", cl)
	}
	a.expect(withCookie(newReq("GET", "/v1/session", "", ""), c, "same-origin"), http.StatusUnauthorized, nil)

	// An API token is not a session: logging it out is refused.
	tok, _ := a.person("api@example.com")
	a.expect(newReq("DELETE", "/v1/session", tok, ""), http.StatusConflict, nil)
	a.expect(newReq("GET", "/v1/session", tok, ""), http.StatusOK, &s)
	if s.Kind != records.KindAPI {
		t.Fatalf("session of an API token: %+v", s)
	}
	// A garbage cookie is a 401, not a 500.
	a.expect(withCookie(newReq("GET", "/v1/session", "", ""), &http.Cookie{Name: SessionCookie, Value: "garbage"}, ""), http.StatusUnauthorized, nil)
}

func TestAPITokensArePrefixedAndTrackUse(t *testing.T) {
	a := newTestAPI(t)
	clock := &testClock{now: time.Now().UTC().Truncate(time.Minute)}
	a.srv.Now = clock.Now
	tok, _ := a.person("tok@example.com")
	var nt tokenView
	rec := a.expect(newReq("POST", "/v1/tokens", tok, `{"name":"tf"}`), http.StatusCreated, &nt)
	if !strings.HasPrefix(nt.Token, APITokenPrefix) {
		t.Fatalf("new token %q lacks %q", nt.Token, APITokenPrefix)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q on a new token", cc)
	}
	lastUsed := func() *time.Time {
		t.Helper()
		var l items[tokenView]
		a.expect(newReq("GET", "/v1/tokens", tok, ""), http.StatusOK, &l)
		for _, v := range l.Items {
			if v.ID == nt.ID {
				return v.LastUsedAt
			}
		}
		t.Fatalf("token %s not listed", nt.ID)
		return nil
	}
	if lu := lastUsed(); lu != nil {
		t.Fatalf("unused token has last use %v", lu)
	}
	a.expect(newReq("GET", "/v1/accounts", nt.Token, ""), http.StatusOK, nil)
	if lu := lastUsed(); lu == nil || !lu.Equal(clock.Now()) {
		t.Fatalf("last use %v, want %v", lu, clock.Now())
	}
	// Within the minute the record is not rewritten; after it, it is.
	clock.advance(30 * time.Second)
	a.expect(newReq("GET", "/v1/accounts", nt.Token, ""), http.StatusOK, nil)
	if lu := lastUsed(); !lu.Equal(clock.Now().Add(-30 * time.Second)) {
		t.Fatalf("last use %v moved within the minute", lu)
	}
	clock.advance(time.Minute)
	a.expect(newReq("GET", "/v1/accounts", nt.Token, ""), http.StatusOK, nil)
	if lu := lastUsed(); !lu.Equal(clock.Now().Truncate(time.Minute)) {
		t.Fatalf("last use %v, want %v", lu, clock.Now().Truncate(time.Minute))
	}
	// The prefix is checked against the kind: a session token dressed
	// as an API token is refused, and the bare JWT of an API token works.
	a.signUpWithPassword("s@example.com", "correct horse battery")
	var lr loginResp
	a.expect(newReq("POST", "/v1/login", "", `{"email":"s@example.com","password":"correct horse battery"}`), http.StatusOK, &lr)
	if strings.HasPrefix(lr.Token, APITokenPrefix) {
		t.Fatal("a session token has the API prefix")
	}
	a.expect(newReq("GET", "/v1/accounts", APITokenPrefix+lr.Token, ""), http.StatusUnauthorized, nil)
	a.expect(newReq("GET", "/v1/accounts", strings.TrimPrefix(nt.Token, APITokenPrefix), ""), http.StatusOK, nil)
}

func TestMembers(t *testing.T) {
	a := newTestAPI(t)
	tok, p := a.person("m@example.com")
	a.person("elsewhere@example.com")
	var l items[memberView]
	a.expect(newReq("GET", "/v1/members", tok, ""), http.StatusOK, &l)
	if len(l.Items) != 1 || l.Items[0].ID != p.ID || l.Items[0].Email != "m@example.com" {
		t.Fatalf("members %+v", l.Items)
	}
}

// TestConsoleFiles: the console is served at / with a CSP that allows
// no inline script or style, directories are not listed, and API
// answers are not cached.
func TestConsoleFiles(t *testing.T) {
	a := newTestAPI(t)
	for path, ctype := range map[string]string{"/": "text/html", "/app/main.js": "text/javascript",
		"/app/style.css": "text/css", "/vendor/htm-preact-standalone.module.js": "text/javascript"} {
		rec := httptest.NewRecorder()
		a.srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), ctype) {
			t.Fatalf("GET %s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: no nosniff", path)
		}
	}
	for _, path := range []string{"/app/", "/vendor", "/app/../web.go", "/nothing.js", "/app/missing.js"} {
		rec := httptest.NewRecorder()
		a.srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusNotFound {
			t.Fatalf("GET %s: %d, want 404", path, rec.Code)
		}
	}
	tok, _ := a.person("c@example.com")
	rec := a.expect(newReq("GET", "/v1/accounts", tok, ""), http.StatusOK, nil)
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("API answer Cache-Control %q", rec.Header().Get("Cache-Control"))
	}
}
