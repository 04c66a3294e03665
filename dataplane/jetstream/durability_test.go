package jetstream

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// TestCrashKeepsAckedPublishes publishes from several goroutines through
// the whole apply path on a crash-simulating FS, crashes (keeping only
// synced data), reopens, and finds every acknowledged message intact.
func TestCrashKeepsAckedPublishes(t *testing.T) {
	fs := vfs.NewCrashableMem()
	_, acc, _ := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})

	var mu sync.Mutex
	acked := map[uint64]string{}
	var wg sync.WaitGroup
	var stop atomic.Bool
	enough := make(chan struct{})
	var once sync.Once
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				data := fmt.Sprintf("w%d-%d", w, i)
				ack := publish(t, acc, fmt.Sprintf("s.%d", w), nil, []byte(data))
				if ack.Error != nil {
					return
				}
				mu.Lock()
				acked[ack.Sequence] = data
				if len(acked) >= 400 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	<-enough
	mu.Lock()
	want := make(map[uint64]string, len(acked))
	for k, v := range acked {
		want[k] = v
	}
	mu.Unlock()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	stop.Store(true)
	wg.Wait()

	_, acc2, _ := openEngine(t, crashed)
	for seq, data := range want {
		var resp api.MsgGetResponse
		acc2.apiCall(t, "$JS.API.STREAM.MSG.GET.S", api.MsgGetRequest{Seq: seq}, &resp)
		if resp.Error != nil || string(resp.Message.Data) != data {
			t.Fatalf("acked seq %d lost or changed after crash: %+v", seq, resp)
		}
	}
	var info api.StreamInfoResponse
	acc2.apiCall(t, "$JS.API.STREAM.INFO.S", nil, &info)
	if info.Error != nil || info.State.Msgs < uint64(len(want)) {
		t.Fatalf("state after crash: %+v (acked %d)", info.State, len(want))
	}
}

// TestFailedSyncFailsPublish: when fsync fails the publisher gets an
// error, never a PubAck, and later publishes fail too instead of being
// acknowledged on a store that lost writes.
func TestFailedSyncFailsPublish(t *testing.T) {
	var failing atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() {
			switch op.Kind {
			case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
				return errorfs.ErrInjected
			}
		}
		return nil
	}))
	_, acc, _ := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	if ack := publish(t, acc, "s", nil, []byte("ok")); ack.Error != nil || ack.Sequence != 1 {
		t.Fatalf("healthy publish: %+v", ack)
	}
	failing.Store(true)
	for i := range 3 {
		ack := publish(t, acc, "s", nil, []byte("lost"))
		// A refusal names the stream with seq 0, as nats-server's does.
		if ack.Error == nil || ack.PubAck == nil || ack.Sequence != 0 {
			t.Fatalf("publish %d acknowledged despite failed sync: %+v", i, ack)
		}
	}
}

// TestPebbleAndMemoryAgree runs one seeded random walk of publishes,
// deletes, purges and limit changes against a Pebble-backed and a
// memory-backed engine and requires identical streams afterwards.
func TestPebbleAndMemoryAgree(t *testing.T) {
	pst, err := store.Open(store.Options{Dir: "js", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	_, pacc, _ := engineOn(t, pst)
	_, macc, _ := engineOn(t, store.NewMem())
	accs := []*fakeAccount{pacc, macc}
	cfg := api.StreamConfig{Name: "W", Subjects: []string{"w.*"}, MaxMsgsPer: -1, MaxMsgs: -1, MaxBytes: -1}
	for _, a := range accs {
		createStream(t, a, cfg)
	}
	rng := newRand(42)
	for step := range 1500 {
		subj := fmt.Sprintf("w.%d", rng.IntN(12))
		switch op := rng.IntN(100); {
		case op < 70:
			data := []byte(fmt.Sprintf("m%d", step))
			for _, a := range accs {
				publish(t, a, subj, nil, data)
			}
		case op < 80:
			seq := uint64(rng.IntN(step + 1))
			for _, a := range accs {
				var r api.SuccessResponse
				a.apiCall(t, "$JS.API.STREAM.MSG.DELETE.W", api.MsgDeleteRequest{Seq: seq}, &r)
			}
		case op < 85:
			req := api.StreamPurgeRequest{Subject: subj, Keep: uint64(rng.IntN(3))}
			for _, a := range accs {
				var r api.StreamPurgeResponse
				a.apiCall(t, "$JS.API.STREAM.PURGE.W", req, &r)
			}
		default:
			next := cfg
			next.MaxMsgsPer = int64(rng.IntN(5)) - 1
			next.MaxMsgs = int64(rng.IntN(200)) - 1
			if next.MaxMsgsPer == 0 {
				next.MaxMsgsPer = -1
			}
			if next.MaxMsgs == 0 {
				next.MaxMsgs = -1
			}
			for _, a := range accs {
				var r api.StreamUpdateResponse
				a.apiCall(t, "$JS.API.STREAM.UPDATE.W", next, &r)
				if r.Error != nil {
					t.Fatalf("update: %v", r.Error)
				}
			}
		}
	}
	a, b := dump(t, pacc), dump(t, macc)
	if a != b {
		t.Fatalf("pebble and memory disagree:\npebble: %s\nmemory: %s", a, b)
	}
}

// dump renders a stream's state and every message.
func dump(t *testing.T, acc *fakeAccount) string {
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO.W", nil, &info)
	st := info.State
	out := fmt.Sprintf("msgs=%d bytes=%d first=%d last=%d deleted=%d;", st.Msgs, st.Bytes, st.FirstSeq, st.LastSeq, st.NumDeleted)
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		var r api.MsgGetResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.GET.W", api.MsgGetRequest{Seq: seq}, &r)
		if r.Error == nil {
			b, _ := json.Marshal([]any{r.Message.Sequence, r.Message.Subject, string(r.Message.Data)})
			out += string(b)
		}
	}
	return out
}
