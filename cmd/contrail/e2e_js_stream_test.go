package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream API through nats.go's jetstream package: what a Go
// application sees.

func TestJSAccountInfo(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	ai, err := c.js.AccountInfo(ctx)
	if err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
	if ai.Streams != 0 || ai.Consumers != 0 || ai.Store != 0 || ai.Memory != 0 {
		t.Errorf("empty account info: %+v", ai)
	}
	if ai.Limits.MaxStreams != -1 || ai.Limits.MaxConsumers != -1 {
		t.Errorf("limits %+v, want unlimited (-1) in open mode", ai.Limits)
	}
	if ai.API.Level < 1 {
		t.Errorf("api level %d, want >= 1", ai.API.Level)
	}

	createStream(t, c.js, jetstream.StreamConfig{Name: "F", Subjects: []string{"f.>"}, MaxBytes: 1 << 20})
	createStream(t, c.js, jetstream.StreamConfig{Name: "M", Subjects: []string{"m.>"}, Storage: jetstream.MemoryStorage, MaxBytes: 1 << 10})
	jsPublish(t, c.js, "f.1", "file data")
	jsPublish(t, c.js, "m.1", "memory data")
	ai, err = c.js.AccountInfo(ctx)
	if err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
	if ai.Streams != 2 {
		t.Errorf("streams = %d, want 2", ai.Streams)
	}
	if ai.Store == 0 || ai.Memory == 0 {
		t.Errorf("usage after publishing: storage %d, memory %d; want both > 0", ai.Store, ai.Memory)
	}
	if ai.ReservedStore != 1<<20 || ai.ReservedMemory != 1<<10 {
		t.Errorf("reserved storage %d, memory %d; want the streams' max_bytes %d and %d", ai.ReservedStore, ai.ReservedMemory, 1<<20, 1<<10)
	}
	if ai.API.Total == 0 {
		t.Errorf("api total = 0 after several requests")
	}
	before := ai.API.Errors
	if _, err := c.js.Stream(ctx, "NOPE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Stream(NOPE): %v, want ErrStreamNotFound", err)
	}
	ai, _ = c.js.AccountInfo(ctx)
	if ai.API.Errors != before+1 {
		t.Errorf("api errors %d after a failed request, want %d", ai.API.Errors, before+1)
	}
}

