package jetstream

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// rawCall sends body (nil for none) and decodes the reply as a generic
// JSON object.
func rawCall(t testing.TB, acc *fakeAccount, subj string, body []byte) map[string]any {
	t.Helper()
	var out map[string]any
	raw := acc.request(t, subj, nil, body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: reply is not JSON: %q", subj, body, raw)
	}
	return out
}

// errCodeOf is the reply's error.err_code, 0 for none.
func errCodeOf(reply map[string]any) int {
	e, _ := reply["error"].(map[string]any)
	c, _ := e["err_code"].(float64)
	return int(c)
}

// TestPageClampsOffset: every paged route answers any offset, as
// nats-server does, with the offset it used (negative ones ended the
// process before).
func TestPageClampsOffset(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	for i := range 3 {
		var resp api.ConsumerInfoResponse
		acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S.c"+fmt.Sprint(i), api.ConsumerCreateRequest{Stream: "S",
			Config: api.ConsumerConfig{Name: "c" + fmt.Sprint(i), Durable: "c" + fmt.Sprint(i), AckPolicy: api.AckExplicit}}, &resp)
		if resp.Error != nil {
			t.Fatal(resp.Error)
		}
	}
	for _, route := range []string{"CONSUMER.NAMES.S", "CONSUMER.LIST.S", "STREAM.NAMES", "STREAM.LIST"} {
		total := 3
		if strings.HasPrefix(route, "STREAM") {
			total = 1
		}
		for _, tc := range []struct {
			offset int
			want   int
		}{{-1, 0}, {math.MinInt64, 0}, {0, 0}, {1, 1}, {math.MaxInt64, total}} {
			reply := rawCall(t, acc, "$JS.API."+route, fmt.Appendf(nil, `{"offset":%d}`, tc.offset))
			if c := errCodeOf(reply); c != 0 {
				t.Fatalf("%s offset %d: error %v", route, tc.offset, reply)
			}
			if got := reply["offset"].(float64); int(got) != tc.want {
				t.Errorf("%s offset %d: answered offset %v, want %d", route, tc.offset, got, tc.want)
			}
		}
	}
	publish(t, acc, "s.a", nil, []byte("x"))
	reply := rawCall(t, acc, "$JS.API.STREAM.INFO.S", []byte(`{"subjects_filter":">","offset":-5}`))
	if errCodeOf(reply) != 0 {
		t.Fatalf("STREAM.INFO negative offset: %v", reply)
	}
	if got, off := page([]int{1, 2, 3}, 2, -1); len(got) != 0 || off != 2 {
		t.Errorf("negative page size: %v %d", got, off)
	}
}

// panicOnce is an account whose next Publish to a reply inbox panics,
// as a handler's bug would, once.
type panicOnce struct {
	*fakeAccount
	armed atomic.Bool
}

func (p *panicOnce) Publish(subj, reply string, hdr, msg []byte) {
	if strings.HasPrefix(subj, "_INBOX.") && p.armed.CompareAndSwap(true, false) {
		panic("injected handler bug")
	}
	p.fakeAccount.Publish(subj, reply, hdr, msg)
}

