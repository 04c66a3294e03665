package main

// Stream management through the REST API (/v1/accounts/{id}/streams/{name}):
// the control plane acts on the cell as the account, with nats-server's
// update rules, against our own data plane (`contrail dev`) and against a
// reference nats-server cell.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// cpStream is a stream as the API shows it.
type cpStream struct {
	Name   string `json:"name"`
	Config struct {
		Description     string            `json:"description"`
		Subjects        []string          `json:"subjects"`
		Retention       string            `json:"retention"`
		MaxMsgs         int64             `json:"max_msgs"`
		MaxAge          int64             `json:"max_age"`
		Storage         string            `json:"storage"`
		Replicas        int64             `json:"num_replicas"`
		DuplicateWindow int64             `json:"duplicate_window"`
		DenyDelete      bool              `json:"deny_delete"`
		Metadata        map[string]string `json:"metadata"`
		RePublish       *struct {
			Source      string `json:"src"`
			Destination string `json:"dest"`
			HeadersOnly bool   `json:"headers_only"`
		} `json:"republish"`
	} `json:"config"`
	State struct {
		Messages uint64 `json:"messages"`
	} `json:"state"`
}

func TestDevStreamRoutes(t *testing.T) {
	d := startDev(t, filepath.Join(t.TempDir(), "data"))
	a, _ := newAPI(t, d.URL).signup("streams@example.com", "Streams")
	streamRoutesFlow(t, a, d.NatsURL)
}

func TestCPStreamRoutesReference(t *testing.T) {
	w := startCPWorld(t)
	waitReadyz(t, w.api, 200)
	a, _ := w.api.signup("streams@example.com", "Streams")
	streamRoutesFlow(t, a, w.cell.URL)
}

