package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Mirrors and sources, compared with nats-server: the same streams made
// and fed on both, then what the sourcing streams hold and say.

// waitSourced polls a sourcing stream's info until its mirror or every
// source has lag 0 and it holds msgs messages.
func waitSourced(t testing.TB, js jetstream.JetStream, name string, msgs uint64) *jetstream.StreamInfo {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		// On a cluster a leader may be changing: errors are waited out.
		info, err := tryStreamInfo(js, name)
		if err == nil {
			done := info.State.Msgs == msgs
			if m := info.Mirror; m != nil && m.Lag != 0 {
				done = false
			}
			for _, s := range info.Sources {
				if s.Lag != 0 {
					done = false
				}
			}
			if done {
				return info
			}
			b, _ := json.Marshal(info)
			last = string(b)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for stream %s to hold %d sourced messages; last %s", name, msgs, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tryStreamInfo(js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// storedLines lists a stream's messages as lines: sequence (unless
// sorted, for sources whose interleaving differs), subject, data and the
// headers named.
func storedLines(t testing.TB, js jetstream.JetStream, name string, sorted bool, hdrs ...string) []string {
	t.Helper()
	s, err := js.Stream(ctxT(t), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info := streamInfo(t, js, name)
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctxT(t), seq)
		if err != nil {
			continue // an interior gap
		}
		line := fmt.Sprintf("%s %q", m.Subject, m.Data)
		if !sorted {
			line = fmt.Sprintf("%d ", m.Sequence) + line
		}
		for _, h := range hdrs {
			if v := m.Header.Get(h); v != "" {
				line += fmt.Sprintf(" %s=%q", h, maskIdent(h, v))
			}
		}
		out = append(out, line)
	}
	if sorted {
		sort.Strings(out)
	}
	return out
}

// maskIdent hides the origin's identity in a Nats-Stream-Source value
// (a hash of its creation time, which differs between the servers).
func maskIdent(h, v string) string {
	f := strings.Fields(v)
	if h != "Nats-Stream-Source" || len(f) < 6 {
		return v
	}
	if len(f[5]) != 8 {
		f[5] = "BAD-IDENT:" + f[5]
	} else {
		f[5] = "IDENT"
	}
	return strings.Join(f, " ")
}

// sourceInfoLines renders a stream info's mirror and sources, Active
// reduced to whether the origin was heard from.
func sourceInfoLines(info *jetstream.StreamInfo) []string {
	var out []string
	one := func(kind string, si *jetstream.StreamSourceInfo) {
		ext := ""
		if si.External != nil {
			ext = si.External.APIPrefix + "|" + si.External.DeliverPrefix
		}
		errs := ""
		if si.Error != nil {
			errs = si.Error.Error()
		}
		out = append(out, fmt.Sprintf("%s name=%s lag=%d heard=%v filter=%q transforms=%v external=%q error=%q",
			kind, si.Name, si.Lag, si.Active >= 0, si.FilterSubject, si.SubjectTransforms, ext, errs))
	}
	if info.Mirror != nil {
		one("mirror", info.Mirror)
	}
	srcs := append([]*jetstream.StreamSourceInfo(nil), info.Sources...)
	sort.Slice(srcs, func(i, j int) bool {
		return srcs[i].Name+srcs[i].FilterSubject < srcs[j].Name+srcs[j].FilterSubject
	})
	for _, si := range srcs {
		one("source", si)
	}
	return out
}

func mirrorScenario(t *testing.T, tg *jsTarget) []string {
	js := tg.js
	var out []string
	createStream(t, js, jetstream.StreamConfig{Name: "ORIGIN", Subjects: []string{"o.>"}})
	createStream(t, js, jetstream.StreamConfig{Name: "ORIGIN2", Subjects: []string{"p.>"}})
	var mid time.Time
	for i := 1; i <= 10; i++ {
		subj := "o.a"
		if i%2 == 0 {
			subj = "o.b"
		}
		msg := &nats.Msg{Subject: subj, Data: []byte(fmt.Sprintf("m%d", i)), Header: nats.Header{"X-N": []string{fmt.Sprint(i)}}}
		if _, err := js.PublishMsg(ctxT(t), msg); err != nil {
			t.Fatalf("%s: publish: %v", tg.name, err)
		}
		jsPublish(t, js, fmt.Sprintf("p.%d", i), fmt.Sprintf("p%d", i))
		if i == 5 {
			time.Sleep(20 * time.Millisecond) // a time strictly between messages 5 and 6
			mid = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Deleting an origin message leaves a gap a mirror keeps.
	o, _ := js.Stream(ctxT(t), "ORIGIN")
	if err := o.DeleteMsg(ctxT(t), 3); err != nil {
		t.Fatalf("%s: delete: %v", tg.name, err)
	}

	createStream(t, js, jetstream.StreamConfig{Name: "M", Mirror: &jetstream.StreamSource{Name: "ORIGIN"}})
	createStream(t, js, jetstream.StreamConfig{Name: "MSEQ", Mirror: &jetstream.StreamSource{Name: "ORIGIN", OptStartSeq: 7}})
	createStream(t, js, jetstream.StreamConfig{Name: "MTIME", Mirror: &jetstream.StreamSource{Name: "ORIGIN", OptStartTime: &mid}})
	createStream(t, js, jetstream.StreamConfig{Name: "MFILT", Mirror: &jetstream.StreamSource{Name: "ORIGIN", FilterSubject: "o.b"}})
	createStream(t, js, jetstream.StreamConfig{Name: "MTR", Mirror: &jetstream.StreamSource{Name: "ORIGIN",
		SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "o.a", Destination: "mapped.a"}}}})
	createStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Sources: []*jetstream.StreamSource{
		{Name: "ORIGIN", FilterSubject: "o.a"},
		{Name: "ORIGIN", OptStartSeq: 8, FilterSubject: "o.b"},
		{Name: "ORIGIN2", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "p.*", Destination: "q.{{wildcard(1)}}"}}},
	}})
	createStream(t, js, jetstream.StreamConfig{Name: "STIME", Sources: []*jetstream.StreamSource{{Name: "ORIGIN2", OptStartTime: &mid}}})

	for _, w := range []struct {
		name   string
		msgs   uint64
		sorted bool
	}{{"M", 9, false}, {"MSEQ", 4, false}, {"MTIME", 5, false}, {"MFILT", 5, false}, {"MTR", 4, false}, {"S", 4 + 2 + 10, true}, {"STIME", 5, true}} {
		info := waitSourced(t, js, w.name, w.msgs)
		out = append(out, fmt.Sprintf("%s state msgs=%d first=%d last=%d deleted=%d", w.name,
			info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, info.State.NumDeleted))
		out = append(out, sourceInfoLines(info)...)
		out = append(out, storedLines(t, js, w.name, w.sorted, "X-N", "Nats-Stream-Source")...)
	}

	// More messages reach every sourcing stream.
	for i := 11; i <= 13; i++ {
		jsPublish(t, js, "o.a", fmt.Sprintf("m%d", i))
	}
	info := waitSourced(t, js, "M", 12)
	out = append(out, fmt.Sprintf("M after more: last=%d", info.State.LastSeq))
	waitSourced(t, js, "S", 19)
	// The raw stream info members, as JSON, once both have caught up
	// (before, what one had sourced yet was a race).
	for _, name := range []string{"M", "S"} {
		r := mustAPI(t, tg.nc, "$JS.API.STREAM.INFO."+name, "")
		var doc struct {
			Mirror  map[string]any   `json:"mirror"`
			Sources []map[string]any `json:"sources"`
		}
		if err := json.Unmarshal(r.raw, &doc); err != nil {
			t.Fatal(err)
		}
		all := doc.Sources
		if doc.Mirror != nil {
			all = append(all, doc.Mirror)
		}
		var lines []string
		for _, m := range all {
			delete(m, "active")
			b, _ := json.Marshal(m)
			lines = append(lines, name+" raw "+string(b))
		}
		sort.Strings(lines)
		out = append(out, lines...)
	}
	out = append(out, storedLines(t, js, "S", true, "Nats-Stream-Source")...)
	return out
}