func TestJSStreamCRUD(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	cfg := jetstream.StreamConfig{
		Name:        "ORDERS",
		Description: "all the orders",
		Subjects:    []string{"orders.*", "returns.>"},
		Metadata:    map[string]string{"owner": "shop"},
		MaxMsgs:     1000,
		MaxAge:      time.Hour,
		Duplicates:  time.Minute,
	}
	s := createStream(t, c.js, cfg)
	info := s.CachedInfo()
	got := info.Config
	if got.Name != "ORDERS" || got.Description != cfg.Description || !slices.Equal(got.Subjects, cfg.Subjects) ||
		got.MaxMsgs != 1000 || got.MaxAge != time.Hour || got.Duplicates != time.Minute ||
		got.Storage != jetstream.FileStorage || got.Replicas != 1 || got.Retention != jetstream.LimitsPolicy ||
		got.Discard != jetstream.DiscardOld || got.MaxBytes != -1 || got.MaxMsgSize != -1 || got.MaxMsgsPerSubject != -1 ||
		got.MaxConsumers != -1 {
		t.Errorf("created config %+v", got)
	}
	if got.Metadata["owner"] != "shop" || got.Metadata["_nats.req.level"] != "0" || got.Metadata["_nats.ver"] == "" {
		t.Errorf("metadata %v: want the user's key plus _nats.req.level, _nats.ver, _nats.level", got.Metadata)
	}
	if info.Created.IsZero() || info.Created.Location() != time.UTC {
		t.Errorf("created %v, want a UTC time", info.Created)
	}

	// Creating the same stream again is fine; with another config it is not.
	if _, err := c.js.CreateStream(ctx, cfg); err != nil {
		t.Errorf("repeating the create: %v", err)
	}
	other := cfg
	other.MaxMsgs = 5
	_, err := c.js.CreateStream(ctx, other)
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		t.Errorf("create with another config: %v, want ErrStreamNameAlreadyInUse", err)
	}
	wantJSErr(t, "create with another config", err, jetstream.JSErrCodeStreamNameInUse)

	// Subjects overlapping another stream's: 10065, whichever way round.
	for _, subj := range []string{"orders.1", "orders.>", ">", "returns.x.y", "returns.*", "orders.*"} {
		_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "OVER", Subjects: []string{subj}, NoAck: subj == ">"})
		wantJSErr(t, "overlapping "+subj, err, 10065)
	}
	createStream(t, c.js, jetstream.StreamConfig{Name: "DISJOINT", Subjects: []string{"orders.*.x", "order"}})

	// Update: subjects, limits, description, metadata.
	upd := cfg
	upd.Subjects = []string{"orders.*", "returns.>", "refunds"}
	upd.MaxMsgs = 50
	upd.Description = "changed"
	upd.Metadata = map[string]string{"owner": "ops"}
	s2, err := c.js.UpdateStream(ctx, upd)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if got := s2.CachedInfo().Config; got.MaxMsgs != 50 || got.Description != "changed" || len(got.Subjects) != 3 || got.Metadata["owner"] != "ops" {
		t.Errorf("updated config %+v", got)
	}
	if ack := jsPublish(t, c.js, "refunds", "r1"); ack.Stream != "ORDERS" {
		t.Errorf("a subject added by update lands in %q", ack.Stream)
	}
	// Updates that may not happen.
	bad := upd
	bad.Storage = jetstream.MemoryStorage
	_, err = c.js.UpdateStream(ctx, bad)
	wantJSErr(t, "update storage", err, 10052)
	bad = upd
	bad.Subjects = append(bad.Subjects, "order")
	_, err = c.js.UpdateStream(ctx, bad)
	wantJSErr(t, "update into overlap", err, 10065)
	_, err = c.js.UpdateStream(ctx, jetstream.StreamConfig{Name: "NOPE", Subjects: []string{"nope"}})
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("update of a missing stream: %v, want ErrStreamNotFound", err)
	}

	// Replicas beyond 1 are refused on a single node.
	_, err = c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Replicas: 3})
	wantJSErr(t, "num_replicas 3", err, 10074)

	// Bad names are refused by the server (nats.go checks some itself, so
	// these go raw).
	for _, name := range []string{"a.b", "a*b", "a>b", "a b"} {
		r := apiRequest(t, c.nc, "$JS.API.STREAM.CREATE.BAD", fmt.Sprintf(`{"name":%q}`, name))
		wantAPIError(t, "stream name "+strconv.Quote(name), r, 10056, "")
		// An update checks the config (and so the name) first.
		r = apiRequest(t, c.nc, "$JS.API.STREAM.UPDATE.X", fmt.Sprintf(`{"name":%q}`, name))
		wantAPIError(t, "update of stream "+strconv.Quote(name), r, 10052, "stream name is required")
	}
	r := apiRequest(t, c.nc, "$JS.API.STREAM.CREATE.a/b", `{"name":"a/b"}`)
	wantAPIError(t, "name with a path separator", r, 10128, "")

	// Delete.
	if err := c.js.DeleteStream(ctx, "DISJOINT"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := c.js.DeleteStream(ctx, "DISJOINT"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("second delete: %v, want ErrStreamNotFound", err)
	}
	if _, err := c.js.Stream(ctx, "DISJOINT"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("info of a deleted stream: %v", err)
	}
	// Its subjects are free again, and publishing to them finds nobody.
	if _, err := c.js.Publish(ctx, "order", []byte("x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("publish to a deleted stream's subject: %v, want ErrNoStreamResponse", err)
	}
	createStream(t, c.js, jetstream.StreamConfig{Name: "AGAIN", Subjects: []string{"order"}})
}

func TestJSStreamListsAndNames(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	// More streams than one STREAM.LIST page (256) and one STREAM.NAMES
	// page (1024), so clients must page. Memory streams, created a few
	// requests at a time, keep it quick.
	const n = 1030
	want := make([]string, 0, n)
	for i := range n {
		want = append(want, fmt.Sprintf("S%04d", i))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				body := fmt.Sprintf(`{"name":%q,"subjects":["s.%d.>"],"storage":"memory"}`, want[i], i)
				resp, err := c.nc.Request("$JS.API.STREAM.CREATE."+want[i], []byte(body), ioTimeout)
				if err != nil {
					t.Errorf("create %s: %v", want[i], err)
					return
				}
				if bytes.Contains(resp.Data, []byte(`"error"`)) {
					t.Errorf("create %s: %s", want[i], resp.Data)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ctx := ctxT(t)

	var names []string
	nl := c.js.StreamNames(ctx)
	for name := range nl.Name() {
		names = append(names, name)
	}
	if err := nl.Err(); err != nil {
		t.Fatalf("StreamNames: %v", err)
	}
	sort.Strings(names)
	if !slices.Equal(names, want) {
		t.Errorf("StreamNames returned %d names, want %d", len(names), len(want))
	}

	var infos []string
	il := c.js.ListStreams(ctx)
	for info := range il.Info() {
		infos = append(infos, info.Config.Name)
	}
	if err := il.Err(); err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	sort.Strings(infos)
	if !slices.Equal(infos, want) {
		t.Errorf("ListStreams returned %d streams, want %d", len(infos), len(want))
	}

	// The raw pages: names are sorted, pages are sized as nats-server's.
	p := mustAPI(t, c.nc, "$JS.API.STREAM.NAMES", `{"offset":1020}`)
	if p.doc["total"] != float64(n) || p.doc["offset"] != float64(1020) || p.doc["limit"] != float64(1024) ||
		len(p.doc["streams"].([]any)) != 10 || p.doc["streams"].([]any)[0] != "S1020" {
		t.Errorf("names page at 1020: %s", p.raw)
	}
	p = mustAPI(t, c.nc, "$JS.API.STREAM.LIST", `{"offset":256}`)
	if p.doc["total"] != float64(n) || p.doc["limit"] != float64(256) || len(p.doc["streams"].([]any)) != 256 {
		t.Errorf("list page at 256: total %v limit %v, %d streams", p.doc["total"], p.doc["limit"], len(p.doc["streams"].([]any)))
	}

	// Subject filters.
	for filter, wantNames := range map[string][]string{
		"s.7.x":    {"S0007"},
		"s.7.>":    {"S0007"},
		"s.1000.*": {"S1000"},
		"nope":     nil,
	} {
		var got []string
		nl := c.js.StreamNames(ctx, jetstream.WithStreamListSubject(filter))
		for name := range nl.Name() {
			got = append(got, name)
		}
		if err := nl.Err(); err != nil {
			t.Fatalf("StreamNames(%q): %v", filter, err)
		}
		if !slices.Equal(got, wantNames) {
			t.Errorf("StreamNames(%q) = %v, want %v", filter, got, wantNames)
		}
	}
	var all int
	nl = c.js.StreamNames(ctx, jetstream.WithStreamListSubject("s.*.x"))
	for range nl.Name() {
		all++
	}
	if all != n {
		t.Errorf("StreamNames(s.*.x) found %d, want every stream (%d)", all, n)
	}
	if name, err := c.js.StreamNameBySubject(ctx, "s.42.x"); err != nil || name != "S0042" {
		t.Errorf("StreamNameBySubject(s.42.x) = %q, %v", name, err)
	}
	if _, err := c.js.StreamNameBySubject(ctx, "unbound"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("StreamNameBySubject(unbound): %v, want ErrStreamNotFound", err)
	}
}

func TestJSStreamInfoDetails(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	s := createStream(t, c.js, jetstream.StreamConfig{Name: "D", Subjects: []string{"d.>"}})
	for i := range 10 {
		jsPublish(t, c.js, fmt.Sprintf("d.%d", i%3), strconv.Itoa(i))
	}
	for _, seq := range []uint64{2, 5, 6} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatalf("delete %d: %v", seq, err)
		}
	}
	info, err := s.Info(ctx, jetstream.WithDeletedDetails(true), jetstream.WithSubjectFilter("d.*"))
	if err != nil {
		t.Fatal(err)
	}
	st := info.State
	if st.Msgs != 7 || st.FirstSeq != 1 || st.LastSeq != 10 || st.NumDeleted != 3 || !slices.Equal(st.Deleted, []uint64{2, 5, 6}) {
		t.Errorf("state %+v, want 7 msgs 1..10 with 2, 5, 6 deleted", st)
	}
	// d.0: 0,3,6,9 → seqs 1,4,7,10; d.1: seqs 2,5,8; d.2: seqs 3,6,9.
	wantSubj := map[string]uint64{"d.0": 4, "d.1": 1, "d.2": 2}
	if st.NumSubjects != 3 || len(st.Subjects) != 3 || st.Subjects["d.0"] != 4 || st.Subjects["d.1"] != 1 || st.Subjects["d.2"] != 2 {
		t.Errorf("subjects %v (num %d), want %v", st.Subjects, st.NumSubjects, wantSubj)
	}
	if st.FirstTime.IsZero() || st.LastTime.Before(st.FirstTime) {
		t.Errorf("times first %v last %v", st.FirstTime, st.LastTime)
	}
	// Deleting the last message leaves a trailing gap, still a deleted one.
	if err := s.DeleteMsg(ctx, 10); err != nil {
		t.Fatal(err)
	}
	info, err = s.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		t.Fatal(err)
	}
	if st := info.State; st.LastSeq != 10 || !slices.Equal(st.Deleted, []uint64{2, 5, 6, 10}) || st.NumDeleted != 4 {
		t.Errorf("after deleting the last message: %+v", st)
	}
	// Without the options, no lists.
	info, _ = s.Info(ctx)
	if info.State.Deleted != nil || info.State.Subjects != nil {
		t.Errorf("plain info carries details: %+v", info.State)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		t.Errorf("info.cluster = %+v, want the node named as leader", info.Cluster)
	}
}