func streamRoutesFlow(t *testing.T, a *api, natsURL string) {
	acc := a.createAccount("streams", map[string]any{"jetstream": map[string]any{"max_streams": 3}})
	_, creds := a.createUser(acc.ID, "app", t.TempDir())
	path := "/v1/accounts/" + acc.ID + "/streams/"

	var st cpStream
	a.do("POST", path+"ORDERS", map[string]any{"subjects": []string{"orders.>"}, "max_msgs": 100,
		"metadata": map[string]string{"team": "shop"}}, 201, &st)
	if c := st.Config; st.Name != "ORDERS" || c.MaxMsgs != 100 || c.Retention != "limits" || c.Storage != "file" ||
		c.Replicas != 1 || c.DuplicateWindow != int64(2*time.Minute) || len(c.Metadata) != 1 || c.Metadata["team"] != "shop" {
		t.Fatalf("created stream %+v", st)
	}
	if p := a.problemOf("POST", path+"ORDERS", map[string]any{}, 409, false); !strings.Contains(p.Detail, "already exists") {
		t.Fatalf("second create: %+v", p)
	}

	// Stock clients see it, and it holds what they publish.
	nc := connectCreds(t, natsURL, creds)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if _, err := js.Publish(ctx, "orders.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := natsRun(t, natsURL, "--creds", creds, "stream", "info", "ORDERS", "--json")
	if code != 0 || !strings.Contains(out, `"orders.\u003e"`) && !strings.Contains(out, `"orders.>"`) {
		t.Fatalf("nats stream info: %d %s %s", code, out, errOut)
	}

	// In place: limits, subjects, description, flags.
	upd := map[string]any{"subjects": []string{"orders.>", "returns.>"}, "max_msgs": 50, "description": "orders",
		"max_age": int64(time.Hour), "deny_delete": true}
	st = cpStream{}
	a.do("PUT", path+"ORDERS", upd, 200, &st)
	if c := st.Config; c.MaxMsgs != 50 || len(c.Subjects) != 2 || c.Description != "orders" || c.MaxAge != int64(time.Hour) ||
		!c.DenyDelete || len(c.Metadata) != 0 || st.State.Messages != 1 {
		t.Fatalf("updated stream %+v", st)
	}
	info, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := info.CachedInfo().Config; cfg.MaxMsgs != 50 || cfg.Description != "orders" || len(cfg.Subjects) != 2 {
		t.Fatalf("the cell has %+v", cfg)
	}

	// What nats-server cannot change in place is refused, naming the
	// field, and changes nothing.
	for _, c := range []struct {
		change map[string]any
		field  string
	}{
		{map[string]any{"storage": "memory"}, "storage"},
		{map[string]any{"retention": "workqueue"}, "retention"},
		{map[string]any{"deny_delete": false}, "deny_delete"},
	} {
		body := map[string]any{}
		for k, v := range upd {
			body[k] = v
		}
		for k, v := range c.change {
			body[k] = v
		}
		if p := a.problemOf("PUT", path+"ORDERS", body, 400, false); p.Field != c.field || !strings.Contains(p.Detail, "re-create") {
			t.Errorf("PUT %v: %+v, want a 400 naming %s", c.change, p, c.field)
		}
	}
	var again cpStream
	a.do("GET", path+"ORDERS", nil, 200, &again)
	if again.Config.Storage != "file" || again.Config.Retention != "limits" || !again.Config.DenyDelete {
		t.Fatalf("a refused update changed the stream: %+v", again)
	}

	// An update keeps what the API does not manage.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "audit.>", Destination: "logged.audit.>"}}); err != nil {
		t.Fatal(err)
	}
	a.do("PUT", path+"AUDIT", map[string]any{"subjects": []string{"audit.>"}, "max_msgs": 7}, 200, nil)
	audit, err := js.Stream(ctx, "AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := audit.CachedInfo().Config; cfg.MaxMsgs != 7 || cfg.SubjectTransform == nil || cfg.SubjectTransform.Destination != "logged.audit.>" {
		t.Fatalf("AUDIT after the API's update: %+v", cfg)
	}

	// Republish is managed: set, read back, and removed by an update
	// that leaves it out.
	a.do("POST", path+"ALL", map[string]any{"subjects": []string{"all.>"},
		"republish": map[string]any{"src": ">", "dest": "copy.>", "headers_only": true}}, 201, &st)
	if r := st.Config.RePublish; r == nil || r.Source != ">" || r.Destination != "copy.>" || !r.HeadersOnly {
		t.Errorf("republish read back as %+v", r)
	}
	st = cpStream{}
	a.do("PUT", path+"ALL", map[string]any{"subjects": []string{"all.>"}}, 200, &st)
	if st.Config.RePublish != nil {
		t.Errorf("republish left out of an update was kept: %+v", st.Config.RePublish)
	}
	a.do("DELETE", path+"ALL", nil, 204, nil)

	// The cell's own refusals, as problems.
	if p := a.problemOf("POST", path+"OVERLAP", map[string]any{"subjects": []string{"orders.eu"}}, 400, false); p.Field != "subjects" {
		t.Errorf("overlapping subjects: %+v", p)
	}
	st = cpStream{}
	a.do("POST", path+"THIRD", map[string]any{}, 201, &st)
	if len(st.Config.Subjects) != 1 || st.Config.Subjects[0] != "THIRD" {
		t.Errorf("default subjects %v, want the name", st.Config.Subjects)
	}
	if p := a.problemOf("POST", path+"FOURTH", map[string]any{}, 409, false); !strings.Contains(p.Detail, "max_streams") {
		t.Errorf("over max_streams: %+v", p)
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"retention": "forever"}, "retention"},
		{map[string]any{"max_msgs": -2}, "max_msgs"},
		{map[string]any{"num_replicas": 6}, "num_replicas"},
		{map[string]any{"subjects": []string{"a..b"}}, "subjects[0]"},
		{map[string]any{"metadata": map[string]string{"_nats.level": "1"}}, "metadata._nats.level"},
		{map[string]any{"discard_new_per_subject": true}, "discard_new_per_subject"},
		{map[string]any{"sources": []any{}}, "sources"},
		{map[string]any{"republish": map[string]any{"dest": "a..b"}}, "republish.dest"},
	} {
		if p := a.problemOf("POST", path+"BAD", c.body, 400, true); p.Field != c.field {
			t.Errorf("POST %v: field %q, want %q (%s)", c.body, p.Field, c.field, p.Detail)
		}
	}
	if p := a.problemOf("GET", path+"a.b", nil, 400, true); p.Field != "name" {
		t.Errorf("GET a.b: %+v", p)
	}

	// Another organization sees none of it.
	b, _ := a.signup("other@example.com", "Other")
	b.problemOf("GET", path+"ORDERS", nil, 404, false)
	b.problemOf("DELETE", path+"ORDERS", nil, 404, false)
	b.problemOf("PUT", path+"ORDERS", map[string]any{}, 404, false)

	a.do("DELETE", path+"THIRD", nil, 204, nil)
	a.problemOf("GET", path+"THIRD", nil, 404, false)
	a.problemOf("DELETE", path+"THIRD", nil, 404, false)
	a.problemOf("PUT", path+"THIRD", map[string]any{}, 404, false)

	// An account without JetStream is told so.
	off := a.createAccount("nojs", map[string]any{"jetstream": map[string]any{"max_memory": 0, "max_storage": 0}})
	if p := a.problemOf("POST", "/v1/accounts/"+off.ID+"/streams/S", map[string]any{}, 409, false); !strings.Contains(p.Detail, "JetStream") {
		t.Errorf("stream in an account without JetStream: %+v", p)
	}
}