func TestJSMirrorSourceCompare(t *testing.T) {
	ours, ref := jsPair(t)
	sameLines(t, "mirror and source scenario", mirrorScenario(t, ours), mirrorScenario(t, ref))
}

// mirrorErrorScenario sends configs both servers refuse.
func mirrorErrorScenario(t *testing.T, tg *jsTarget) []string {
	nc := tg.nc
	var out []string
	mustAPI(t, nc, "$JS.API.STREAM.CREATE.O", `{"name":"O","subjects":["o.>"],"max_msg_size":1024}`)
	mustAPI(t, nc, "$JS.API.STREAM.CREATE.MM", `{"name":"MM","mirror":{"name":"O"}}`)
	for _, c := range []struct{ name, body string }{
		{"subjects", `{"name":"X","subjects":["x"],"mirror":{"name":"O"}}`},
		{"with sources", `{"name":"X","mirror":{"name":"O"},"sources":[{"name":"O"}]}`},
		{"first seq", `{"name":"X","first_seq":5,"mirror":{"name":"O"}}`},
		{"bad mirror name", `{"name":"X","mirror":{"name":"a.b"}}`},
		{"start seq and time", `{"name":"X","mirror":{"name":"O","opt_start_seq":3,"opt_start_time":"2024-01-01T00:00:00Z"}}`},
		{"filter and transforms", `{"name":"X","mirror":{"name":"O","filter_subject":"o.a","subject_transforms":[{"src":"o.b","dest":"b"}]}}`},
		{"max msg size", `{"name":"X","max_msg_size":10,"mirror":{"name":"O"}}`},
		{"bad source name", `{"name":"X","sources":[{"name":"a b"}]}`},
		{"duplicate source", `{"name":"X","sources":[{"name":"O"},{"name":"O"}]}`},
		{"source filter and transforms", `{"name":"X","sources":[{"name":"O","filter_subject":"o.a","subject_transforms":[{"src":"o.b","dest":"b"}]}]}`},
		{"mirror direct without mirror", `{"name":"X","subjects":["x"],"mirror_direct":true}`},
		{"mirror with counters", `{"name":"X","mirror":{"name":"O"},"allow_msg_counter":true}`},
	} {
		r := apiRequest(t, nc, "$JS.API.STREAM.CREATE.X", c.body)
		out = append(out, fmt.Sprintf("%s: %d %s", c.name, r.errCode(), r.errDesc()))
	}
	r := apiRequest(t, nc, "$JS.API.STREAM.UPDATE.MM", `{"name":"MM","mirror":{"name":"O","filter_subject":"o.a"}}`)
	out = append(out, fmt.Sprintf("mirror update: %d %s", r.errCode(), r.errDesc()))
	r = apiRequest(t, nc, "$JS.API.STREAM.UPDATE.MM", `{"name":"MM"}`)
	out = append(out, fmt.Sprintf("mirror removed: %d %s", r.errCode(), r.errDesc()))
	return out
}