func TestJSMessageGetDelete(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	for _, direct := range []bool{false, true} {
		name := "G"
		if direct {
			name = "GD"
		}
		t.Run(name, func(t *testing.T) {
			prefix := name + "."
			s := createStream(t, c.js, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"}, AllowDirect: direct})
			m := nats.NewMsg(prefix + "a")
			m.Header.Set("X-Trace", "abc")
			m.Header.Add("X-Multi", "1")
			m.Header.Add("X-Multi", "2")
			m.Data = []byte("first\r\nwith CRLF and \x00 bytes")
			if _, err := c.js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			jsPublish(t, c.js, prefix+"b", "second")
			jsPublish(t, c.js, prefix+"a", "third")
			jsPublish(t, c.js, prefix+"b.c", "")

			got := getRaw(t, s, 1)
			if got.Subject != prefix+"a" || got.Sequence != 1 || !bytes.Equal(got.Data, m.Data) ||
				got.Header.Get("X-Trace") != "abc" || !slices.Equal(got.Header.Values("X-Multi"), []string{"1", "2"}) {
				t.Errorf("get 1: %+v", got)
			}
			if got.Time.IsZero() {
				t.Errorf("get 1: no time")
			}
			if got := getRaw(t, s, 4); got.Subject != prefix+"b.c" || len(got.Data) != 0 {
				t.Errorf("get of an empty message: %+v", got)
			}
			last, err := s.GetLastMsgForSubject(ctx, prefix+"a")
			if err != nil || last.Sequence != 3 || string(last.Data) != "third" {
				t.Errorf("last for %sa: %+v %v", prefix, last, err)
			}
			last, err = s.GetLastMsgForSubject(ctx, prefix+">")
			if err != nil || last.Sequence != 4 {
				t.Errorf("last for %s>: %+v %v", prefix, last, err)
			}
			next, err := s.GetMsg(ctx, 2, jetstream.WithGetMsgSubject(prefix+"a"))
			if err != nil || next.Sequence != 3 {
				t.Errorf("next from 2 for %sa: %+v %v", prefix, next, err)
			}
			if _, err := s.GetMsg(ctx, 99); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Errorf("get 99: %v, want ErrMsgNotFound", err)
			}
			if _, err := s.GetLastMsgForSubject(ctx, prefix+"none"); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Errorf("last for a subject without messages: %v, want ErrMsgNotFound", err)
			}

			if err := s.DeleteMsg(ctx, 2); err != nil {
				t.Fatalf("delete 2: %v", err)
			}
			if err := s.SecureDeleteMsg(ctx, 3); err != nil {
				t.Fatalf("secure delete 3: %v", err)
			}
			if _, err := s.GetMsg(ctx, 2); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Errorf("get of a deleted message: %v", err)
			}
			// nats.go folds the API error into text; the code is in it.
			// Past the end, a file stream reports its store's error, as
			// nats-server's file store does.
			for seq, want := range map[uint64]string{2: "err_code=10043", 1000: "err_code=10057 description=stream store EOF"} {
				err = s.DeleteMsg(ctx, seq)
				if !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) || !strings.Contains(err.Error(), want) {
					t.Errorf("deleting missing seq %d: %v, want %s", seq, err, want)
				}
			}
			last, err = s.GetLastMsgForSubject(ctx, prefix+"a")
			if err != nil || last.Sequence != 1 {
				t.Errorf("last for %sa after deleting 3: %+v %v", prefix, last, err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st := info.State; st.Msgs != 2 || st.FirstSeq != 1 || st.LastSeq != 4 || st.NumDeleted != 2 {
				t.Errorf("state after deletes: %+v", st)
			}
			// Deleting the first message moves first_seq.
			if err := s.DeleteMsg(ctx, 1); err != nil {
				t.Fatal(err)
			}
			info, _ = s.Info(ctx)
			if st := info.State; st.Msgs != 1 || st.FirstSeq != 4 || st.NumDeleted != 0 {
				t.Errorf("state after deleting the first: %+v", st)
			}
		})
	}
}