// hostileRouteStream is the stream name the hostile cases use; the account
// has no stream, and none is made.
const hostileRouteStream = "S"

// streamHostileCases are the stream routes' hostile cases (see
// TestCPHostileInput): bad names, bodies and fields, other tenants' ids
// and bad credentials. None reaches the cell with a valid request.
func streamHostileCases(token, acctPath string) []hostileCase {
	path := acctPath + "/streams/" + hostileRouteStream
	var cases []hostileCase
	for _, m := range []string{"POST", "PUT"} {
		for _, c := range []struct{ body, field string }{
			{"", "body"}, {"[]", "body"}, {`{"zzz":1}`, "zzz"}, {`{"retention":"x"}`, "retention"},
			{`{"storage":5}`, "storage"}, {`{"max_msgs":-2}`, "max_msgs"}, {`{"max_msgs":1e400}`, "max_msgs"},
			{`{"max_bytes":9223372036854775808}`, "max_bytes"}, {`{"max_age":-1}`, "max_age"},
			{`{"max_msg_size":2147483648}`, "max_msg_size"}, {`{"num_replicas":0}`, "num_replicas"},
			{`{"subjects":["a b"]}`, "subjects[0]"}, {`{"subjects":"a"}`, "subjects"},
			{`{"subjects":[` + strings.TrimSuffix(strings.Repeat(`"a",`, 257), ",") + `]}`, "subjects"},
			{`{"description":"` + strings.Repeat("d", 4097) + `"}`, "description"},
			{`{"metadata":{"_nats.ver":"1"}}`, "metadata._nats.ver"}, {`{"metadata":{"a":1}}`, "metadata"},
			{`{"deny_delete":"yes"}`, "deny_delete"}, {`{"max_msgs":1,"max_msgs":2}`, "max_msgs"},
			{`{"mirror":{"name":"X"}}`, "mirror"}, {`{"republish":{"src":">"}}`, "republish.dest"},
			{`{"republish":{"dest":"x","zzz":1}}`, "republish.zzz"}, {`{"republish":{"src":"a b","dest":"x"}}`, "republish.src"},
		} {
			cases = append(cases, hostileCase{method: m, path: path, body: c.body, token: token, status: 400, field: c.field})
		}
	}
	for _, name := range []string{"a.b", "a*", "a>", "a%20b", "a%2fb", "%00", strings.Repeat("n", 256)} {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			body := ""
			if m == "POST" || m == "PUT" {
				body = "{}"
			}
			cases = append(cases, hostileCase{method: m, path: acctPath + "/streams/" + name, body: body, token: token, status: 400, field: "name"})
		}
	}
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		body := ""
		if m == "POST" || m == "PUT" {
			body = "{}"
		}
		cases = append(cases, hostileCase{method: m, path: "/v1/accounts/acc_nope/streams/" + hostileRouteStream, body: body, token: token, status: 404})
		for _, h := range []string{"", "Bearer ", "Bearer " + token + "x"} {
			c := hostileCase{method: m, path: path, body: body, status: 401}
			if h != "" {
				c.header = map[string]string{"Authorization": h}
			}
			cases = append(cases, c)
		}
	}
	return cases
}
