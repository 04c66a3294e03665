package jetstream

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

func schedHdr(kv ...string) []byte { return appendHeaderBlock(nil, "", kv...) }

// waitMsgOn waits until subj of stream has a message, and returns it.
func waitMsgOn(t *testing.T, acc *fakeAccount, stream, subj string) api.StoredMsg {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var resp api.MsgGetResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.GET."+stream, api.MsgGetRequest{LastFor: subj}, &resp)
		if resp.Error == nil && resp.Message != nil {
			return *resp.Message
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message on %s", subj)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestScheduleAtFires(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowMsgSchedules: true, AllowMsgTTL: true})
	at := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	ack := publish(t, acc, "s.sched", schedHdr(hdrSchedule, "@at "+at, hdrScheduleTarget, "s.out", hdrScheduleTTL, "5s", "X-Keep", "1", api.HeaderMsgID, "id1"), []byte("payload"))
	if ack.Error != nil {
		t.Fatal(ack.Error)
	}
	m := waitMsgOn(t, acc, "S", "s.out")
	if string(m.Data) != "payload" {
		t.Fatalf("copy body %q", m.Data)
	}
	want := map[string]string{hdrScheduler: "s.sched", hdrScheduleNext: "purge", api.HeaderTTL: "5s", "X-Keep": "1",
		hdrSchedule: "", hdrScheduleTarget: "", api.HeaderMsgID: "", api.HeaderRollup: ""}
	for k, v := range want {
		if got := string(headerValue(m.Header, k)); got != v {
			t.Errorf("copy header %s = %q, want %q (%q)", k, got, v, m.Header)
		}
	}
	// The one-off schedule is purged once it fired.
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.State.Msgs != 1 {
		t.Fatalf("after firing: %+v", info.State)
	}
}

func TestScheduleEveryRepeatsAndCancels(t *testing.T) {
	fs := vfs.NewMem()
	_, acc, closeAll := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowMsgSchedules: true})
	publish(t, acc, "s.src", nil, []byte("latest"))
	ack := publish(t, acc, "s.tick", schedHdr(hdrSchedule, "@every 1s", hdrScheduleTarget, "s.out", hdrScheduleSource, "s.src"), []byte("own"))
	if ack.Error != nil {
		t.Fatal(ack.Error)
	}
	first := waitMsgOn(t, acc, "S", "s.out")
	if string(first.Data) != "latest" || len(headerValue(first.Header, hdrScheduleNext)) == 0 || string(headerValue(first.Header, hdrScheduleNext)) == "purge" {
		t.Fatalf("first copy %q %q", first.Data, first.Header)
	}
	// It survives a restart: rebuilt from the stored schedule.
	closeAll()
	e, acc, _ := openEngine(t, fs)
	deadline := time.Now().Add(10 * time.Second)
	for waitMsgOn(t, acc, "S", "s.out").Sequence == first.Sequence {
		if time.Now().After(deadline) {
			t.Fatal("no second copy after the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Purging the schedule's subject ends it.
	var purge api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{Subject: "s.tick"}, &purge)
	s := e.account("A").lookup("S")
	s.mu.Lock()
	n := len(s.mu.sched)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d schedules after the purge", n)
	}
}