func TestJSDirectGet(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	createStream(t, c.js, jetstream.StreamConfig{Name: "KVLIKE", Subjects: []string{"kv.>"}, AllowDirect: true, MaxMsgsPerSubject: 1})
	createStream(t, c.js, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain"}})
	m := nats.NewMsg("kv.a.b")
	m.Header.Set("X-Key", "v")
	m.Data = []byte("value 1")
	if _, err := c.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	jsPublish(t, c.js, "kv.a.b", "value 2")
	jsPublish(t, c.js, "kv.c", "other")
	jsPublish(t, c.js, "plain", "x")

	// JSON body.
	resp, err := c.nc.Request("$JS.API.DIRECT.GET.KVLIKE", []byte(`{"last_by_subj":"kv.a.b"}`), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Data) != "value 2" || resp.Header.Get("Nats-Stream") != "KVLIKE" || resp.Header.Get("Nats-Subject") != "kv.a.b" ||
		resp.Header.Get("Nats-Sequence") != "2" || resp.Header.Get("X-Key") != "" {
		t.Errorf("direct get last_by_subj: %q %v", resp.Data, resp.Header)
	}
	if _, err := time.Parse(time.RFC3339Nano, resp.Header.Get("Nats-Time-Stamp")); err != nil {
		t.Errorf("Nats-Time-Stamp %q: %v", resp.Header.Get("Nats-Time-Stamp"), err)
	}
	request := func(subj, body string) *nats.Msg {
		t.Helper()
		resp, err := c.nc.Request(subj, []byte(body), ioTimeout)
		if err != nil {
			t.Fatalf("request %s %q: %v", subj, body, err)
		}
		return resp
	}
	// The subject form, with a multi-token subject.
	resp = request("$JS.API.DIRECT.GET.KVLIKE.kv.c", "")
	if string(resp.Data) != "other" || resp.Header.Get("Nats-Sequence") != "3" {
		t.Errorf("direct get by subject: %q %v", resp.Data, resp.Header)
	}
	// Not found: a 404 status message.
	resp = request("$JS.API.DIRECT.GET.KVLIKE.kv.none", "")
	if resp.Header.Get("Status") != "404" || len(resp.Data) != 0 {
		t.Errorf("direct get of nothing: %v %q", resp.Header, resp.Data)
	}
	// Bad requests: 408 with a reason.
	for body, desc := range map[string]string{"": "Empty Request", "{}": "Empty Request", "{": "Malformed Request", `{"seq":1,"last_by_subj":"kv.c"}`: "Bad Request"} {
		resp = request("$JS.API.DIRECT.GET.KVLIKE", body)
		if resp.Header.Get("Status") != "408" || resp.Header.Get("Description") != desc {
			t.Errorf("direct get %q: %v", body, resp.Header)
		}
	}
	// A stream without allow_direct has no direct get responder.
	if _, err := c.nc.Request("$JS.API.DIRECT.GET.PLAIN", []byte(`{"seq":1}`), ioTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("direct get on a stream without allow_direct: %v, want no responders", err)
	}

	// nats.go uses direct get by itself for allow_direct streams.
	s, err := c.js.Stream(ctx, "KVLIKE")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetLastMsgForSubject(ctx, "kv.a.b")
	if err != nil || string(got.Data) != "value 2" || got.Sequence != 2 {
		t.Errorf("GetLastMsgForSubject via direct get: %+v %v", got, err)
	}
	if _, err := s.GetMsg(ctx, 1); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("seq 1 was replaced under max_msgs_per_subject 1; got %v", err)
	}
}

