package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/jetstream/archive"
)

// snapshotOf takes a backup of stream name as a receiver does: it
// acknowledges every chunk and returns the archive's bytes once the
// sender's end says 204.
func snapshotOf(t *testing.T, acc *fakeAccount, name string) []byte {
	t.Helper()
	inbox := "_INBOX.backup." + name
	var buf bytes.Buffer
	end := make(chan string, 1)
	unsub, _ := acc.SubscribeInternal(inbox, func(_, reply, hdr, msg []byte) {
		if len(msg) == 0 {
			end <- string(hdr)
			return
		}
		buf.Write(msg)
		acc.Publish(string(reply), "", nil, nil)
	})
	defer unsub()
	var resp api.StreamSnapshotResponse
	acc.apiCall(t, "$JS.API.STREAM.SNAPSHOT."+name, api.StreamSnapshotRequest{DeliverSubject: inbox, ChunkSize: 1024}, &resp)
	if resp.Error != nil {
		t.Fatalf("snapshot %s: %v", name, resp.Error)
	}
	select {
	case hdr := <-end:
		if !strings.HasPrefix(hdr, "NATS/1.0 204") {
			t.Fatalf("snapshot %s ended with %q", name, hdr)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("snapshot %s did not end", name)
	}
	return buf.Bytes()
}

// restoreFrom restores stream cfg from arc in chunks, as the nats CLI
// sends them, and returns the final answer.
func restoreFrom(t *testing.T, acc *fakeAccount, cfg api.StreamConfig, arc []byte) (created api.StreamCreateResponse) {
	t.Helper()
	var resp api.StreamRestoreResponse
	acc.apiCall(t, "$JS.API.STREAM.RESTORE."+cfg.Name, api.StreamRestoreRequest{Config: cfg}, &resp)
	if resp.Error != nil {
		t.Fatalf("restore %s: %v", cfg.Name, resp.Error)
	}
	for len(arc) > 0 {
		n := min(len(arc), 700)
		ans := acc.request(t, resp.DeliverSubject, nil, arc[:n])
		arc = arc[n:]
		if len(ans) > 0 {
			// Refused early: the answer is the restore's error.
			if err := json.Unmarshal(ans, &created); err != nil {
				t.Fatal(err)
			}
			return created
		}
	}
	if err := json.Unmarshal(acc.request(t, resp.DeliverSubject, nil, nil), &created); err != nil {
		t.Fatal(err)
	}
	return created
}

// wantGone fails unless the account has no stream name, and its storage
// commitments are back to nothing.
func wantGone(t *testing.T, e *Engine, acc *fakeAccount, name string) {
	t.Helper()
	var info api.StreamInfoResponse
	acc.apiCall(t, "$JS.API.STREAM.INFO."+name, nil, &info)
	if info.Error == nil || info.Error.ErrCode != 10059 {
		t.Errorf("stream %s after a failed restore: %+v", name, info.Error)
	}
	if n := e.account(acc.Name()).transfers.Load(); n != 0 {
		t.Errorf("%d transfers still counted", n)
	}
}

// An interest stream's messages come back though its consumers come back
// only after them, and a consumer's acknowledgement after the restore
// removes what it was the last to need.
func TestRestoreInterestStream(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	cfg := api.StreamConfig{Name: "I", Subjects: []string{"i.>"}, Retention: api.InterestPolicy}
	createStream(t, acc, cfg)
	var cresp api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.CREATE.I.C", api.ConsumerCreateRequest{Stream: "I",
		Config: api.ConsumerConfig{Durable: "C", AckPolicy: api.AckExplicit}}, &cresp)
	if cresp.Error != nil {
		t.Fatal(cresp.Error)
	}
	for i := 0; i < 5; i++ {
		publish(t, acc, fmt.Sprintf("i.%d", i), nil, []byte("x"))
	}
	arc := snapshotOf(t, acc, "I")
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.I", nil, &del)
	created := restoreFrom(t, acc, cfg, arc)
	if created.Error != nil || created.StreamInfo == nil || created.State.Msgs != 5 {
		t.Fatalf("restore: %+v", created)
	}
	var ci api.ConsumerInfoResponse
	acc.apiCall(t, "$JS.API.CONSUMER.INFO.I.C", nil, &ci)
	if ci.Error != nil || ci.NumPending != 5 {
		t.Fatalf("consumer after the restore: %+v", ci)
	}
}