func TestScheduleRefusals(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowMsgSchedules: true})
	createStream(t, acc, api.StreamConfig{Name: "P", Subjects: []string{"p.>"}})
	at := "@at " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, subj string
		hdr        []byte
		code       api.ErrorCode
	}{
		{"disabled", "p.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "p.b"), api.CodeMessageSchedulesDisabled},
		{"disabled, invalid", "p.a", schedHdr(hdrSchedule, "soon"), api.CodeMessageSchedulesDisabled},
		{"disabled, purge", "p.a", schedHdr(hdrScheduleNext, "purge", hdrScheduler, "p.s"), api.CodeMessageSchedulesDisabled},
		{"scheduler alone", "p.a", schedHdr(hdrScheduler, "p.s"), api.CodeMessageSchedulesSchedulerInvalid},
		{"next not purge", "s.a", schedHdr(hdrScheduleNext, "later", hdrScheduler, "s.s"), api.CodeMessageSchedulesSchedulerInvalid},
		{"invalid pattern", "s.a", schedHdr(hdrSchedule, "@every 10ms", hdrScheduleTarget, "s.b"), api.CodeMessageSchedulesPatternInvalid},
		{"no target", "s.a", schedHdr(hdrSchedule, at), api.CodeMessageSchedulesTargetInvalid},
		{"target itself", "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "s.a"), api.CodeMessageSchedulesTargetInvalid},
		{"target elsewhere", "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "x.b"), api.CodeMessageSchedulesTargetInvalid},
		{"ttl without ttls", "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "s.b", hdrScheduleTTL, "5s"), api.CodeMessageTTLDisabled},
		{"bad ttl", "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "s.b", hdrScheduleTTL, "soon"), api.CodeMessageSchedulesTTLInvalid},
		{"bad rollup", "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "s.b", hdrScheduleRollup, "all"), api.CodeMessageSchedulesRollupInvalid},
		{"source is target", "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "s.b", hdrScheduleSource, "s.b"), api.CodeMessageSchedulesSourceInvalid},
		{"stream source header", "p.a", schedHdr(api.HeaderStreamSource, "X 1"), api.CodeMessageSourceHdrNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ack := publish(t, acc, tc.subj, tc.hdr, []byte("x"))
			if ack.Error == nil || ack.Error.ErrCode != tc.code {
				t.Fatalf("got %+v %+v, want err_code %d", ack.PubAck, ack.Error, tc.code)
			}
		})
	}
	var info api.StreamInfoResponse
	for _, name := range []string{"S", "P"} {
		acc.apiCall(t, "$JS.API.STREAM.INFO."+name, nil, &info)
		if info.State.Msgs != 0 {
			t.Fatalf("stream %s stored a refused publish: %+v", name, info.State)
		}
	}
	// A valid schedule is stored with the roll-up it implies.
	if ack := publish(t, acc, "s.a", schedHdr(hdrSchedule, at, hdrScheduleTarget, "s.b"), nil); ack.Error != nil {
		t.Fatal(ack.Error)
	}
	if m := waitMsgOn(t, acc, "S", "s.a"); string(headerValue(m.Header, api.HeaderRollup)) != "sub" {
		t.Fatalf("stored schedule %q", m.Header)
	}
}

func TestHasHeader(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nA: 1\r\nNats-Schedule-Time-Zone:\r\nB: x\r\n\r\n")
	for key, want := range map[string]bool{"A": true, "Nats-Schedule-Time-Zone": true, "B": true, "Nats-Schedule": false, "C": false} {
		if got := hasHeader(hdr, key); got != want {
			t.Errorf("hasHeader(%q) = %v", key, got)
		}
	}
	if hasHeader(nil, "A") || hasHeader([]byte("NATS/1.0\r\n\r\n"), "A") {
		t.Error("found a header in an empty block")
	}
	if n := testing.AllocsPerRun(100, func() { hasHeader(hdr, "Nats-Schedule-Time-Zone") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestScheduleCopyReachesWaitingPull: a pull request waiting on the
// target gets the copy when the schedule fires.
func TestScheduleCopyReachesWaitingPull(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowMsgSchedules: true})
	createConsumer(t, acc, "S", api.ConsumerConfig{Durable: "C", AckPolicy: api.AckNone, FilterSubject: "s.out"})
	got := inbox(t, acc, "_INBOX.sched")
	acc.Publish("$JS.API.CONSUMER.MSG.NEXT.S.C", "_INBOX.sched", nil, []byte(`{"batch":1,"expires":5000000000}`))
	at := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
	publish(t, acc, "s.sched", schedHdr(hdrSchedule, "@at "+at, hdrScheduleTarget, "s.out"), []byte("wake"))
	if d := next(t, got); d.subject != "s.out" || d.data != "wake" {
		t.Fatalf("delivery %+v", d)
	}
}

// TestScheduleCopyRepublished: a copy is republished like any stored
// message, once durable.
func TestScheduleCopyRepublished(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowMsgSchedules: true,
		RePublish: &api.RePublish{Source: "s.out", Destination: "rp.out"}})
	got := inbox(t, acc, "rp.out")
	at := time.Now().UTC().Format(time.RFC3339)
	publish(t, acc, "s.sched", schedHdr(hdrSchedule, "@at "+at, hdrScheduleTarget, "s.out"), []byte("again"))
	d := next(t, got)
	if d.data != "again" || string(headerValue([]byte(d.hdr), api.HeaderSubject)) != "s.out" ||
		string(headerValue([]byte(d.hdr), hdrScheduler)) != "s.sched" {
		t.Fatalf("republished %+v", d)
	}
}
