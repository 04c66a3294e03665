package main

// The REST API against hostile input: every route in openapi.yaml is
// sent malformed, wrong-typed, out-of-range, oversized and invalid-UTF-8
// values, unknown and repeated fields, bad ids and bad credentials. Each
// answer is a problem+json 4xx naming the field at fault (where there is
// one), the control plane keeps serving, and nothing it holds changed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/contrail/contrail/openapi"
)

// hostileCase is one request and the answer it must get.
type hostileCase struct {
	method, path string
	body         string // sent as is; "" sends none
	token        string // bearer token; "" sends none
	header       map[string]string
	status       int    // 0: any 4xx
	field        string // the problem's field, when it must name one
	plain        bool   // the answer is not problem+json (the resolver's 404)
	offSpec      bool   // a method the spec does not list: not validated
}

// bodyField is a field of a request body and the kind of value it takes.
type bodyField struct {
	name string
	kind string // "string", "int" or "object"
}

// bodyRoute is a route that takes a JSON body.
type bodyRoute struct {
	method, path string
	valid        map[string]any // a body that would succeed
	fields       []bodyField
	required     []string // string fields that must be given
}

func TestCPHostileInput(t *testing.T) {
	w := startCPWorld(t)
	waitReadyz(t, w.api, 200)
	a, _ := w.api.signup("owner@example.com", "Owner")
	acc := a.createAccount("victim", nil)
	user, _ := a.createUser(acc.ID, "u", w.dir)
	var tok cpToken
	a.do("POST", "/v1/tokens", map[string]any{"name": "ci"}, 201, &tok)
	token := a.token
	before := cpSnapshot(t, a, acc.ID)

	acctPath := "/v1/accounts/" + acc.ID
	routes := []bodyRoute{
		{"POST", "/v1/signup", map[string]any{"email": "new@example.com", "password": "correct horse battery", "organization": "New"},
			[]bodyField{{"email", "string"}, {"password", "string"}, {"organization", "string"}}, []string{"email", "password", "organization"}},
		{"POST", "/v1/login", map[string]any{"email": "owner@example.com", "password": "correct horse battery"},
			[]bodyField{{"email", "string"}, {"password", "string"}}, []string{"email", "password"}},
		{"POST", "/v1/session", map[string]any{"email": "owner@example.com", "password": "correct horse battery"},
			[]bodyField{{"email", "string"}, {"password", "string"}}, []string{"email", "password"}},
		{"POST", "/v1/tokens", map[string]any{"name": "t2", "ttl_seconds": 60},
			[]bodyField{{"name", "string"}, {"ttl_seconds", "int"}}, []string{"name"}},
		{"POST", "/v1/accounts", map[string]any{"name": "a2"},
			[]bodyField{{"name", "string"}, {"limits", "object"}}, []string{"name"}},
		{"PATCH", acctPath, map[string]any{"name": "renamed"},
			[]bodyField{{"name", "string"}, {"limits", "object"}}, nil},
		{"POST", acctPath + "/users", map[string]any{"name": "u2"},
			[]bodyField{{"name", "string"}, {"permissions", "object"}, {"expires_in_seconds", "int"}}, []string{"name"}},
	}
	var cases []hostileCase
	for _, r := range routes {
		tk := token
		if r.path == "/v1/signup" || r.path == "/v1/login" || r.path == "/v1/session" {
			tk = ""
		}
		add := func(body string, status int, field string) {
			cases = append(cases, hostileCase{method: r.method, path: r.path, body: body, token: tk, status: status, field: field})
		}
		with := func(field string, raw string) string { // the valid body with one field's raw JSON replaced
			parts := []string{fmt.Sprintf("%q:%s", field, raw)}
			keys := sortedKeys(r.valid)
			for _, k := range keys {
				if k != field {
					b, _ := json.Marshal(r.valid[k])
					parts = append(parts, fmt.Sprintf("%q:%s", k, b))
				}
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
		// Not one JSON object.
		for _, b := range []string{"", " ", "null", "[]", `"x"`, "42", "true", "{", `{"name":`, "{}{}", `{} x`, "\xff\xfe",
			strings.Repeat("[", 100000), `{"a":` + strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1001)} {
			field := "body"
			if strings.HasPrefix(b, `{"a":`) {
				field = "" // too deep: named at the depth where it stopped
			}
			add(b, 400, field)
		}
		// Too large: one byte over 1 MiB, and far over.
		big := func(n int) string { return `{"name":"` + strings.Repeat("a", n) + `"}` }
		add(big(1<<20), 413, "body")
		add(big(4<<20), 413, "body")
		// Unknown, repeated and nameless fields.
		add(with("zzz", "1"), 400, "zzz")
		add(with("", "1"), 400, "body")
		f0 := r.fields[0].name
		add(strings.Replace(with(f0, `"a"`), "{", fmt.Sprintf(`{%q:"b",`, f0), 1), 400, f0)
		add(with("\xff", "1"), 400, "")
		for _, f := range r.fields {
			switch f.kind {
			case "string":
				for _, raw := range []string{"5", "true", "[]", "{}", "1e400"} {
					add(with(f.name, raw), 400, f.name)
				}
				add(with(f.name, "\"\xff\xfe\""), 400, f.name)
				add(with(f.name, `"a\ud800b"`), 400, f.name)
				add(with(f.name, `"`+strings.Repeat("é", 2000)+`"`), 400, f.name)
				if r.path != "/v1/login" && r.path != "/v1/session" && f.name != "password" {
					add(with(f.name, `"a\u0000b"`), 400, f.name)
					add(with(f.name, `"\u202e"`), 400, f.name)
				}
			case "int":
				for _, raw := range []string{`"60"`, "1.5", "1e400", "-1e400", "-1", "0",
					fmt.Sprint(uint64(math.MaxUint64)), "9223372036854775808", "-9223372036854775809",
					fmt.Sprint(math.MaxInt64), "null", "[]", "true"} {
					if raw == "null" {
						continue // null is "not given", a default
					}
					add(with(f.name, raw), 400, f.name)
				}
			case "object":
				for _, raw := range []string{`"x"`, "[]", "5"} {
					add(with(f.name, raw), 400, f.name)
				}
			}
		}
		for _, f := range r.required {
			add(with(f, "null"), 400, f)
			add(with(f, `""`), 400, f)
		}
	}
	// Limits and permissions, field by field.
	for _, path := range []string{"/v1/accounts", acctPath} {
		method := map[string]string{"/v1/accounts": "POST", acctPath: "PATCH"}[path]
		for _, c := range []struct{ limits, field string }{
			{`{"max_connections":-2}`, "limits.max_connections"},
			{`{"max_connections":0}`, "limits.max_connections"},
			{`{"max_payload":-9223372036854775808}`, "limits.max_payload"},
			{`{"max_payload":18446744073709551615}`, "limits.max_payload"},
			{`{"jetstream":{"max_streams":"1"}}`, "limits.jetstream.max_streams"},
			{`{"jetstream":{"max_streams":1.5}}`, "limits.jetstream.max_streams"},
			{`{"jetstream":{"max_memory":-5}}`, "limits.jetstream.max_memory"},
			{`{"jetstream":{"zzz":1}}`, "limits.jetstream.zzz"},
			{`{"jetstream":[]}`, "limits.jetstream"},
			{`{"jetstream":{"max_streams":1,"max_streams":2}}`, "limits.jetstream.max_streams"},
			{`{"zzz":{}}`, "limits.zzz"},
			{`{"jetstream":{"tiers":{}}}`, "limits.jetstream.tiers"},
			{`{"jetstream":{"tiers":[]}}`, "limits.jetstream.tiers"},
			{`{"jetstream":{"tiers":{"R2":{}}}}`, "limits.jetstream.tiers.R2"},
			{`{"jetstream":{"tiers":{"r3":{}}}}`, "limits.jetstream.tiers.r3"},
			{`{"jetstream":{"tiers":{"R3":{"max_memory":0,"max_storage":1,"max_streams":0,"max_consumers":1,"max_ack_pending":1,"max_stream_bytes":1}}}}`, "limits.jetstream.tiers.R3.max_streams"},
			{`{"jetstream":{"tiers":{"R3":{"max_memory":0,"max_storage":-2,"max_streams":1,"max_consumers":1,"max_ack_pending":1,"max_stream_bytes":1}}}}`, "limits.jetstream.tiers.R3.max_storage"},
			{`{"jetstream":{"tiers":{"R3":{"max_memory":0,"max_storage":1,"max_streams":1,"max_consumers":1,"max_ack_pending":1}}}}`, "limits.jetstream.tiers.R3.max_stream_bytes"},
			{`{"jetstream":{"tiers":{"R1":{"max_memory":0,"max_storage":1,"max_streams":1,"max_consumers":1,"max_ack_pending":1,"max_stream_bytes":"1"}}}}`, "limits.jetstream.tiers.R1.max_stream_bytes"},
			{`{"jetstream":{"tiers":{"R3":{"max_memory":0,"max_storage":1,"max_streams":1,"max_consumers":1,"max_ack_pending":1,"max_stream_bytes":1,"zzz":1}}}}`, "limits.jetstream.tiers.R3.zzz"},
			{`{"jetstream":{"tiers":{"R3":{"max_memory":0,"max_storage":1e30,"max_streams":1,"max_consumers":1,"max_ack_pending":1,"max_stream_bytes":1}}}}`, "limits.jetstream.tiers.R3.max_storage"},
			{`{"jetstream":{"tiers":{"R3":null,"R1":null}}}`, "limits.jetstream.tiers"},
		} {
			cases = append(cases, hostileCase{method: method, path: path, token: token, status: 400, field: c.field,
				body: `{"name":"x","limits":` + c.limits + `}`})
		}
	}
	usersPath := acctPath + "/users"
	for _, c := range []struct{ perms, field string }{
		{`{"publish":{"allow":["a..b"]}}`, "permissions.publish.allow[0]"},
		{`{"publish":{"allow":["ok",""]}}`, "permissions.publish.allow[1]"},
		{`{"subscribe":{"deny":["a b"]}}`, "permissions.subscribe.deny[0]"},
		{`{"subscribe":{"deny":["a\u0000"]}}`, "permissions.subscribe.deny[0]"},
		{`{"subscribe":{"deny":["a\ud800"]}}`, "permissions.subscribe.deny[0]"},
		{`{"publish":{"allow":[">.x"]}}`, "permissions.publish.allow[0]"},
		{`{"publish":{"allow":["a*"]}}`, "permissions.publish.allow[0]"},
		{`{"publish":{"allow":"a"}}`, "permissions.publish.allow"},
		{`{"publish":{"allow":[5]}}`, "permissions.publish.allow"},
		{`{"publish":{"zzz":[]}}`, "permissions.publish.zzz"},
		{`{"publish":{"allow":["` + strings.Repeat("a", 1025) + `"]}}`, "permissions.publish.allow[0]"},
		{`{"publish":{"allow":[` + strings.TrimSuffix(strings.Repeat(`"a",`, 257), ",") + `]}}`, "permissions.publish.allow"},
	} {
		cases = append(cases, hostileCase{method: "POST", path: usersPath, token: token, status: 400, field: c.field,
			body: `{"name":"x","permissions":` + c.perms + `}`})
	}

	// Query parameters out of range, malformed or repeated.
	for _, c := range []struct{ query, field string }{
		{"/usage/history?window=7d", "window"}, {"/usage/history?window=1h&window=24h", "window"},
		{"/usage/history?window=%ff", "window"}, {"/usage/history?window=" + strings.Repeat("1", 5000), "window"},
		{"/streams?offset=-1", "offset"}, {"/streams?offset=1e3", "offset"}, {"/streams?offset=99999999999999999999", "offset"},
		{"/streams?limit=0", "limit"}, {"/streams?limit=1001", "limit"}, {"/streams?limit=%00", "limit"},
		{"/streams?limit=1&limit=2", "limit"},
	} {
		cases = append(cases, hostileCase{method: "GET", path: acctPath + c.query, token: token, status: 400, field: c.field})
	}

	// Ids that are not ids, for every route with one.
	badIDs := []string{"nope", "%ff", "%00", "..%2f..%2f" + acc.ID, strings.Repeat("x", 4096), acc.ID + "%20", "acc_" + strings.Repeat("a", 16)}
	for _, id := range badIDs {
		for _, c := range []struct{ method, path string }{
			{"GET", "/v1/accounts/" + id}, {"PATCH", "/v1/accounts/" + id}, {"DELETE", "/v1/accounts/" + id},
			{"GET", "/v1/accounts/" + id + "/usage"}, {"GET", "/v1/accounts/" + id + "/streams"},
			{"GET", "/v1/accounts/" + id + "/usage/history"},
			{"GET", "/v1/accounts/" + id + "/users"}, {"POST", "/v1/accounts/" + id + "/users"},
			{"DELETE", "/v1/accounts/" + id + "/users/" + user.ID}, {"DELETE", acctPath + "/users/" + id},
			{"DELETE", "/v1/tokens/" + id},
		} {
			body := ""
			if c.method == "PATCH" || c.method == "POST" {
				body = `{"name":"x"}`
			}
			cases = append(cases, hostileCase{method: c.method, path: c.path, body: body, token: token, status: 404})
		}
		cases = append(cases, hostileCase{method: "GET", path: "/jwt/v1/accounts/" + id, status: 404, plain: true})
	}
	cases = append(cases, hostileCase{method: "GET", path: "/jwt/v1/accounts/" + strings.ToLower(acc.PublicKey), status: 404, plain: true})

	// Credentials that are not credentials, for every authenticated route.
	authed := []struct{ method, path string }{
		{"GET", "/v1/tokens"}, {"POST", "/v1/tokens"}, {"DELETE", "/v1/tokens/" + tok.ID},
		{"GET", "/v1/accounts"}, {"POST", "/v1/accounts"},
		{"GET", acctPath}, {"PATCH", acctPath}, {"DELETE", acctPath},
		{"GET", acctPath + "/usage"}, {"GET", acctPath + "/streams"}, {"GET", acctPath + "/usage/history"},
		{"GET", usersPath}, {"POST", usersPath}, {"DELETE", usersPath + "/" + user.ID},
		{"GET", "/v1/session"}, {"DELETE", "/v1/session"}, {"GET", "/v1/members"},
	}
	for _, r := range authed {
		for _, h := range []string{"", "Bearer", "Bearer ", "Basic b3duZXI6cHc=", "Bearer " + token + "x",
			"Bearer " + strings.Repeat("A", 8000), "Bearer \xff\xfe", "Bearer eyJhbGciOiJub25lIn0.e30."} {
			c := hostileCase{method: r.method, path: r.path, status: 401}
			if h != "" {
				c.header = map[string]string{"Authorization": h}
			}
			if r.method == "POST" || r.method == "PATCH" {
				c.body = `{"name":"x"}`
			}
			cases = append(cases, c)
		}
	}
	// Methods no route has, and the open routes.
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/jwt/v1/accounts/" + acc.PublicKey} {
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			cases = append(cases, hostileCase{method: m, path: path, body: `{"x":1}`, status: 405, offSpec: true})
		}
	}
	for _, m := range []string{"PUT", "DELETE"} {
		cases = append(cases, hostileCase{method: m, path: "/v1/signup", body: "{}", status: 0, offSpec: true},
			hostileCase{method: m, path: "/v1/login", body: "{}", status: 0, offSpec: true},
			hostileCase{method: m, path: "/v1/accounts", body: "{}", token: token, status: 0, offSpec: true})
	}

	cases = append(cases, streamHostileCases(token, acctPath)...)

	checkHostileCoverage(t, cases, acc.ID, user.ID, tok.ID, acc.PublicKey)
	raw := &http.Client{Timeout: ioTimeout}
	for _, c := range cases {
		runHostileCase(t, w.api, raw, c)
	}

	// Still serving, and nothing changed.
	w.api.do("GET", "/readyz", nil, 200, nil)
	if after := cpSnapshot(t, a, acc.ID); !reflect.DeepEqual(before, after) {
		t.Fatalf("hostile requests changed the control plane:\nbefore %s\nafter  %s", before, after)
	}
	var login struct{ Token string }
	w.api.do("POST", "/v1/login", map[string]string{"email": "owner@example.com", "password": "correct horse battery"}, 200, &login)
	// No hostile sign-up made a person.
	w.api.as("").do("POST", "/v1/signup", routes[0].valid, 201, nil)
	t.Logf("%d hostile requests", len(cases))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runHostileCase sends c and checks the answer.