func TestJSPurge(t *testing.T) {
	t.Parallel()
	_, c := jsNode(t, nodeOpts{})
	ctx := ctxT(t)
	s := createStream(t, c.js, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.*"}})
	publishN := func() {
		for i := range 10 {
			jsPublish(t, c.js, fmt.Sprintf("p.%d", i%2), strconv.Itoa(i))
		}
	}
	state := func() jetstream.StreamState {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}
	publishN() // seqs 1..10; p.0 on odd seqs, p.1 on even

	if err := s.Purge(ctx, jetstream.WithPurgeSubject("p.0")); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Msgs != 5 || st.Subjects["p.0"] != 0 || st.FirstSeq != 2 {
		t.Errorf("after purging p.0: %+v", st)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeKeep(2)); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Msgs != 2 || st.FirstSeq != 8 || st.LastSeq != 10 {
		t.Errorf("after keep 2: %+v", st)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Msgs != 0 || st.FirstSeq != 11 || st.LastSeq != 10 || st.Bytes != 0 {
		t.Errorf("after purge all: %+v", st)
	}
	publishN() // seqs 11..20
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(15)); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Msgs != 6 || st.FirstSeq != 15 {
		t.Errorf("after purge up to 15: %+v", st)
	}
	// keep with a wildcard filter keeps that many of all the matches, not
	// per subject (as nats-server does).
	if err := s.Purge(ctx, jetstream.WithPurgeSubject("p.*"), jetstream.WithPurgeKeep(3)); err != nil {
		t.Fatal(err)
	}
	if st := state(); st.Msgs != 3 || st.FirstSeq != 18 {
		t.Errorf("after filter p.* keep 3: %+v", st)
	}
	// Purging to a sequence past the end moves the stream there.
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(100)); err != nil {
		t.Fatal(err)
	}
	if ack := jsPublish(t, c.js, "p.1", "after"); ack.Sequence != 100 {
		t.Errorf("first publish after purging to 100 got seq %d", ack.Sequence)
	}
	// The counts the raw reply gives.
	r := mustAPI(t, c.nc, "$JS.API.STREAM.PURGE.P", `{"filter":"p.1"}`)
	if r.doc["success"] != true || r.doc["purged"] != float64(1) {
		t.Errorf("purge reply %s", r.raw)
	}
	// seq with keep is a bad request.
	r = apiRequest(t, c.nc, "$JS.API.STREAM.PURGE.P", `{"seq":5,"keep":1}`)
	wantAPIError(t, "purge seq+keep", r, 10003, "")
	if err := c.js.DeleteStream(ctx, "P"); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("purge of a deleted stream: %v", err)
	}
}
