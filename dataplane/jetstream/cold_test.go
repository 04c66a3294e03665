package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/tier"
)

// coldPayload is message i's data: distinct per message, so a wrong
// block or offset can never read back as right.
func coldPayload(i, size int) []byte {
	b := bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16)}, size/3+1)[:size]
	copy(b, fmt.Sprintf("msg-%08d", i))
	return b
}

func withTier(os tier.ObjectStore, segment, local int64) func(*Options) {
	return func(o *Options) {
		unpacedIngest(o)
		o.Tier = TierOptions{Store: os, SegmentBytes: segment, BlockBytes: segment / 4, LocalBytes: local, Interval: 5e6}
	}
}

func getMsg(t testing.TB, acc *fakeAccount, stream string, seq uint64) api.MsgGetResponse {
	t.Helper()
	var r api.MsgGetResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET."+stream, api.MsgGetRequest{Seq: seq}, &r)
	return r
}

func listObjects(t testing.TB, os tier.ObjectStore) []string {
	t.Helper()
	keys, err := os.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestColdTierLocalDir publishes well past the local budget with a
// file:// tier, and checks that the budget holds, every message reads
// back byte for byte (by sequence and through a consumer) before and
// after a restart, state counts cold messages, and deletes, subject
// purges and a full purge remove cold data and finally every object.
func TestColdTierLocalDir(t *testing.T) {
	os, err := tier.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	const n, size = 600, 1000
	const segment, budget = 64 << 10, 128 << 10
	e, acc, closeAll := openEngine(t, fs, withTier(os, segment, budget))
	createStream(t, acc, api.StreamConfig{Name: "C", Subjects: []string{"c.>"}, Storage: api.FileStorage})
	for i := 1; i <= n; i++ {
		if ack := publish(t, acc, fmt.Sprintf("c.%d", i%7), nil, coldPayload(i, size)); ack.Error != nil {
			t.Fatal(ack.Error)
		}
	}
	waitForCond(t, "local bytes within budget", func() bool {
		ts := e.TierStatus()
		return ts.LocalBytes <= budget && ts.Segments > 0
	})
	ts := e.TierStatus()
	t.Logf("tier: %d segments, %d cold msgs, local %d", ts.Segments, ts.ColdMsgs, ts.LocalBytes)
	if ts.ColdMsgs < n/2 || len(listObjects(t, os)) != ts.Segments {
		t.Fatalf("tier status %+v, objects %d", ts, len(listObjects(t, os)))
	}
	check := func(acc *fakeAccount) {
		t.Helper()
		si := streamInfo(t, acc, "C")
		if si.State.Msgs != n || si.State.FirstSeq != 1 || si.State.LastSeq != n || si.State.Bytes != uint64(n)*msgSize("c.0", nil, make([]byte, size)) {
			t.Fatalf("state %+v", si.State)
		}
		for i := 1; i <= n; i++ {
			r := getMsg(t, acc, "C", uint64(i))
			if r.Error != nil || r.Message == nil || !bytes.Equal(r.Message.Data, coldPayload(i, size)) || r.Message.Subject != fmt.Sprintf("c.%d", i%7) {
				t.Fatalf("seq %d: %+v", i, r.Error)
			}
		}
	}
	check(acc)
	closeAll()

	e, acc, closeAll = openEngine(t, fs, withTier(os, segment, budget))
	defer closeAll()
	check(acc)
	if e.TierStatus().ColdReads == 0 {
		t.Fatal("no cold reads after restart")
	}

	// A delete of a cold message is honoured; a subject purge removes
	// cold messages of the subject only.
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.C", api.MsgDeleteRequest{Seq: 2}, &del)
	if del.Error != nil {
		t.Fatal(del.Error)
	}
	if r := getMsg(t, acc, "C", 2); r.Error == nil || r.Error.ErrCode != 10037 {
		t.Fatalf("deleted cold message: %+v", r)
	}
	// The delete erased: the segment is rewritten without the message,
	// and the old object goes. (Twice, if the first rewrite read the
	// stubs before the delete's batch was visible: it keeps the mark.)
	waitForCond(t, "the erased message's segment rewritten", func() bool {
		ts := e.TierStatus()
		s := e.account("A").lookup("C")
		s.mu.Lock()
		_, cs := s.segmentLocked(1)
		erased := cs == nil || cs.seg.Erased
		s.mu.Unlock()
		return ts.Rewrites >= 1 && !erased && len(listObjects(t, os)) == ts.Segments
	})
	for _, seq := range []uint64{1, 3, 60} {
		if r := getMsg(t, acc, "C", seq); r.Error != nil || !bytes.Equal(r.Message.Data, coldPayload(int(seq), size)) {
			t.Fatalf("seq %d after the rewrite: %+v", seq, r.Error)
		}
	}
	var pr api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.C", api.StreamPurgeRequest{Subject: "c.3"}, &pr)
	if pr.Error != nil || pr.Purged != uint64((n+7-3)/7) {
		t.Fatalf("subject purge: %+v", pr)
	}
	si := streamInfo(t, acc, "C")
	if want := uint64(n - 1 - (n+7-3)/7); si.State.Msgs != want {
		t.Fatalf("msgs %d, want %d", si.State.Msgs, want)
	}
	if r := getMsg(t, acc, "C", 1); r.Error != nil || !bytes.Equal(r.Message.Data, coldPayload(1, size)) {
		t.Fatalf("seq 1 after purge: %+v", r.Error)
	}
	// Purging up to a sequence drops whole cold segments.
	acc.apiCall(t, "$JS.API.STREAM.PURGE.C", api.StreamPurgeRequest{Sequence: 200}, &pr)
	if pr.Error != nil {
		t.Fatal(pr.Error)
	}
	if si := streamInfo(t, acc, "C"); si.State.FirstSeq < 200 {
		t.Fatalf("first seq %d after purge to 200", si.State.FirstSeq)
	}
	acc.apiCall(t, "$JS.API.STREAM.PURGE.C", api.StreamPurgeRequest{}, &pr)
	if pr.Error != nil {
		t.Fatal(pr.Error)
	}
	waitForCond(t, "bucket empty", func() bool {
		if left := listObjects(t, os); len(left) != 0 {
			t.Logf("left %v status %+v", left, *e.TierStatus())
			return false
		}
		return true
	})
	var pending int
	_ = e.opts.Store.PendingObjects(0, 1<<partitionShift, func(store.PendingObject) error { pending++; return nil })
	waitForCond(t, "no pending records", func() bool {
		pending = 0
		_ = e.opts.Store.PendingObjects(0, 1<<partitionShift, func(store.PendingObject) error { pending++; return nil })
		return pending == 0
	})
}

// TestColdRun checks what one cold fetch of a consumer takes from its
// read-ahead buffer, and that hydrated bodies go back only where their
// stubs still are.
func TestColdRun(t *testing.T) {
	stub := func(seq uint64, n int) store.Message { return store.Message{Seq: seq, Cold: true, DataLen: n} }
	ahead := []store.Message{stub(1, 400), stub(2, 400), stub(3, 400), {Seq: 4, Data: []byte("hot")}, stub(5, 10)}
	run := coldRun(ahead, 1000)
	if len(run) != 2 || run[0].Seq != 1 || run[1].Seq != 2 {
		t.Fatalf("run of 1000 bytes = %v, want seqs 1 and 2", run)
	}
	if run := coldRun(ahead, 10); len(run) != 1 {
		t.Fatalf("run under one message = %d messages, want 1", len(run))
	}
	if run := coldRun(ahead, 1<<20); len(run) != 3 {
		t.Fatalf("run = %d messages, want the 3 before the hot one", len(run))
	}
	for i := range run {
		run[i].Cold, run[i].Data = false, []byte("body")
	}
	// The buffer moved on past seq 1 meanwhile.
	ahead = fillColdRun(ahead[1:], run)
	if ahead[0].Seq != 2 || ahead[0].Cold || string(ahead[0].Data) != "body" || !ahead[1].Cold || ahead[2].Seq != 4 {
		t.Fatalf("filled buffer = %+v", ahead)
	}
}

// TestSealEstimate: a segment's lists are sized from the average stored
// message, bounded, and an empty stream sizes nothing.
func TestSealEstimate(t *testing.T) {
	for _, c := range []struct{ msgs, bytes, seg, want uint64 }{
		{0, 0, 1 << 20, 0},
		{10, 0, 1 << 20, 0},
		{1000, 128000, 1 << 20, 8193},
		{1, 1 << 30, 1 << 20, 1},
		{1 << 40, 1 << 40, 1 << 40, 1 << 20},
	} {
		if got := sealEstimate(c.msgs, c.bytes, c.seg); got != c.want {
			t.Errorf("sealEstimate(%d, %d, %d) = %d, want %d", c.msgs, c.bytes, c.seg, got, c.want)
		}
	}
}