func runHostileCase(t *testing.T, a *api, raw *http.Client, c hostileCase) {
	t.Helper()
	desc := fmt.Sprintf("%s %s %.80q", c.method, c.path, c.body)
	req, err := http.NewRequestWithContext(badRequest(context.Background()), c.method, a.base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatalf("%s: %v", desc, err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header[k] = []string{v}
	}
	client := a.http
	if c.offSpec {
		client = raw
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v (the control plane stopped answering?)", desc, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if c.status != 0 && resp.StatusCode != c.status || resp.StatusCode < 400 || resp.StatusCode > 499 {
		t.Errorf("%s: status %d, want %d: %.300s", desc, resp.StatusCode, c.status, body)
		return
	}
	if c.plain {
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", desc, ct)
		return
	}
	var p cpProblem
	if err := json.Unmarshal(body, &p); err != nil || p.Status != resp.StatusCode || p.Type == "" {
		t.Errorf("%s: problem %.300s (%v)", desc, body, err)
		return
	}
	if c.field != "" && p.Field != c.field {
		t.Errorf("%s: field %q, want %q (%s)", desc, p.Field, c.field, p.Detail)
	}
	if (c.status == 400 || c.status == 413) && p.Field == "" {
		t.Errorf("%s: a %d that names no field: %s", desc, c.status, p.Detail)
	}
}

// checkHostileCoverage requires a case for every operation in the spec.
func checkHostileCoverage(t *testing.T, cases []hostileCase, accID, userID, tokID, pub string) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
	if err != nil {
		t.Fatal(err)
	}
	params := strings.NewReplacer("{id}", accID, "{user_id}", userID, "{public_key}", pub, "{name}", hostileRouteStream)
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.method+" "+c.path] = true
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			p := params.Replace(path)
			if strings.HasPrefix(path, "/v1/tokens/") {
				p = strings.Replace(path, "{id}", tokID, 1)
			}
			// A route is covered by a hostile case on it, or (for the
			// open GET routes) by a method it does not take.
			found := covered[method+" "+p]
			for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
				found = found || covered[m+" "+p]
			}
			if !found {
				t.Errorf("no hostile case for %s %s", method, path)
			}
		}
	}
}

// cpSnapshot is what the control plane holds for the caller, as JSON.
func cpSnapshot(t *testing.T, a *api, accID string) string {
	t.Helper()
	var out []json.RawMessage
	for _, path := range []string{"/v1/accounts", "/v1/accounts/" + accID, "/v1/accounts/" + accID + "/users", "/v1/tokens"} {
		var v json.RawMessage
		a.do("GET", path, nil, 200, &v)
		out = append(out, v)
	}
	b, _ := json.Marshal(out)
	return string(b)
}
