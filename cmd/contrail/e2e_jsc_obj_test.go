package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Object Store buckets through nats.go and the nats CLI.

func TestJSCObjectStore(t *testing.T) {
	t.Parallel()
	e := jscStart(t)
	_, js := e.conn(t)
	obs, err := js.CreateObjectStore(ctxT(t), jetstream.ObjectStoreConfig{Bucket: "OBJ", Description: "objects"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := obs.Watch(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if first := <-w.Updates(); first != nil {
		t.Fatalf("watch of an empty store: first update %+v, want the nil marker", first)
	}

	// A 5 MiB object, in the default 128 KiB chunks.
	big := make([]byte, 5<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.UintN(256))
	}
	info, err := obs.Put(ctxT(t), jetstream.ObjectMeta{Name: "big.bin", Description: "five MiB", Headers: map[string][]string{"X-Kind": {"blob"}}}, bytes.NewReader(big))
	if err != nil {
		t.Fatalf("put 5 MiB: %v", err)
	}
	if info.Size != uint64(len(big)) || info.Chunks != 40 || info.Digest == "" {
		t.Errorf("put info: size %d chunks %d digest %q", info.Size, info.Chunks, info.Digest)
	}
	res, err := obs.Get(ctxT(t), "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res)
	res.Close()
	if err != nil {
		t.Fatalf("reading the object: %v", err)
	}
	if sha256.Sum256(got) != sha256.Sum256(big) {
		t.Fatalf("5 MiB object came back different (%d bytes)", len(got))
	}
	gi, err := obs.GetInfo(ctxT(t), "big.bin")
	if err != nil || gi.Description != "five MiB" || gi.Headers.Get("X-Kind") != "blob" || gi.NUID != info.NUID {
		t.Errorf("get info: %+v %v", gi, err)
	}
	if _, err := obs.PutString(ctxT(t), "small.txt", "hello"); err != nil {
		t.Fatal(err)
	}
	if s, err := obs.GetString(ctxT(t), "small.txt"); err != nil || s != "hello" {
		t.Errorf("get small: %q %v", s, err)
	}
	// Replacing an object drops the old chunks.
	if _, err := obs.PutString(ctxT(t), "small.txt", "hello again"); err != nil {
		t.Fatal(err)
	}
	if s, _ := obs.GetString(ctxT(t), "small.txt"); s != "hello again" {
		t.Errorf("replaced object reads %q", s)
	}
	// Links: to an object and to another bucket.
	link, err := obs.AddLink(ctxT(t), "link-to-big", gi)
	if err != nil {
		t.Fatalf("add link: %v", err)
	}
	if link.Opts == nil || link.Opts.Link == nil || link.Opts.Link.Name != "big.bin" {
		t.Errorf("link info %+v", link)
	}
	if b, err := obs.GetBytes(ctxT(t), "link-to-big"); err != nil || !bytes.Equal(b, big) {
		t.Errorf("reading through the link: %d bytes, %v", len(b), err)
	}
	other, err := js.CreateObjectStore(ctxT(t), jetstream.ObjectStoreConfig{Bucket: "OTHER"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.AddBucketLink(ctxT(t), "to-other", other); err != nil {
		t.Errorf("add bucket link: %v", err)
	}
	if _, err := obs.AddLink(ctxT(t), "link-to-link", link); !errors.Is(err, jetstream.ErrNoLinkToLink) {
		t.Errorf("link to a link: %v", err)
	}

	lst, err := obs.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range lst {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	wantStrings(t, "list", names, []string{"big.bin", "link-to-big", "small.txt", "to-other"})

	if err := obs.Delete(ctxT(t), "small.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Get(ctxT(t), "small.txt"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("get deleted: %v", err)
	}
	if di, err := obs.GetInfo(ctxT(t), "small.txt", jetstream.GetObjectInfoShowDeleted()); err != nil || !di.Deleted {
		t.Errorf("deleted info: %+v %v", di, err)
	}
	if err := obs.Delete(ctxT(t), "nothing"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("delete missing: %v", err)
	}

	// The watcher saw every change, in order.
	var seen []string
	for len(seen) < 6 {
		select {
		case u := <-w.Updates():
			s := u.Name
			if u.Deleted {
				s += " deleted"
			}
			seen = append(seen, s)
		case <-time.After(ioTimeout):
			t.Fatalf("watcher saw %q", seen)
		}
	}
	wantStrings(t, "watched", seen, []string{"big.bin", "small.txt", "small.txt", "link-to-big", "to-other", "small.txt deleted"})

	st, err := obs.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Bucket() != "OBJ" || st.Description() != "objects" || st.Sealed() || st.Size() < uint64(len(big)) || st.BackingStore() != "JetStream" {
		t.Errorf("status: bucket %s desc %q sealed %v size %d", st.Bucket(), st.Description(), st.Sealed(), st.Size())
	}
	if err := obs.Seal(ctxT(t)); err != nil {
		t.Fatalf("seal: %v", err)
	}
	if _, err := obs.PutString(ctxT(t), "after-seal", "x"); err == nil {
		t.Errorf("put into a sealed store succeeded")
	}
	var stores []string
	for n := range js.ObjectStoreNames(ctxT(t)).Name() {
		stores = append(stores, n)
	}
	sort.Strings(stores)
	wantStrings(t, "object store names", stores, []string{"OBJ", "OTHER"})
	if err := js.DeleteObjectStore(ctxT(t), "OTHER"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.ObjectStore(ctxT(t), "OTHER"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("open deleted store: %v", err)
	}
}

func TestJSCObjectCLI(t *testing.T) {
	t.Parallel()
	e := jscStart(t)
	url := e.n.URL
	dir := t.TempDir()
	src := filepath.Join(dir, "data.bin")
	data := bytes.Repeat([]byte("contrail object "), 100_000) // 1.6 MB
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, url, "object", "add", "FILES", "--description", "cli files")
	runCLI(t, url, "object", "put", "FILES", src, "--name", "data.bin", "--no-progress", "-f")
	out := runCLI(t, url, "object", "ls", "FILES")
	if !strings.Contains(out, "data.bin") {
		t.Errorf("object ls:\n%s", out)
	}
	out = runCLI(t, url, "object", "info", "FILES", "data.bin")
	if !strings.Contains(out, "data.bin") || !strings.Contains(out, "SHA-256") {
		t.Errorf("object info:\n%s", out)
	}
	dst := filepath.Join(dir, "back.bin")
	runCLI(t, url, "object", "get", "FILES", "data.bin", "-O", dst, "--no-progress", "-f")
	back, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("object get: %d bytes back, %v", len(back), err)
	}
	out = runCLI(t, url, "object", "info", "FILES")
	if !strings.Contains(out, "cli files") || !strings.Contains(out, "OBJ_FILES") {
		t.Errorf("object info bucket:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	wout, _ := watchCLI(ctx, t, url, "object", "watch", "FILES")
	if !strings.Contains(wout, "data.bin") {
		t.Errorf("object watch:\n%s", wout)
	}
	runCLI(t, url, "object", "del", "FILES", "data.bin", "-f")
	out = runCLI(t, url, "object", "ls", "FILES")
	if strings.Contains(out, "data.bin") {
		t.Errorf("deleted object still listed:\n%s", out)
	}
	runCLI(t, url, "object", "seal", "FILES", "-f")
	runCLI(t, url, "object", "del", "FILES", "-f")
	out = runCLI(t, url, "object", "ls")
	if strings.Contains(out, "FILES") {
		t.Errorf("deleted bucket still listed:\n%s", out)
	}
}
