package tier

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contrail/contrail/dataplane/tier/tiertest"
)

// startVersity runs versitygw, the real S3 server these tests talk to
// (make tools installs it), with the bucket "bkt".
func startVersity(t *testing.T) (endpoint string) {
	t.Helper()
	return tiertest.StartT(t, "bkt").Endpoint
}

// faultTransport injects S3 faults below the SDK: fail answers 503
// SlowDown to that many requests, truncate cuts response bodies short,
// hang holds requests until their context ends.
type faultTransport struct {
	fail           atomic.Int64
	truncate, hang atomic.Bool
	requests       atomic.Int64
}

func (f *faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.requests.Add(1)
	if f.hang.Load() {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	if f.fail.Add(-1) >= 0 {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
		return &http.Response{StatusCode: 503, Status: "503 Slow Down", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r}, nil
	}
	f.fail.Store(0)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && f.truncate.Load() && r.Method == http.MethodGet {
		resp.Body = &cutBody{r: resp.Body, left: max(resp.ContentLength/2, 1)}
	}
	return resp, err
}

type cutBody struct {
	r    io.ReadCloser
	left int64
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }

// TestS3Faults drives the S3 backend against versitygw through a
// faulty transport: retried SlowDowns succeed, persistent ones fail the
// call, a truncated body is an error (and a cold read through the cache
// never returns wrong bytes), a hanging store is bounded by the context.
func TestS3Faults(t *testing.T) {
	endpoint := startVersity(t)
	ft := &faultTransport{}
	ctx := context.Background()
	st, err := Open(ctx, "s3://bkt/pre", endpoint, &S3Options{HTTPClient: &http.Client{Transport: ft}, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	recs := testRecords(200)
	b, _ := buildTest(t, recs)
	if err := st.Put(ctx, "x/1.seg", b.Object); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRange(ctx, "x/1.seg", 5, 100)
	if err != nil || !bytes.Equal(got, b.Object[5:105]) {
		t.Fatalf("ranged get: %v", err)
	}
	if keys, err := st.List(ctx, ""); err != nil || len(keys) != 1 || keys[0] != "x/1.seg" {
		t.Fatalf("list: %v %v", keys, err)
	}

	ft.fail.Store(2) // retried with backoff
	if err := st.Put(ctx, "x/2.seg", b.Object); err != nil {
		t.Fatalf("put through two SlowDowns: %v", err)
	}
	ft.fail.Store(100)
	if err := st.Put(ctx, "x/3.seg", b.Object); err == nil {
		t.Fatal("put succeeded against a store answering only SlowDown")
	}
	ft.fail.Store(0)

	ft.truncate.Store(true)
	if _, err := st.GetRange(ctx, "x/1.seg", 0, int64(len(b.Object))); err == nil {
		t.Fatal("a truncated body read as whole")
	}
	c := NewCache(st, CacheOptions{Timeout: 500 * time.Millisecond})
	ref := Ref{Key: "x/1.seg", Size: int64(len(b.Object)), IndexOff: b.IndexOff}
	if _, err := c.Read(ctx, ref, recs[0].Seq); err == nil {
		t.Fatal("a cold read through truncated bodies succeeded")
	}
	ft.truncate.Store(false)
	// A load still in flight from the faulty period may fail a reader
	// that joins it; the next one succeeds.
	r, err := c.Read(ctx, ref, recs[7].Seq)
	if err != nil {
		r, err = c.Read(ctx, ref, recs[7].Seq)
	}
	if err != nil || !bytes.Equal(r.Data, recs[7].Data) {
		t.Fatalf("read after the fault: %v", err)
	}

	ft.hang.Store(true)
	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	began := time.Now()
	err = st.Put(hctx, "x/4.seg", b.Object)
	cancel()
	if err == nil || time.Since(began) > 3*time.Second {
		t.Fatalf("put to a hanging store: %v after %v", err, time.Since(began))
	}
	if _, err := c.Read(ctx, Ref{Key: "x/2.seg", Size: ref.Size, IndexOff: ref.IndexOff}, recs[0].Seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cold read from a hanging store: %v", err)
	}
	ft.hang.Store(false)
	for _, k := range []string{"x/1.seg", "x/2.seg", "x/3.seg", "x/4.seg", "x/never.seg"} {
		if err := st.Delete(ctx, k); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
	if keys, err := st.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("after deletes: %v %v", keys, err)
	}
	if _, err := st.GetRange(ctx, "x/1.seg", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a deleted object: %v", err)
	}
}

// TestListPage pages through both backends in key order, with sizes and
// times, across directory levels that sort differently from their keys.
func TestListPage(t *testing.T) {
	ctx := context.Background()
	dir, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s3, err := OpenS3(ctx, S3Options{Bucket: "bkt", Prefix: "p/q", Endpoint: startVersity(t)})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a-b", "a/b", "a/c/d", "b", "c/x"} // in key order
	for _, st := range []ObjectStore{dir, s3} {
		began := time.Now().Add(-2 * time.Second)
		for i, k := range keys {
			if err := st.Put(ctx, k, bytes.Repeat([]byte{1}, i+1)); err != nil {
				t.Fatalf("%s: put %s: %v", st, k, err)
			}
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			objs, next, err := st.ListPage(ctx, after, 2)
			if err != nil || len(objs) > 2 || pages > len(keys) {
				t.Fatalf("%s: page after %q: %d objects, %v", st, after, len(objs), err)
			}
			for _, o := range objs {
				if o.Size != int64(len(got)+1) || o.Modified.Before(began) {
					t.Errorf("%s: %s: size %d, modified %v", st, o.Key, o.Size, o.Modified)
				}
				got = append(got, o.Key)
			}
			if next == "" {
				break
			}
			after = next
		}
		if strings.Join(got, " ") != strings.Join(keys, " ") {
			t.Fatalf("%s: listed %v, want %v", st, got, keys)
		}
	}
}