// A sealed stream comes back sealed, with its messages.
func TestRestoreSealedStream(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	cfg := api.StreamConfig{Name: "Z", Subjects: []string{"z"}}
	createStream(t, acc, cfg)
	publish(t, acc, "z", nil, []byte("kept"))
	cfg.Sealed = true
	var upd api.StreamCreateResponse
	acc.apiCall(t, "$JS.API.STREAM.UPDATE.Z", cfg, &upd)
	if upd.Error != nil {
		t.Fatal(upd.Error)
	}
	arc := snapshotOf(t, acc, "Z")
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.Z", nil, &del)
	created := restoreFrom(t, acc, upd.Config, arc)
	if created.Error != nil || created.State.Msgs != 1 || !created.Config.Sealed {
		t.Fatalf("restore of a sealed stream: %+v", created)
	}
	if ack := publish(t, acc, "z", nil, []byte("more")); ack.Error == nil {
		t.Error("a restored sealed stream took a message")
	}
}

// A source's progress comes back with the stream, so the restored stream
// goes on from where it had taken its source.
func TestRestoreSourceProgress(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	cfg := api.StreamConfig{Name: "SRC", Sources: []*api.StreamSource{{Name: "ORIGIN"}}}
	var buf bytes.Buffer
	w, _ := archive.NewWriter(&buf)
	key := cfg.Sources[0].IndexName()
	w.Stream(&archive.Stream{Sources: []archive.Source{{Key: key, Seq: 41, Identity: "id"}, {Key: "not-a-source", Seq: 7}}})
	w.Close()
	if created := restoreFrom(t, acc, cfg, buf.Bytes()); created.Error != nil {
		t.Fatalf("restore: %+v", created.Error)
	}
	s := e.account(acc.Name()).lookup("SRC")
	s.mu.Lock()
	got, other := s.mu.progress[key], s.mu.progress["not-a-source"]
	s.mu.Unlock()
	if got.seq != 41 || got.ident != "id" || other.seq != 0 {
		t.Errorf("progress after the restore: %+v, and %+v for a key the stream does not source", got, other)
	}
}

