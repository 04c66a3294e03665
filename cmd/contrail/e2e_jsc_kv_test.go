package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Key-Value buckets through nats.go and the nats CLI. The main session
// runs against contrail and nats-server alike and their transcripts must
// match.

// kvTranscript drives one KV session and describes every outcome.
func kvTranscript(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	errName := func(err error) string {
		for _, e := range []error{jetstream.ErrKeyNotFound, jetstream.ErrKeyExists, jetstream.ErrKeyDeleted,
			jetstream.ErrNoKeysFound, jetstream.ErrBucketNotFound, jetstream.ErrBucketExists, jetstream.ErrInvalidKey} {
			if errors.Is(err, e) {
				return e.Error()
			}
		}
		var withAPI interface{ APIError() *jetstream.APIError }
		if errors.As(err, &withAPI) && withAPI.APIError() != nil {
			return fmt.Sprintf("api error %d", withAPI.APIError().ErrorCode)
		}
		if err == nil {
			return "ok"
		}
		return "error: " + err.Error()
	}
	entry := func(e jetstream.KeyValueEntry) string {
		return fmt.Sprintf("%s=%q rev=%d delta=%d op=%s", e.Key(), e.Value(), e.Revision(), e.Delta(), e.Operation())
	}
	// A live watcher's delta is num_pending when each update went out,
	// which depends on how far publishing had got: not compared.
	live := func(e jetstream.KeyValueEntry) string {
		return fmt.Sprintf("%s=%q rev=%d op=%s", e.Key(), e.Value(), e.Revision(), e.Operation())
	}

	_, err := js.KeyValue(ctxT(t), "NOPE")
	say("open missing bucket: %s", errName(err))
	kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "B", History: 3, Description: "kv"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	_, err = js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "B", History: 5})
	say("create bucket with other config: %s", errName(err))
	_, err = kv.Keys(ctxT(t))
	say("keys of empty bucket: %s", errName(err))

	// The initial-values watcher, before anything is there.
	w, err := kv.WatchAll(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.Updates():
		say("watch empty bucket first: %v", e == nil)
	case <-time.After(ioTimeout):
		t.Fatal("watcher of an empty bucket sent no nil marker")
	}

	for _, step := range []struct {
		what string
		do   func() (uint64, error)
	}{
		{"put a", func() (uint64, error) { return kv.Put(ctxT(t), "a", []byte("1")) }},
		{"put a again", func() (uint64, error) { return kv.PutString(ctxT(t), "a", "2") }},
		{"create a (exists)", func() (uint64, error) { return kv.Create(ctxT(t), "a", []byte("x")) }},
		{"create b", func() (uint64, error) { return kv.Create(ctxT(t), "b", []byte("b1")) }},
		{"update a, wrong revision", func() (uint64, error) { return kv.Update(ctxT(t), "a", []byte("x"), 1) }},
		{"update a, right revision", func() (uint64, error) { return kv.Update(ctxT(t), "a", []byte("3"), 2) }},
		{"update c (missing), revision 0", func() (uint64, error) { return kv.Update(ctxT(t), "c", []byte("c1"), 0) }},
		{"put a.b.c", func() (uint64, error) { return kv.Put(ctxT(t), "a.b.c", []byte("deep")) }},
		{"put bad key", func() (uint64, error) { return kv.Put(ctxT(t), "bad key", []byte("x")) }},
		{"put a 4", func() (uint64, error) { return kv.Put(ctxT(t), "a", []byte("4")) }},
	} {
		rev, err := step.do()
		say("%s: rev=%d %s", step.what, rev, errName(err))
	}
	e, err := kv.Get(ctxT(t), "a")
	if err == nil {
		say("get a: %s", entry(e))
	} else {
		say("get a: %s", errName(err))
	}
	_, err = kv.GetRevision(ctxT(t), "a", 1)
	say("get a at revision 1 (beyond history 3): %s", errName(err))
	if e, err := kv.GetRevision(ctxT(t), "a", 2); err == nil {
		say("get a at revision 2: %s", entry(e))
	} else {
		say("get a at revision 2: %s", errName(err))
	}
	_, err = kv.Get(ctxT(t), "zzz")
	say("get missing: %s", errName(err))

	hist, err := kv.History(ctxT(t), "a")
	say("history a: %s", errName(err))
	for _, h := range hist {
		say("  %s", entry(h))
	}

	err = kv.Delete(ctxT(t), "b")
	say("delete b: %s", errName(err))
	_, err = kv.Get(ctxT(t), "b")
	say("get deleted b: %s", errName(err))
	err = kv.Delete(ctxT(t), "a", jetstream.LastRevision(1))
	say("delete a at wrong revision: %s", errName(err))
	rev, err := kv.Create(ctxT(t), "b", []byte("b2"))
	say("create deleted b: rev=%d %s", rev, errName(err))
	err = kv.Purge(ctxT(t), "c")
	say("purge c: %s", errName(err))
	hist, err = kv.History(ctxT(t), "c")
	say("history of purged c: %s", errName(err))
	for _, h := range hist {
		say("  %s", entry(h))
	}

	keys, err := kv.Keys(ctxT(t))
	sort.Strings(keys)
	say("keys: %v %s", keys, errName(err))
	lister, err := kv.ListKeysFiltered(ctxT(t), "a.>")
	if err != nil {
		t.Fatal(err)
	}
	var filtered []string
	for k := range lister.Keys() {
		filtered = append(filtered, k)
	}
	say("keys a.>: %v", filtered)

	// What the watcher saw since its nil marker.
	for i := 0; i < 10; i++ {
		select {
		case e := <-w.Updates():
			say("watch: %s", live(e))
		case <-time.After(ioTimeout):
			t.Fatalf("watcher got %d updates", i)
		}
	}

	// A new watcher: current values, the nil marker, then updates.
	w2, err := kv.Watch(ctxT(t), "a.>")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	for done := false; !done; {
		select {
		case e := <-w2.Updates():
			if e == nil {
				say("watch a.>: nil marker")
				done = true
			} else {
				say("watch a.>: %s", entry(e))
			}
		case <-time.After(ioTimeout):
			t.Fatal("no nil marker")
		}
	}
	kv.Put(ctxT(t), "a.x", []byte("new"))
	kv.Put(ctxT(t), "other", []byte("not watched"))
	select {
	case e := <-w2.Updates():
		say("watch a.> update: %s", live(e))
	case <-time.After(ioTimeout):
		t.Fatal("no update")
	}
	w3, err := kv.WatchAll(ctxT(t), jetstream.IncludeHistory(), jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Stop()
	n := 0
	for e := range w3.Updates() {
		if e == nil {
			break
		}
		n++
	}
	say("watch with history, ignoring deletes: %d before the marker", n)
	w4, err := kv.WatchAll(ctxT(t), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w4.Stop()
	kv.Put(ctxT(t), "late", []byte("x"))
	select {
	case e := <-w4.Updates():
		if e == nil {
			say("updates only: nil marker first")
			e = <-w4.Updates()
		}
		say("updates only: %s", live(e))
	case <-time.After(ioTimeout):
		t.Fatal("no update")
	}

	st, err := kv.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	say("status: bucket=%s values=%d history=%d ttl=%v store=%s", st.Bucket(), st.Values(), st.History(), st.TTL(), st.BackingStore())
	names := js.KeyValueStoreNames(ctxT(t))
	var bn []string
	for name := range names.Name() {
		bn = append(bn, name)
	}
	say("bucket names: %v", bn)
	err = js.DeleteKeyValue(ctxT(t), "B")
	say("delete bucket: %s", errName(err))
	_, err = js.KeyValue(ctxT(t), "B")
	say("open deleted bucket: %s", errName(err))
	return out
}

func TestJSCKVCompare(t *testing.T) {
	t.Parallel()
	ours, ref := jsPair(t)
	a := kvTranscript(t, ours.js)
	b := kvTranscript(t, ref.js)
	sameLines(t, "KV sessions differ", a, b)
	if t.Failed() {
		t.Logf("nats-server transcript:\n%s", strings.Join(b, "\n"))
	}
}

func TestJSCKVTTL(t *testing.T) {
	t.Parallel()
	e := jscStart(t)

	t.Run("BucketTTL", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "TTL", TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		put := time.Now()
		if _, err := kv.Put(ctxT(t), "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if e, err := kv.Get(ctxT(t), "k"); err != nil || string(e.Value()) != "v" {
			t.Fatalf("get before expiry: %v", err)
		}
		if st, _ := kv.Status(ctxT(t)); st.TTL() != time.Second {
			t.Errorf("status ttl %v", st.TTL())
		}
		waitFor(t, 5*time.Second, "the key to expire", func() bool {
			_, err := kv.Get(ctxT(t), "k")
			return errors.Is(err, jetstream.ErrKeyNotFound)
		})
		if el := time.Since(put); el < 900*time.Millisecond {
			t.Errorf("expired after %v, ttl 1s", el)
		}
	})

	t.Run("PerKeyTTL", func(t *testing.T) {
		t.Parallel()
		_, js := e.conn(t)
		kv, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "KTTL", LimitMarkerTTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		w, err := kv.WatchAll(ctxT(t), jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := kv.Create(ctxT(t), "short", []byte("v"), jetstream.KeyTTL(time.Second)); err != nil {
			t.Fatalf("create with key ttl: %v", err)
		}
		if _, err := kv.Put(ctxT(t), "long", []byte("v")); err != nil {
			t.Fatal(err)
		}
		got := map[string]jetstream.KeyValueOp{}
		deadline := time.After(8 * time.Second)
		for len(got) < 2 || got["short"] == jetstream.KeyValuePut {
			select {
			case e := <-w.Updates():
				if e != nil {
					got[e.Key()] = e.Operation()
				}
			case <-deadline:
				t.Fatalf("watcher saw %v; want the short key removed by its ttl", got)
			}
		}
		if got["short"] != jetstream.KeyValuePurge && got["short"] != jetstream.KeyValueDelete {
			t.Errorf("expiry marker op %v", got["short"])
		}
		if _, err := kv.Get(ctxT(t), "short"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("get expired key: %v", err)
		}
		if _, err := kv.Get(ctxT(t), "long"); err != nil {
			t.Errorf("get long-lived key: %v", err)
		}
	})
}

func TestJSCKVCLI(t *testing.T) {
	t.Parallel()
	e := jscStart(t)
	url := e.n.URL
	runCLI(t, url, "kv", "add", "CLI", "--history", "3", "--description", "from the cli")
	runCLI(t, url, "kv", "put", "CLI", "k", "one")
	runCLI(t, url, "kv", "put", "CLI", "k", "two")
	if out := runCLI(t, url, "kv", "get", "CLI", "k", "--raw"); strings.TrimSpace(out) != "two" {
		t.Errorf("kv get --raw: %q", out)
	}
	runCLI(t, url, "kv", "create", "CLI", "new", "v")
	if out, err := tryCLI(t, url, "kv", "create", "CLI", "new", "again"); err == nil {
		t.Errorf("kv create on an existing key succeeded:\n%s", out)
	}
	runCLI(t, url, "kv", "update", "CLI", "new", "v2", "3")
	if out, err := tryCLI(t, url, "kv", "update", "CLI", "new", "v3", "1"); err == nil {
		t.Errorf("kv update at a wrong revision succeeded:\n%s", out)
	}
	out := runCLI(t, url, "kv", "history", "CLI", "k")
	if !strings.Contains(out, "one") || !strings.Contains(out, "two") {
		t.Errorf("kv history:\n%s", out)
	}
	out = runCLI(t, url, "kv", "ls", "CLI")
	if !strings.Contains(out, "k") || !strings.Contains(out, "new") {
		t.Errorf("kv ls CLI:\n%s", out)
	}
	out = runCLI(t, url, "kv", "ls")
	if !strings.Contains(out, "CLI") || !strings.Contains(out, "from the cli") {
		t.Errorf("kv ls:\n%s", out)
	}
	out = runCLI(t, url, "kv", "info", "CLI")
	for _, want := range []string{"KV_CLI", "from the cli", "History Kept: 3", "Values Stored: 4", "Backing Store Kind: JetStream"} {
		if !strings.Contains(out, want) {
			t.Errorf("kv info lacks %q:\n%s", want, out)
		}
	}
	runCLI(t, url, "kv", "revert", "CLI", "k", "1", "--force")
	if out := runCLI(t, url, "kv", "get", "CLI", "k", "--raw"); strings.TrimSpace(out) != "one" {
		t.Errorf("after revert: %q", out)
	}
	runCLI(t, url, "kv", "del", "CLI", "k", "-f")
	if out, err := tryCLI(t, url, "kv", "get", "CLI", "k"); err == nil {
		t.Errorf("kv get of a deleted key succeeded:\n%s", out)
	}
	runCLI(t, url, "kv", "purge", "CLI", "new", "-f")
	runCLI(t, url, "kv", "compact", "CLI", "-f")
	// watch prints what is there and then follows; run it briefly.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, js := e.conn(t)
	kv, err := js.KeyValue(ctxT(t), "CLI")
	if err != nil {
		t.Fatal(err)
	}
	kv.Put(ctxT(t), "watched", []byte("seen"))
	wout, _ := watchCLI(ctx, t, url, "kv", "watch", "CLI")
	if !strings.Contains(wout, "watched") || !strings.Contains(wout, "seen") {
		t.Errorf("kv watch output:\n%s", wout)
	}
	runCLI(t, url, "kv", "del", "CLI", "-f")
	if out := runCLI(t, url, "kv", "ls"); strings.Contains(out, "CLI") && !strings.Contains(out, "No Key-Value") {
		t.Errorf("bucket still listed after kv del:\n%s", out)
	}
}