// TestGuardAnswersPanics: a panic while serving a request, on the API
// workers or inline (pull requests, direct gets), is answered in the
// route's reply shape, counted as an API error, and the node keeps
// serving.
func TestGuardAnswersPanics(t *testing.T) {
	e, _, _ := openEngine(t, vfs.NewMem())
	p := &panicOnce{fakeAccount: newFakeAccount("P")}
	if err := e.EnableAccount(p); err != nil {
		t.Fatal(err)
	}
	acc := p.fakeAccount
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}, AllowDirect: true})
	publish(t, acc, "s", nil, []byte("x"))
	e.mu.Lock()
	a := e.mu.accounts["P"]
	e.mu.Unlock()
	for _, tc := range []struct {
		subj, body string
		want       string // reply prefix
	}{
		{"$JS.API.STREAM.INFO.S", "", `{"type":"io.nats.jetstream.api.v1.stream_info_response"`},
		{"$JS.API.CONSUMER.NAMES.S", "", `{"type":"io.nats.jetstream.api.v1.consumer_names_response"`},
		{"$JS.API.NO.SUCH.ROUTE", "", `{"type":"io.nats.jetstream.api.v1.system_response"`},
		{"$JS.API.DIRECT.GET.S", `{"seq":1}`, ""},
		{"$JS.API.CONSUMER.MSG.NEXT.S.nope", "", ""},
	} {
		errsBefore := a.apiErrors.Load()
		p.armed.Store(true)
		ch := make(chan []byte, 2)
		hdrs := make(chan []byte, 2)
		inbox := "_INBOX.guard." + tc.subj
		unsub, _ := acc.SubscribeInternal(inbox, func(_, _, hdr, msg []byte) {
			hdrs <- append([]byte(nil), hdr...)
			ch <- append([]byte(nil), msg...)
		})
		p.Publish(tc.subj, inbox, nil, []byte(tc.body))
		var got, hdr []byte
		select {
		case got = <-ch:
			hdr = <-hdrs
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no reply after a panic", tc.subj)
		}
		unsub()
		if tc.want != "" {
			if !strings.HasPrefix(string(got), tc.want) || !strings.Contains(string(got), `"err_code":10051`) {
				t.Errorf("%s: reply %s, want %s… with 10051", tc.subj, got, tc.want)
			}
		} else if !strings.HasPrefix(string(hdr), "NATS/1.0 500") {
			t.Errorf("%s: status %q, want 500", tc.subj, hdr)
		}
		if a.apiErrors.Load() <= errsBefore {
			t.Errorf("%s: the panic was not counted as an API error", tc.subj)
		}
		// Still serving.
		var info api.StreamInfoResponse
		acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
		if info.Error != nil || info.State.Msgs != 1 {
			t.Fatalf("after %s: %+v", tc.subj, info)
		}
	}
}

// TestPurgeRefusesBadRequests: an invalid filter or a sequence past
// MaxRequestSeq is refused and purges nothing; a stream cannot start
// past MaxRequestSeq; so sequences never wrap to 0.
func TestPurgeRefusesBadRequests(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"p.>"}})
	for i := range 3 {
		publish(t, acc, fmt.Sprintf("p.%d", i), nil, []byte("x"))
	}
	for _, body := range []string{`{"filter":">.x"}`, `{"filter":"p..x"}`, `{"filter":"p. x"}`,
		`{"seq":18446744073709551615}`, `{"seq":9223372036854775808}`, `{"seq":5,"keep":1}`} {
		reply := rawCall(t, acc, "$JS.API.STREAM.PURGE.S", []byte(body))
		if errCodeOf(reply) != int(api.CodeBadRequest) {
			t.Errorf("purge %s: %v, want 10003", body, reply)
		}
	}
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.State.Msgs != 3 || info.State.FirstSeq != 1 || info.State.LastSeq != 3 {
		t.Fatalf("refused purges changed the stream: %+v", info.State)
	}
	// The largest allowed purge leaves room for 2^63 more messages.
	reply := rawCall(t, acc, "$JS.API.STREAM.PURGE.S", fmt.Appendf(nil, `{"seq":%d}`, uint64(api.MaxRequestSeq)))
	if errCodeOf(reply) != 0 {
		t.Fatalf("purge to MaxRequestSeq: %v", reply)
	}
	if ack := publish(t, acc, "p.x", nil, []byte("x")); ack.Error != nil || ack.Sequence != api.MaxRequestSeq {
		t.Fatalf("publish after purge to MaxRequestSeq: %+v", ack)
	}

	reply = rawCall(t, acc, "$JS.API.STREAM.CREATE.F", []byte(`{"name":"F","subjects":["f"],"first_seq":18446744073709551615}`))
	if errCodeOf(reply) != int(api.CodeStreamInvalidConfig) {
		t.Fatalf("first_seq MaxUint64: %v, want 10052", reply)
	}
}

