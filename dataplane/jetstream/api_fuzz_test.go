package jetstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// panicLog records the panics the API guard recovers: a recovered panic
// is still a handler bug, which the fuzz target must report.
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (l *panicLog) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelError }

func (l *panicLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "panicked") {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString("\n" + a.Key + ": " + a.Value.String())
		return true
	})
	l.mu.Lock()
	l.panics = append(l.panics, b.String())
	l.mu.Unlock()
	return nil
}

func (l *panicLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *panicLog) WithGroup(string) slog.Handler      { return l }

func (l *panicLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.panics
	l.panics = nil
	return p
}

// fuzzSeeds are one request per API route, the inputs of issue-class
// hostile requests among them.
var fuzzSeeds = [][2]string{
	{"INFO", ""},
	{"STREAM.CREATE.N", `{"name":"N","subjects":["n.>"],"max_msgs":-1,"first_seq":18446744073709551615}`},
	{"STREAM.UPDATE.S", `{"name":"S","subjects":["s.>"],"max_age":-9223372036854775808}`},
	{"STREAM.INFO.S", `{"subjects_filter":">","offset":-1}`},
	{"STREAM.NAMES", `{"offset":-9223372036854775808,"subject":">.x"}`},
	{"STREAM.LIST", `{"offset":9223372036854775807}`},
	{"STREAM.PURGE.S", `{"filter":">.x"}`},
	{"STREAM.PURGE.S", `{"seq":18446744073709551615}`},
	{"STREAM.MSG.GET.S", `{"start_time":"9999-12-31T23:59:59Z"}`},
	{"STREAM.MSG.GET.S", `{"seq":"1"}`},
	{"STREAM.MSG.DELETE.S", `{"seq":18446744073709551615}`},
	{"STREAM.DELETE.N", ""},
	{"CONSUMER.CREATE.S.X", `{"stream_name":"S","config":{"name":"X","deliver_policy":"by_start_time","opt_start_time":"0001-01-01T00:00:00Z"}}`},
	{"CONSUMER.CREATE.S", `{"stream_name":"S","config":{"filter_subjects":["s.a","s.*",""],"max_ack_pending":-1}}`},
	{"CONSUMER.DURABLE.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"D","ack_policy":"explicit","ack_wait":9223372036854775807}}`},
	{"CONSUMER.INFO.S.C", ""},
	{"CONSUMER.NAMES.S", `{"offset":-1}`},
	{"CONSUMER.LIST.S", `{"offset":-1}`},
	{"CONSUMER.PAUSE.S.C", `{"pause_until":"9999-12-31T23:59:59Z"}`},
	{"CONSUMER.DELETE.S.X", ""},
	{"CONSUMER.MSG.NEXT.S.C", `{"batch":-1,"expires":-1}`},
	{"CONSUMER.MSG.NEXT.S.none", `{"batch":9223372036854775807}`},
	{"CONSUMER.UNPIN.S.C", `{"group":""}`},
	{"CONSUMER.LEADER.STEPDOWN.S.C", ""},
	{"STREAM.LEADER.STEPDOWN.S", ""},
	{"DIRECT.GET.S", `{"seq":0,"start_time":"0001-01-01T00:00:00Z"}`},
	{"DIRECT.GET.S.s.a", `{"no_hdr":true}`},
	{"DIRECT.GET.S", `{"multi_last":[">"],"batch":-1}`},
	{"DIRECT.GET.S", `{"seq":1,"batch":9223372036854775807,"max_bytes":-1}`},
	{"DIRECT.GET.S", `{"multi_last":["s.*",""],"up_to_time":"0001-01-01T00:00:00Z","seq":18446744073709551615}`},
	{"CONSUMER.RESET.S.C", `{"seq":18446744073709551615}`},
}

// FuzzAPI sends arbitrary subjects and bodies to the JetStream API of an
// engine holding a stream with messages and a consumer: no request may
// panic (even one the guard recovers) and every request is answered,
// except pulls a consumer may keep waiting.
func FuzzAPI(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s[0], []byte(s[1]))
	}
	log := &panicLog{}
	st, err := store.Open(store.Options{Dir: "js", FS: vfs.NewMem()})
	if err != nil {
		f.Fatal(err)
	}
	mem := store.NewMem()
	e, err := New(Options{Store: st, Memory: mem, ServerVersion: "test", Log: slog.New(log)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close(); st.Close(); mem.Close() })
	acc := newFakeAccount("A")
	if err := e.EnableAccount(acc); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		fuzzBase(t, acc)
		subj := "$JS.API." + op
		got := make(chan struct{}, 1)
		inbox := "_INBOX.fuzz"
		unsub, _ := acc.SubscribeInternal(inbox, func(_, _, _, _ []byte) {
			select {
			case got <- struct{}{}:
			default:
			}
		})
		defer unsub()
		acc.Publish(subj, inbox, nil, body)
		// Pulls may wait; a reset of a consumer that does not exist
		// goes unanswered, as on nats-server (the reset subject is the
		// consumer's own there), and so does the bare reset subject,
		// which names no consumer at all.
		if !strings.Contains(op, "MSG.NEXT") && !strings.HasPrefix(op+".", "CONSUMER.RESET.") {
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s %q: no reply", subj, body)
			}
		}
		if p := log.take(); len(p) > 0 {
			t.Fatalf("%s %q: handler panicked:\n%s", subj, body, p[0])
		}
	})
}

// fuzzBase puts back what the fuzz inputs expect to find (an input may
// have deleted it): stream S with messages and a push consumer C.
func fuzzBase(t *testing.T, acc *fakeAccount) {
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.Error != nil {
		createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true,
			AllowRollup: true, MaxMsgs: 50})
		for _, subj := range []string{"s.a", "s.b", "s.a"} {
			publish(t, acc, subj, nil, []byte("x"))
		}
	}
	var ci api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.S.C", nil, &ci)
	if ci.Error != nil {
		var created api.ConsumerInfoResponse
		acc.apiCall(t, "$JS.API.CONSUMER.CREATE.S.C", api.ConsumerCreateRequest{Stream: "S",
			Config: api.ConsumerConfig{Name: "C", Durable: "C", DeliverSubject: "deliver.c", AckPolicy: api.AckExplicit}}, &created)
		if created.Error != nil {
			t.Fatal(created.Error)
		}
	}
}
