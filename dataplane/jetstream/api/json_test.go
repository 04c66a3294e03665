package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type enumCase struct {
	name   string
	values []any // pointers to each value, in order
	wire   []string
}

func TestEnumsRoundTrip(t *testing.T) {
	cases := []enumCase{
		{"retention", []any{ptr(LimitsPolicy), ptr(InterestPolicy), ptr(WorkQueuePolicy)}, []string{"limits", "interest", "workqueue"}},
		{"discard", []any{ptr(DiscardOld), ptr(DiscardNew)}, []string{"old", "new"}},
		{"storage", []any{ptr(FileStorage), ptr(MemoryStorage)}, []string{"file", "memory"}},
		{"compression", []any{ptr(NoCompression), ptr(S2Compression)}, []string{"none", "s2"}},
		{"persist", []any{ptr(DefaultPersistMode), ptr(AsyncPersistMode)}, []string{"default", "async"}},
		{"deliver", []any{ptr(DeliverAll), ptr(DeliverLast), ptr(DeliverNew), ptr(DeliverByStartSequence), ptr(DeliverByStartTime), ptr(DeliverLastPerSubject)},
			[]string{"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"}},
		{"ack", []any{ptr(AckNone), ptr(AckAll), ptr(AckExplicit), ptr(AckFlowControl)}, []string{"none", "all", "explicit", "flow_control"}},
		{"replay", []any{ptr(ReplayInstant), ptr(ReplayOriginal)}, []string{"instant", "original"}},
		{"priority", []any{ptr(PriorityNone), ptr(PriorityOverflow), ptr(PriorityPinnedClient), ptr(PriorityPrioritized)},
			[]string{"none", "overflow", "pinned_client", "prioritized"}},
		{"action", []any{ptr(ActionCreateOrUpdate), ptr(ActionUpdate), ptr(ActionCreate)}, []string{"", "update", "create"}},
	}
	for _, c := range cases {
		for i, v := range c.values {
			got := mustJSON(t, v)
			if got != `"`+c.wire[i]+`"` {
				t.Errorf("%s %d: marshal %s, want %q", c.name, i, got, c.wire[i])
			}
			back := reflect.New(reflect.TypeOf(v).Elem())
			if err := json.Unmarshal([]byte(got), back.Interface()); err != nil {
				t.Errorf("%s %q: %v", c.name, c.wire[i], err)
			} else if !reflect.DeepEqual(back.Interface(), v) {
				t.Errorf("%s %q: round trip gave %v", c.name, c.wire[i], back.Elem())
			}
		}
		bad := reflect.New(reflect.TypeOf(c.values[0]).Elem()).Interface()
		for _, in := range []string{`"bogus"`, `null`, `3`} {
			if json.Unmarshal([]byte(in), bad) == nil {
				t.Errorf("%s accepted %s", c.name, in)
			}
		}
	}
	var d DiscardPolicy
	if err := json.Unmarshal([]byte(`"NEW"`), &d); err != nil || d != DiscardNew {
		t.Errorf("discard is case-insensitive in nats-server: %v %v", d, err)
	}
	var dp DeliverPolicy = DeliverNew
	if err := json.Unmarshal([]byte(`"undefined"`), &dp); err != nil || dp != DeliverAll {
		t.Errorf(`"undefined" deliver policy: %v %v`, dp, err)
	}
	var pm PersistMode = AsyncPersistMode
	if err := json.Unmarshal([]byte(`""`), &pm); err != nil || pm != DefaultPersistMode {
		t.Errorf(`"" persist mode: %v %v`, pm, err)
	}
	if _, err := json.Marshal(RetentionPolicy(7)); err == nil {
		t.Error("out-of-range enum marshalled")
	}
}