func TestJSMirrorConfigErrorsCompare(t *testing.T) {
	ours, ref := jsPair(t)
	sameLines(t, "mirror config errors", mirrorErrorScenario(t, ours), mirrorErrorScenario(t, ref))
}

// recreateScenario deletes the origin of a mirror and a source and makes
// it again with new messages.
func recreateScenario(t *testing.T, tg *jsTarget) []string {
	js := tg.js
	var out []string
	createStream(t, js, jetstream.StreamConfig{Name: "RO", Subjects: []string{"r.>"}})
	for i := 1; i <= 5; i++ {
		jsPublish(t, js, "r.x", fmt.Sprintf("old%d", i))
	}
	createStream(t, js, jetstream.StreamConfig{Name: "RS", Sources: []*jetstream.StreamSource{{Name: "RO"}}})
	createStream(t, js, jetstream.StreamConfig{Name: "RM", Mirror: &jetstream.StreamSource{Name: "RO"}})
	waitSourced(t, js, "RS", 5)
	waitSourced(t, js, "RM", 5)
	if err := js.DeleteStream(ctxT(t), "RO"); err != nil {
		t.Fatalf("%s: delete origin: %v", tg.name, err)
	}
	createStream(t, js, jetstream.StreamConfig{Name: "RO", Subjects: []string{"r.>"}})
	for i := 1; i <= 8; i++ {
		jsPublish(t, js, "r.x", fmt.Sprintf("new%d", i))
	}
	info := waitSourced(t, js, "RS", 13)
	out = append(out, fmt.Sprintf("RS msgs=%d last=%d", info.State.Msgs, info.State.LastSeq))
	out = append(out, storedLines(t, js, "RS", false, "Nats-Stream-Source")...)
	// The mirror keeps the origin's sequences: the new origin's
	// messages above the ones it holds reach it.
	info = waitSourced(t, js, "RM", 8)
	out = append(out, fmt.Sprintf("RM msgs=%d first=%d last=%d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq))
	out = append(out, storedLines(t, js, "RM", false)...)
	return out
}

func TestJSSourceOriginRecreatedCompare(t *testing.T) {
	ours, ref := jsPair(t)
	sameLines(t, "origin deleted and made again", recreateScenario(t, ours), recreateScenario(t, ref))
}

// kvMirrorScenario mirrors a KV bucket and reads it back through direct
// gets on the mirror.
func kvMirrorScenario(t *testing.T, tg *jsTarget, replicas int) []string {
	js := tg.js
	var out []string
	kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "ORIG", History: 3, Replicas: replicas})
	if err != nil {
		t.Fatalf("%s: create kv: %v", tg.name, err)
	}
	for i, kvp := range [][2]string{{"a", "1"}, {"b", "2"}, {"a", "3"}, {"c", "4"}} {
		if _, err := kv.Put(ctxT(t), kvp[0], []byte(kvp[1])); err != nil {
			t.Fatalf("%s: put %d: %v", tg.name, i, err)
		}
	}
	if err := kv.Delete(ctxT(t), "c"); err != nil {
		t.Fatalf("%s: delete: %v", tg.name, err)
	}
	mkv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "MIRR", History: 3, Replicas: replicas, Mirror: &jetstream.StreamSource{Name: "ORIG"}})
	if err != nil {
		t.Fatalf("%s: create kv mirror: %v", tg.name, err)
	}
	info := waitSourced(t, js, "KV_MIRR", 5)
	out = append(out, fmt.Sprintf("mirror stream allow_direct=%v mirror_direct=%v msgs=%d", info.Config.AllowDirect, info.Config.MirrorDirect, info.State.Msgs))
	out = append(out, sourceInfoLines(info)...)
	for _, k := range []string{"a", "b", "c", "nope"} {
		e, err := mkv.Get(ctxT(t), k)
		if err != nil {
			out = append(out, fmt.Sprintf("get %s: %v", k, err))
			continue
		}
		out = append(out, fmt.Sprintf("get %s: %q rev=%d op=%v", k, e.Value(), e.Revision(), e.Operation()))
	}
	// A direct get on the mirror stream itself.
	s, _ := js.Stream(ctxT(t), "KV_MIRR")
	m, err := s.GetLastMsgForSubject(ctxT(t), "$KV.ORIG.a")
	if err != nil {
		out = append(out, fmt.Sprintf("last for a: %v", err))
	} else {
		out = append(out, fmt.Sprintf("last for a: seq=%d %q", m.Sequence, m.Data))
	}
	// With the origin gone, the mirror answers direct gets on its name.
	if err := js.DeleteStream(ctxT(t), "KV_ORIG"); err != nil {
		t.Fatalf("%s: delete origin: %v", tg.name, err)
	}
	for _, subj := range []string{"$JS.API.DIRECT.GET.KV_ORIG.$KV.ORIG.a", "$JS.API.DIRECT.GET.KV_ORIG.$KV.ORIG.zzz"} {
		resp, err := tg.nc.Request(subj, nil, 5*time.Second)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", subj, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s: status=%q stream=%q seq=%q %q", subj, resp.Header.Get("Status"),
			resp.Header.Get("Nats-Stream"), resp.Header.Get("Nats-Sequence"), resp.Data))
	}
	return out
}