// TestStartTimeBeyondNanos: start times outside what unix nanoseconds
// hold (years 0001 and 9999) compare as before and after every message
// instead of wrapping to the other end.
func TestStartTimeBeyondNanos(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"t.>"}})
	for i := range 3 {
		publish(t, acc, fmt.Sprintf("t.%d", i), nil, []byte("x"))
	}
	for _, tc := range []struct {
		when    string
		wantSeq uint64 // 0: no message
	}{{"0001-01-01T00:00:00Z", 1}, {"1600-01-01T00:00:00Z", 1}, {"2263-01-01T00:00:00Z", 0}, {"9999-12-31T23:59:59Z", 0}} {
		reply := rawCall(t, acc, "$JS.API.STREAM.MSG.GET.S", []byte(`{"start_time":"`+tc.when+`"}`))
		switch msg, _ := reply["message"].(map[string]any); {
		case tc.wantSeq == 0 && errCodeOf(reply) != int(api.CodeNoMessageFound):
			t.Errorf("MSG.GET start_time %s: %v, want 10037", tc.when, reply)
		case tc.wantSeq > 0 && (msg == nil || uint64(msg["seq"].(float64)) != tc.wantSeq):
			t.Errorf("MSG.GET start_time %s: %v, want seq %d", tc.when, reply, tc.wantSeq)
		}
		var resp api.ConsumerInfoResponse
		acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S", json.RawMessage(`{"stream_name":"S","config":{"deliver_policy":"by_start_time","opt_start_time":"`+
			tc.when+`","ack_policy":"none"}}`), &resp)
		if resp.Error != nil {
			t.Fatalf("consumer from %s: %v", tc.when, resp.Error)
		}
		want := uint64(0)
		if tc.wantSeq > 0 {
			want = 3
		}
		if resp.NumPending != want {
			t.Errorf("consumer from %s: num_pending %d, want %d", tc.when, resp.NumPending, want)
		}
	}
	if got := unixNanos(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)); got != math.MaxInt64 {
		t.Errorf("unixNanos(9999) = %d", got)
	}
	if got := unixNanos(time.Time{}); got != math.MinInt64 {
		t.Errorf("unixNanos(0001) = %d", got)
	}
	if now := time.Now(); unixNanos(now) != now.UnixNano() {
		t.Error("unixNanos changes a time in range")
	}
}

// TestMaxAckPendingUnderAccountLimit: unlimited max_ack_pending under an
// account's limit gets the limit (nats-server keeps -1, letting one
// consumer past its account's limit); pedantic requests are refused.
func TestMaxAckPendingUnderAccountLimit(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	acc := register(t, e, "L", untiered(func(l *api.AccountLimits) { l.MaxAckPending = 10 }))
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	for _, tc := range []struct {
		body     string
		want     int
		wantCode int
	}{
		{`"ack_policy":"explicit","max_ack_pending":-1`, 10, 0},
		{`"ack_policy":"explicit","max_ack_pending":-5`, 10, 0},
		{`"ack_policy":"explicit"`, 10, 0},
		{`"ack_policy":"explicit","max_ack_pending":4`, 4, 0},
		{`"ack_policy":"explicit","max_ack_pending":11`, 0, int(api.CodeConsumerMaxAckPendingExcess)},
		{`"ack_policy":"none","max_ack_pending":-1`, -1, 0},
	} {
		var resp api.ConsumerInfoResponse
		acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S", json.RawMessage(`{"stream_name":"S","config":{`+tc.body+`}}`), &resp)
		switch {
		case tc.wantCode != 0:
			if resp.Error == nil || int(resp.Error.ErrCode) != tc.wantCode {
				t.Errorf("%s: %+v, want %d", tc.body, resp.Error, tc.wantCode)
			}
		case resp.Error != nil:
			t.Errorf("%s: %v", tc.body, resp.Error)
		case resp.Config.MaxAckPending != tc.want:
			t.Errorf("%s: max_ack_pending %d, want %d", tc.body, resp.Config.MaxAckPending, tc.want)
		}
	}
	var resp api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S", json.RawMessage(`{"stream_name":"S","pedantic":true,"config":{"ack_policy":"explicit","max_ack_pending":-1}}`), &resp)
	if resp.Error == nil || resp.Error.ErrCode != api.CodeConsumerMaxAckPendingExcess {
		t.Errorf("pedantic -1 under a limit: %+v, want 10121", resp.Error)
	}
}