// TestDefaultStreamConfigJSON pins the bytes of a defaulted config to what
// nats-server sends for `{"name":"ORDERS","subjects":["orders.>"]}`.
func TestDefaultStreamConfigJSON(t *testing.T) {
	var req StreamConfigRequest
	if err := json.Unmarshal([]byte(`{"name":"ORDERS","subjects":["orders.>"],"pedantic":false}`), &req); err != nil {
		t.Fatal(err)
	}
	cfg, apiErr := req.StreamConfig.Normalize(StreamEnv{})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	// encoding/json escapes '>' as \u003e; so does nats-server, which
	// marshals replies with json.Marshal too.
	want := `{"name":"ORDERS","subjects":["orders.\u003e"],"retention":"limits","max_consumers":-1,"max_msgs":-1,` +
		`"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file",` +
		`"num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,` +
		`"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,` +
		`"consumer_limits":{},"allow_msg_ttl":false}`
	if got := mustJSON(t, cfg); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestDefaultConsumerConfigJSON pins a defaulted ephemeral pull consumer.
func TestDefaultConsumerConfigJSON(t *testing.T) {
	var req ConsumerCreateRequest
	body := `{"stream_name":"ORDERS","config":{"name":"w","ack_policy":"explicit"},"action":"create"}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if req.Action != ActionCreate || req.Stream != "ORDERS" {
		t.Fatalf("decoded %+v", req)
	}
	stream := StreamConfig{Name: "ORDERS"}
	stream.Defaults()
	cfg, apiErr := req.Config.Normalize(ConsumerEnv{Stream: &stream})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	want := `{"name":"w","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,` +
		`"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"inactive_threshold":5000000000,"num_replicas":0}`
	if got := mustJSON(t, cfg); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestEnvelopeShapes(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{PubAck{Stream: "S", Sequence: 2}, `{"stream":"S","seq":2}`},
		{PubAckResponse{PubAck: &PubAck{Stream: "S", Sequence: 2, Duplicate: true}}, `{"stream":"S","seq":2,"duplicate":true}`},
		{PubAckResponse{Error: NewWrongLastSequenceError(3)},
			`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"}}`},
		{StreamPurgeResponse{Response: Response{Type: TypeStreamPurgeResponse, Error: NewStreamNotFoundError()}},
			`{"type":"io.nats.jetstream.api.v1.stream_purge_response","error":{"code":404,"err_code":10059,"description":"stream not found"},"purged":0}`},
		{StreamNamesResponse{Response: Response{Type: TypeStreamNamesResponse}, Paged: Paged{Limit: NamesLimit}},
			`{"type":"io.nats.jetstream.api.v1.stream_names_response","total":0,"offset":0,"limit":1024,"streams":null}`},
		{SuccessResponse{Response: Response{Type: TypeStreamDeleteResponse}, Success: true},
			`{"type":"io.nats.jetstream.api.v1.stream_delete_response","success":true}`},
		{StreamState{}, `{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_seq":0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0}`},
		{StoredMsg{Subject: "a", Sequence: 1, Data: []byte("hi"), Time: sampleTime},
			`{"subject":"a","seq":1,"data":"aGk=","time":"2025-03-04T05:06:07.123456789Z"}`},
		{ConsumerPauseResponse{Response: Response{Type: TypeConsumerPauseResponse}},
			`{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":false,"pause_until":"0001-01-01T00:00:00Z"}`},
		{AccountLimits{}, `{"max_memory":0,"max_storage":0,"max_streams":0,"max_consumers":0,"max_ack_pending":0,"memory_max_stream_bytes":0,"storage_max_stream_bytes":0,"max_bytes_required":false}`},
	} {
		if got := mustJSON(t, c.v); got != c.want {
			t.Errorf("%T:\ngot  %s\nwant %s", c.v, got, c.want)
		}
	}
	info := mustJSON(t, StreamInfoResponse{Response: Response{Type: TypeStreamInfoResponse}, StreamInfo: emptyStreamInfo(t)})
	if !strings.Contains(info, `"total":0,"offset":0,"limit":0,"config":`) {
		t.Errorf("stream info must always carry the paging members: %s", info)
	}
	acct := mustJSON(t, AccountInfoResponse{Response: Response{Type: TypeAccountInfoResponse}, AccountInfo: sampleAccountInfo()})
	if !strings.Contains(acct, `"memory":1,"storage":2,"reserved_memory":0`) || !strings.Contains(acct, `"api":{"level":1,"total":100,"errors":3,"inflight":1}`) {
		t.Errorf("account info shape: %s", acct)
	}
}

func TestInfoRoundTrip(t *testing.T) {
	for _, v := range []any{sampleStreamInfo(t), mirrorStreamInfo(t), sampleConsumerInfo(t, false), sampleConsumerInfo(t, true), sampleAccountInfo()} {
		b := mustJSON(t, v)
		back := reflect.New(reflect.TypeOf(v).Elem())
		if err := json.Unmarshal([]byte(b), back.Interface()); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(back.Interface(), v) {
			t.Errorf("%T did not survive a round trip:\n%s\n%s", v, b, mustJSON(t, back.Interface()))
		}
	}
}

func TestRequestsDecode(t *testing.T) {
	var info StreamInfoRequest
	if err := json.Unmarshal([]byte(`{"deleted_details":true,"subjects_filter":"a.>","offset":5}`), &info); err != nil ||
		!info.DeletedDetails || info.SubjectsFilter != "a.>" || info.Offset != 5 {
		t.Errorf("stream info request: %+v %v", info, err)
	}
	var purge StreamPurgeRequest
	if err := json.Unmarshal([]byte(`{"filter":"a.b","keep":3}`), &purge); err != nil || purge.Subject != "a.b" || purge.Keep != 3 {
		t.Errorf("purge request: %+v %v", purge, err)
	}
	var get MsgGetRequest
	if err := json.Unmarshal([]byte(`{"last_by_subj":"$KV.b.k"}`), &get); err != nil || get.LastFor != "$KV.b.k" {
		t.Errorf("msg get request: %+v %v", get, err)
	}
	var del MsgDeleteRequest
	if err := json.Unmarshal([]byte(`{"seq":4,"no_erase":true}`), &del); err != nil || del.Seq != 4 || !del.NoErase {
		t.Errorf("msg delete request: %+v %v", del, err)
	}
	var names StreamNamesRequest
	if err := json.Unmarshal([]byte(`{"offset":0,"subject":"orders.1"}`), &names); err != nil || names.Subject != "orders.1" {
		t.Errorf("names request: %+v %v", names, err)
	}
	var bad ConsumerCreateRequest
	if err := json.Unmarshal([]byte(`{"stream_name":"S","config":{"ack_policy":"sometimes"}}`), &bad); err == nil {
		t.Error("an unknown ack policy must be invalid JSON, as in nats-server")
	}
	if mustJSON(t, MsgDeleteRequest{}) != `{"seq":0}` {
		t.Error("msg delete request always carries seq")
	}
}

func TestParsePullRequest(t *testing.T) {
	for _, c := range []struct {
		body string
		want PullRequest
		err  bool
	}{
		{"", PullRequest{Batch: 1}, false},
		{"  10 ", PullRequest{Batch: 10}, false},
		{"junk", PullRequest{Batch: 1}, false},
		{`{"batch":5,"expires":1000000000,"no_wait":true}`, PullRequest{Batch: 5, Expires: time.Second, NoWait: true}, false},
		{`{"batch":5,"expires":1000000000,"idle_heartbeat":200000000,"max_bytes":100,"group":"g","min_pending":3,"id":"x","priority":2}`,
			PullRequest{Batch: 5, Expires: time.Second, Heartbeat: 200 * time.Millisecond, MaxBytes: 100,
				PriorityGroup: PriorityGroup{Group: "g", MinPending: 3, ID: "x", Priority: 2}}, false},
		{`{"batch":1,"expires":1000000000,"idle_heartbeat":600000000}`, PullRequest{}, true},
		{`{"batch":"x"}`, PullRequest{}, true},
	} {
		got, err := ParsePullRequest([]byte(c.body))
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("%q: got %+v, %v", c.body, got, err)
		}
	}
	if s := StatusBadPullRequest(errHeartbeatTooLarge); s.Line() != "NATS/1.0 400 Bad Request - heartbeat value too large" {
		t.Errorf("status line %q", s.Line())
	}
	if StatusEndOfBatch.Line() != "NATS/1.0 204 EOB" || StatusExceededMaxRequestExpires(time.Minute).Description != "Exceeded MaxRequestExpires of 1m0s" {
		t.Error("status wording")
	}
}

func TestDecodeRequest(t *testing.T) {
	var cfg StreamConfigRequest
	if err := DecodeRequest(nil, &cfg); err != nil || cfg.Name != "" {
		t.Fatalf("empty body: %v", err)
	}
	if err := DecodeRequest([]byte(`{"name":"S","pedantic":true}`), &cfg); err != nil || cfg.Name != "S" || !cfg.Pedantic {
		t.Fatalf("plain body: %+v %v", cfg, err)
	}
	err := DecodeRequest([]byte(`{"name":"S","template_owner":"T"}`), &cfg)
	if got := NewInvalidJSONError(err).Description; got != `invalid JSON: json: unknown field "template_owner"` {
		t.Fatalf("unknown member: %q", got)
	}
	err = DecodeRequest([]byte(`{"name":`), &cfg)
	if err == nil || !strings.HasSuffix(err.Error(), "at offset 8") && !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("truncated body: %v", err)
	}
	err = DecodeRequest([]byte(`{"name":x}`), &cfg)
	if err == nil || !strings.HasSuffix(err.Error(), "at offset 9") {
		t.Fatalf("syntax error: %v", err)
	}
	var pull PullRequest
	if err := DecodeRequest([]byte(`{"batch":1} {"batch":2}`), &pull); err != nil || pull.Batch != 2 {
		t.Fatalf("concatenated values: %+v %v", pull, err)
	}
}
