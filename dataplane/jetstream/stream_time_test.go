package jetstream

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// engineAt starts an engine on a Pebble store whose clock is *now.
func engineAt(t *testing.T, now *atomic.Int64) *fakeAccount {
	t.Helper()
	st, err := store.Open(store.Options{Dir: "js", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMem()
	e, err := New(Options{Store: st, Memory: mem, ServerVersion: "test", Log: quietLog(),
		Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	acc := newFakeAccount("A")
	if err := e.EnableAccount(acc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close(); mem.Close() })
	return acc
}

// TestDeliverByStartTime: a by_start_time consumer starts at the first
// message stored at or after its time, with deleted messages in between:
// before the first, exact hits, times between messages, a time whose
// message was deleted, and after the last; and MSG.GET by start_time
// finds the same messages.
func TestDeliverByStartTime(t *testing.T) {
	var now atomic.Int64
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	acc := engineAt(t, &now)
	createStream(t, acc, api.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	at := func(seq int) time.Time { return base.Add(time.Duration(seq) * time.Second) }
	for seq := 1; seq <= 200; seq++ {
		now.Store(at(seq).UnixNano())
		publish(t, acc, fmt.Sprintf("t.%d", seq%3), nil, []byte("m"))
	}
	for _, seq := range []int{1, 2, 50, 51, 52, 200} {
		var resp api.SuccessResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.T", api.MsgDeleteRequest{Seq: uint64(seq), NoErase: true}, &resp)
		if resp.Error != nil {
			t.Fatalf("delete %d: %v", seq, resp.Error)
		}
	}
	for i, tc := range []struct {
		start time.Time
		first uint64 // the first message delivered
	}{
		{base.Add(-time.Hour), 3},
		{at(1), 3},
		{at(3), 3},
		{at(3).Add(time.Nanosecond), 4},
		{at(49).Add(time.Millisecond), 53},
		{at(51), 53},
		{at(120), 120},
		{at(199), 199},
		{at(199).Add(time.Nanosecond), 201},
		{at(500), 201},
	} {
		start := tc.start
		info := createConsumer(t, acc, "T", api.ConsumerConfig{Name: fmt.Sprint("C", i), AckPolicy: api.AckExplicit,
			DeliverPolicy: api.DeliverByStartTime, OptStartTime: &start})
		if got := info.ConsumerInfo.Delivered.Stream + 1; got != tc.first {
			t.Errorf("start %v: starts at %d, want %d", tc.start.Sub(base), got, tc.first)
		}
		// MSG.GET by start_time finds the same message.
		var get api.MsgGetResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.GET.T", api.MsgGetRequest{StartTime: &start}, &get)
		switch {
		case tc.first == 201 && (get.Error == nil || get.Error.ErrCode != api.CodeNoMessageFound):
			t.Errorf("get at %v: %+v, want no message", tc.start.Sub(base), get)
		case tc.first < 201 && (get.Message == nil || get.Message.Sequence != tc.first):
			t.Errorf("get at %v: %+v, want seq %d", tc.start.Sub(base), get, tc.first)
		}
	}
}