func TestJSKVMirrorCompare(t *testing.T) {
	ours, ref := jsPair(t)
	sameLines(t, "KV mirror", kvMirrorScenario(t, ours, 1), kvMirrorScenario(t, ref, 1))
}

// TestClusterKVMirrorCompare runs the KV mirror scenario on R3 buckets of
// a three-node cluster against one nats-server: with the origin deleted,
// the mirror's leader, wherever it is, answers the direct gets on the
// origin's name, and only it does.
func TestClusterKVMirrorCompare(t *testing.T) {
	nodes := startCluster(t, 3, clusterOpts{})
	waitMesh(t, nodes)
	nc, js := clusterJS(t, clusterURLs(nodes))
	// The cluster takes creates once its meta group has formed.
	createR3(t, js, jetstream.StreamConfig{Name: "WARM", Subjects: []string{"warm"}, Replicas: 3})
	ours := &jsTarget{name: "contrail cluster", nc: nc, js: js}
	ref := startRefJS(t)
	sameLines(t, "KV mirror on a cluster", kvMirrorScenario(t, ours, 3), kvMirrorScenario(t, jsConnect(t, "nats-server", ref.URL), 1))
}

// objMirrorScenario mirrors an object store's stream. Two mirrors follow
// while objects are written, replaced and deleted; neither takes the
// origin's purges of replaced chunks (a purge is no message), and the one
// that allows roll-ups applies those of the metadata, the other keeps them
// as headers. A second mirror, made after, copies
// what the origin holds then. Chunk subjects end in a random id: they are
// compared as "C.*".
func objMirrorScenario(t *testing.T, tg *jsTarget) []string {
	js := tg.js
	var out []string
	obs, err := js.CreateObjectStore(ctxT(t), jetstream.ObjectStoreConfig{Bucket: "OBJS"})
	if err != nil {
		t.Fatalf("%s: create object store: %v", tg.name, err)
	}
	createStream(t, js, jetstream.StreamConfig{Name: "OCOPY", Mirror: &jetstream.StreamSource{Name: "OBJ_OBJS"}})
	createStream(t, js, jetstream.StreamConfig{Name: "OROLL", AllowRollup: true, Mirror: &jetstream.StreamSource{Name: "OBJ_OBJS"}})
	caughtUp := func(name string) *jetstream.StreamInfo {
		t.Helper()
		last := streamInfo(t, js, "OBJ_OBJS").State.LastSeq
		deadline := time.Now().Add(60 * time.Second)
		for {
			info, err := tryStreamInfo(js, name)
			if err == nil && info.State.LastSeq == last && info.Mirror != nil && info.Mirror.Lag == 0 {
				return info
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: mirror %s never reached the origin's last sequence %d: %+v, %v", tg.name, name, last, info, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 300_000/16)
	for _, put := range []struct {
		name string
		data []byte
	}{{"big", big}, {"small", []byte("tiny")}, {"big", big[:200_000]}} {
		if _, err := obs.PutBytes(ctxT(t), put.name, put.data); err != nil {
			t.Fatalf("%s: put %s: %v", tg.name, put.name, err)
		}
		caughtUp("OCOPY")
		caughtUp("OROLL")
	}
	if err := obs.Delete(ctxT(t), "small"); err != nil {
		t.Fatalf("%s: delete: %v", tg.name, err)
	}
	orig := streamInfo(t, js, "OBJ_OBJS")
	out = append(out, fmt.Sprintf("origin msgs=%d first=%d last=%d", orig.State.Msgs, orig.State.FirstSeq, orig.State.LastSeq))
	createStream(t, js, jetstream.StreamConfig{Name: "OLATE", Mirror: &jetstream.StreamSource{Name: "OBJ_OBJS"}})
	for _, name := range []string{"OCOPY", "OROLL", "OLATE"} {
		info := caughtUp(name)
		out = append(out, fmt.Sprintf("%s msgs=%d first=%d last=%d", name, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq))
		s, err := js.Stream(ctxT(t), name)
		if err != nil {
			t.Fatalf("%s: stream %s: %v", tg.name, name, err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctxT(t), seq)
			if err != nil {
				continue // rolled up
			}
			subj := m.Subject
			if i := strings.Index(subj, ".C."); i > 0 {
				subj = subj[:i] + ".C.*"
			}
			out = append(out, fmt.Sprintf("%s %d %s len=%d rollup=%q", name, m.Sequence, subj, len(m.Data), m.Header.Get("Nats-Rollup")))
		}
	}
	// The object store reads the origin as before.
	got, err := obs.GetBytes(ctxT(t), "big")
	out = append(out, fmt.Sprintf("get big: len=%d same=%v err=%v", len(got), bytes.Equal(got, big[:200_000]), err))
	return out
}

func TestJSObjectStoreMirrorCompare(t *testing.T) {
	ours, ref := jsPair(t)
	sameLines(t, "object store mirror", objMirrorScenario(t, ours), objMirrorScenario(t, ref))
}

// TestJSSourceOtherAccountCompare sources and mirrors a stream of
// account A from account B through an import of A's JS API under an
// external api prefix, and a stream import of the deliver prefix.
func TestJSSourceOtherAccountCompare(t *testing.T) {
	conf := `jetstream: enabled
accounts {
  A: {
    users: [ { user: a, password: a } ]
    jetstream: enabled
    exports: [
      { service: "$JS.API.>" }
      { service: "$JS.FC.>" }
      { stream: "deliver.>" }
    ]
  }
  B: {
    users: [ { user: b, password: b } ]
    jetstream: enabled
    imports: [
      { service: { account: A, subject: "$JS.API.>" }, to: "JS.A.API.>" }
      { service: { account: A, subject: "$JS.FC.>" } }
      { stream: { account: A, subject: "deliver.>" } }
    ]
  }
}
`
	var transcripts [][]string
	for _, tg := range bothServers(t, conf, false, "-sd", t.TempDir()) {
		a := jsConnect(t, tg.name, tg.url, nats.UserInfo("a", "a"))
		b := jsConnect(t, tg.name, tg.url, nats.UserInfo("b", "b"))
		var out []string
		createStream(t, a.js, jetstream.StreamConfig{Name: "ORIGIN", Subjects: []string{"o.>"}})
		for i := 1; i <= 6; i++ {
			jsPublish(t, a.js, fmt.Sprintf("o.%d", i%2), fmt.Sprintf("m%d", i))
		}
		ext := &jetstream.ExternalStream{APIPrefix: "JS.A.API", DeliverPrefix: "deliver"}
		createStream(t, b.js, jetstream.StreamConfig{Name: "XM", Mirror: &jetstream.StreamSource{Name: "ORIGIN", External: ext}})
		createStream(t, b.js, jetstream.StreamConfig{Name: "XS", Sources: []*jetstream.StreamSource{
			{Name: "ORIGIN", External: ext, FilterSubject: "o.1"}}})
		for _, w := range []struct {
			name string
			msgs uint64
		}{{"XM", 6}, {"XS", 3}} {
			info := waitSourced(t, b.js, w.name, w.msgs)
			out = append(out, sourceInfoLines(info)...)
			out = append(out, storedLines(t, b.js, w.name, false, "Nats-Stream-Source")...)
		}
		jsPublish(t, a.js, "o.1", "m7")
		waitSourced(t, b.js, "XM", 7)
		waitSourced(t, b.js, "XS", 4)
		out = append(out, storedLines(t, b.js, "XS", false, "Nats-Stream-Source")...)
		transcripts = append(transcripts, out)
	}
	sameLines(t, "sourcing from another account", transcripts[0], transcripts[1])
}

// TestJSSourceErrorInfoCompare: a mirror and a source whose origin does
// not exist report the error in stream info.
func TestJSSourceErrorInfoCompare(t *testing.T) {
	ours, ref := jsPair(t)
	scenario := func(tg *jsTarget) []string {
		createStream(t, tg.js, jetstream.StreamConfig{Name: "EM", Mirror: &jetstream.StreamSource{Name: "MISSING"}})
		createStream(t, tg.js, jetstream.StreamConfig{Name: "ES", Sources: []*jetstream.StreamSource{{Name: "MISSING"}}})
		var out []string
		for _, name := range []string{"EM", "ES"} {
			var info *jetstream.StreamInfo
			waitFor(t, 20*time.Second, name+" reporting its origin's error", func() bool {
				info = streamInfo(t, tg.js, name)
				if info.Mirror != nil {
					return info.Mirror.Error != nil
				}
				return len(info.Sources) == 1 && info.Sources[0].Error != nil
			})
			out = append(out, sourceInfoLines(info)...)
		}
		return out
	}
	sameLines(t, "origin missing", scenario(ours), scenario(ref))
}

// TestJSMirrorCLICompare makes a mirror and a source with the nats CLI
// and compares what `nats stream info` shows of them once caught up.
func TestJSMirrorCLICompare(t *testing.T) {
	ours, ref := jsPair(t)
	scenario := func(tg *jsTarget) []string {
		createStream(t, tg.js, jetstream.StreamConfig{Name: "ORIGIN", Subjects: []string{"o"}})
		publishRange(t, tg.js, "o", 1, 5)
		var out []string
		for _, args := range [][]string{
			{"stream", "add", "M", "--mirror", "ORIGIN", "--defaults"},
			{"stream", "add", "S", "--source", "ORIGIN", "--subjects", "s", "--defaults"},
		} {
			code, _, stderr := natsRun(t, tg.url, args...)
			out = append(out, fmt.Sprintf("%v: exit %d %s", args, code, strings.TrimSpace(stderr)))
		}
		waitSourced(t, tg.js, "M", 5)
		waitSourced(t, tg.js, "S", 5)
		for _, name := range []string{"M", "S"} {
			_, stdout, _ := natsRun(t, tg.url, "stream", "info", name)
			for _, line := range strings.Split(stdout, "\n") {
				l := strings.TrimSpace(line)
				for _, key := range []string{"Mirror:", "Sources:", "Stream Name:", "Lag:", "Messages:", "Last Sequence:", "Subjects:"} {
					if strings.HasPrefix(l, key) {
						l, _, _ = strings.Cut(l, " @ ") // the time differs
						out = append(out, name+" "+l)
					}
				}
			}
		}
		return out
	}
	sameLines(t, "nats stream add --mirror/--source", scenario(ours), scenario(ref))
}