// TestConsumerWritesReportStoreFailures: a durable consumer's update and
// pause that the store refuses are reported as failures and leave the
// consumer as it was.
func TestConsumerWritesReportStoreFailures(t *testing.T) {
	var failing atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), failSyncs(&failing))
	_, acc, _ := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	create := func(desc string) api.ConsumerInfoResponse {
		var resp api.ConsumerInfoResponse
		acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S.D", api.ConsumerCreateRequest{Stream: "S",
			Config: api.ConsumerConfig{Durable: "D", AckPolicy: api.AckExplicit, Description: desc}}, &resp)
		return resp
	}
	if resp := create("one"); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	failing.Store(true)
	if resp := create("two"); resp.Error == nil {
		t.Fatalf("update the store refused was reported as success: %+v", resp.Config)
	}
	var pause api.ConsumerPauseResponse
	acc.apiCall(t, "$JS.API.CONSUMER.PAUSE.S.D", map[string]any{"pause_until": time.Now().Add(time.Hour)}, &pause)
	if pause.Error == nil {
		t.Fatalf("pause the store refused was reported as success: %+v", pause)
	}
	failing.Store(false)
	var info api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.D", nil, &info)
	if info.Error != nil || info.Config.Description != "one" || info.Config.PauseUntil != nil {
		t.Fatalf("failed writes changed the consumer: %+v %v", info.Config, info.Error)
	}
}

// TestHugeAckWaitNeverRedelivers: an ack wait (or a NAK delay) running
// past 2262 is "not within any lifetime", not a time before 1970 that is
// already due: the message is not redelivered at once.
func TestHugeAckWaitNeverRedelivers(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	publish(t, acc, "s", nil, []byte("0"))
	publish(t, acc, "s", nil, []byte("1"))
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit, AckWait: math.MaxInt64})
	got := inbox(t, acc, "_INBOX.huge")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.huge", nil, []byte(`{"batch":2}`))
	next(t, got)
	nak := next(t, got)
	acc.Publish(nak.reply, "", nil, []byte(`-NAK {"delay":9223372036854775807}`))
	// A pull that waits a while: an overdue message would come back.
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.huge", nil, []byte(`{"batch":1,"expires":300000000}`))
	if d := next(t, got); !strings.HasPrefix(d.hdr, "NATS/1.0 408") {
		t.Fatalf("a message with a 292-year ack wait came back: %+v", d)
	}
}

// TestManyFiltersDeliver: a consumer with many filters (matched through a
// subject.Set on the apply path) gets exactly the matching messages.
func TestManyFiltersDeliver(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"k.>"}})
	filters := []string{"k.w.*"}
	for i := range 2000 {
		filters = append(filters, fmt.Sprintf("k.%d", i))
	}
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckNone, FilterSubjects: filters})
	for _, subj := range []string{"k.1999", "k.2000", "k.w.x", "k.w.x.y", "k.7"} {
		publish(t, acc, subj, nil, []byte(subj))
	}
	got := inbox(t, acc, "_INBOX.many")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.many", nil, []byte(`{"batch":10,"expires":300000000}`))
	var subjects []string
	for {
		d := next(t, got)
		if d.hdr != "" {
			break // the 408 closing the request
		}
		subjects = append(subjects, d.subject)
	}
	if strings.Join(subjects, " ") != "k.1999 k.w.x k.7" {
		t.Fatalf("delivered %q", subjects)
	}
}