// Backups no publish could have made are refused, each leaving nothing,
// so the name restores afterwards.
func TestRestoreRefusesForgedArchives(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	cfg := api.StreamConfig{Name: "F", Subjects: []string{"f.>"}, MaxConsumers: 1}
	consumer := func(name string) *archive.Consumer {
		return &archive.Consumer{Name: name, Config: json.RawMessage(fmt.Sprintf(`{"durable_name":%q,"ack_policy":"explicit"}`, name))}
	}
	build := func(state archive.State, msgs []archive.Msg, cons ...*archive.Consumer) []byte {
		var buf bytes.Buffer
		w, _ := archive.NewWriter(&buf)
		w.Stream(&archive.Stream{State: state})
		for i := range msgs {
			w.Msg(&msgs[i])
		}
		for _, c := range cons {
			w.Consumer(c)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	one := archive.State{FirstSeq: 1, LastSeq: 1, Msgs: 1}
	cases := map[string][]byte{
		"a subject breaking the protocol": build(one, []archive.Msg{{Seq: 1, Subject: "f.a\r\nMSG f.b 1 2\r\nhi"}}),
		"a wildcard subject":              build(one, []archive.Msg{{Seq: 1, Subject: "f.*"}}),
		"a header not a header block":     build(one, []archive.Msg{{Seq: 1, Subject: "f.a", Header: []byte("garbage")}}),
		"a sequence past the last":        build(one, []archive.Msg{{Seq: 9, Subject: "f.a"}}),
		"sequences past any a stream has": build(archive.State{FirstSeq: 1, LastSeq: 1 << 63, Msgs: 0}, nil),
		"more consumers than allowed":     build(archive.State{}, nil, consumer("A"), consumer("B")),
		"a consumer twice":                build(archive.State{}, nil, consumer("A"), consumer("A")),
		"an ephemeral consumer":           build(archive.State{}, nil, &archive.Consumer{Name: "E", Config: json.RawMessage(`{"ack_policy":"none"}`)}),
		"a consumer config unknown":       build(archive.State{}, nil, &archive.Consumer{Name: "A", Config: json.RawMessage(`{"durable_name":"A","evil":1}`)}),
		"a consumer state unreadable":     build(archive.State{}, nil, &archive.Consumer{Name: "A", Config: json.RawMessage(`{"durable_name":"A"}`), State: json.RawMessage(`"nope"`)}),
		"not an archive":                  []byte("hello"),
	}
	for what, arc := range cases {
		t.Run(what, func(t *testing.T) {
			// A refusal the API has a code for keeps it, as nats-server's
			// restore errors do; the rest are 10062.
			want := api.ErrorCode(10062)
			if what == "more consumers than allowed" {
				want = 10026
			}
			created := restoreFrom(t, acc, cfg, arc)
			if created.Error == nil || created.Error.ErrCode != want {
				var del api.SuccessResponse
				acc.apiCall(t, "$JS.API.STREAM.DELETE.F", nil, &del)
				t.Fatalf("restore of %s: %+v, want %d", what, created, want)
			}
			t.Logf("refused: %s", created.Error.Description)
			wantGone(t, e, acc, "F")
		})
	}
	good := build(one, []archive.Msg{{Seq: 1, Subject: "f.a", Header: []byte("NATS/1.0\r\nK: v\r\n\r\n"), Data: []byte("ok")}}, consumer("A"))
	if created := restoreFrom(t, acc, cfg, good); created.Error != nil || created.State.Msgs != 1 {
		t.Fatalf("restore of a sound backup after the refusals: %+v", created)
	}
}

// A memory stream backs up and restores as a file stream does (the nats
// CLI refuses to ask, as for nats-server, but the API serves it).
func TestBackupMemoryStream(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	cfg := api.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: api.MemoryStorage}
	createStream(t, acc, cfg)
	for i := 0; i < 3; i++ {
		publish(t, acc, "m", nil, []byte{byte(i)})
	}
	arc := snapshotOf(t, acc, "M")
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.M", nil, &del)
	if created := restoreFrom(t, acc, cfg, arc); created.Error != nil || created.State.Msgs != 3 || created.Config.Storage != api.MemoryStorage {
		t.Fatalf("restore of a memory stream: %+v", created)
	}
}

// A restore holds to the account's storage limit as publishes do: one
// that does not fit is refused, and what it wrote is given back, so the
// account stores as much as before.
func TestRestoreWithinAccountStorage(t *testing.T) {
	e, _ := bareEngine(t, vfs.NewMem())
	big := register(t, e, "BIG", untiered(func(*api.AccountLimits) {}))
	small := register(t, e, "SMALL", untiered(func(l *api.AccountLimits) { l.MaxStore = 4000 }))
	cfg := api.StreamConfig{Name: "B", Subjects: []string{"b"}}
	createStream(t, big, cfg)
	for i := 0; i < 10; i++ {
		publish(t, big, "b", nil, bytes.Repeat([]byte{'x'}, 1000))
	}
	arc := snapshotOf(t, big, "B")
	created := restoreFrom(t, small, cfg, arc)
	if created.Error == nil || created.Error.ErrCode != 10002 && created.Error.ErrCode != 10047 {
		t.Fatalf("a restore past the account's storage: %+v", created)
	}
	wantGone(t, e, small, "B")
	// The whole limit is there for the next stream.
	createStream(t, small, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	for i := 0; i < 3; i++ {
		if ack := publish(t, small, "s", nil, bytes.Repeat([]byte{'y'}, 1000)); ack.Error != nil {
			t.Fatalf("publish %d after the refused restore: %v", i, ack.Error)
		}
	}
}

// A stream that maps its subjects stores them mapped; restored, its
// messages keep those subjects and are not mapped a second time.
func TestRestoreKeepsMappedSubjects(t *testing.T) {
	_, acc, _ := openEngine(t, vfs.NewMem())
	cfg := api.StreamConfig{Name: "X", Subjects: []string{"x.>"},
		SubjectTransform: &api.SubjectTransform{Source: "x.>", Destination: "x.y.>"}}
	createStream(t, acc, cfg)
	publish(t, acc, "x.a", nil, []byte("1"))
	arc := snapshotOf(t, acc, "X")
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.X", nil, &del)
	if created := restoreFrom(t, acc, cfg, arc); created.Error != nil {
		t.Fatal(created.Error)
	}
	var got api.MsgGetResponse
	acc.apiCall(t, "$JS.API.STREAM.MSG.GET.X", api.MsgGetRequest{Seq: 1}, &got)
	if got.Error != nil || got.Message == nil || got.Message.Subject != "x.y.a" {
		t.Errorf("message 1 after the restore: %+v %+v", got.Error, got.Message)
	}
}

// A restore cut short by a crash leaves nothing behind: its stream's
// record says it was restoring, and start-up removes it, so no part of a
// backup passes for the stream and the name is free for the next try. A
// restore that finished is kept whole through the next crash.
func TestRestoreCutShortByCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	_, acc, _ := openEngine(t, fs)
	cfg := api.StreamConfig{Name: "R", Subjects: []string{"r.>"}}
	createStream(t, acc, cfg)
	for i := range 200 {
		publish(t, acc, fmt.Sprintf("r.%d", i%7), nil, bytes.Repeat([]byte{byte(i)}, 100))
	}
	arc := snapshotOf(t, acc, "R")
	var del api.SuccessResponse
	acc.apiCall(t, "$JS.API.STREAM.DELETE.R", nil, &del)

	var resp api.StreamRestoreResponse
	acc.apiCall(t, "$JS.API.STREAM.RESTORE.R", api.StreamRestoreRequest{Config: cfg}, &resp)
	if resp.Error != nil {
		t.Fatal(resp.Error)
	}
	for half := arc[:len(arc)/2]; len(half) > 0; {
		n := min(len(half), 700)
		if ans := acc.request(t, resp.DeliverSubject, nil, half[:n]); len(ans) > 0 {
			t.Fatalf("chunk refused: %s", ans)
		}
		half = half[n:]
	}
	// The restore's create is durable by now (it commits before the
	// deliver subject is answered), with some of the messages.
	fs2 := fs.CrashClone(vfs.CrashCloneCfg{})
	e2, acc2, _ := openEngine(t, fs2)
	wantGone(t, e2, acc2, "R")
	var names api.StreamNamesResponse
	acc2.apiCall(t, "$JS.API.STREAM.NAMES", nil, &names)
	if len(names.Streams) != 0 {
		t.Fatalf("streams after the cut restore: %v", names.Streams)
	}
	var info api.AccountInfoResponse
	acc2.apiCall(t, "$JS.API.INFO", nil, &info)
	if info.Error != nil || info.Store != 0 || info.Streams != 0 {
		t.Fatalf("account after the cut restore: %+v", info)
	}

	if created := restoreFrom(t, acc2, cfg, arc); created.Error != nil || created.State.Msgs != 200 {
		t.Fatalf("restore after the crash: %+v", created)
	}
	_, acc3, _ := openEngine(t, fs2.CrashClone(vfs.CrashCloneCfg{}))
	var si api.StreamInfoResponse
	acc3.apiCall(t, "$JS.API.STREAM.INFO.R", nil, &si)
	if si.Error != nil || si.State.Msgs != 200 {
		t.Fatalf("finished restore after a crash: %+v", si)
	}
}
