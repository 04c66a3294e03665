package resolver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nkeys"
)

// fakeURL serves account JWTs and counts requests.
type fakeURL struct {
	*httptest.Server
	hits atomic.Int64
	down atomic.Bool
	mu   sync.Mutex
	jwts map[string]string
}

func newFakeURL(t *testing.T) *fakeURL {
	f := &fakeURL{jwts: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		if f.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		f.mu.Lock()
		token, ok := f.jwts[strings.TrimPrefix(r.URL.Path, "/acc/")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(token + "\n"))
	}))
	t.Cleanup(f.Close)
	return f
}

func accountKey(t *testing.T) string {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return pub
}

func TestFetchStoresAndFallsBack(t *testing.T) {
	f := newFakeURL(t)
	dir := t.TempDir()
	key := accountKey(t)
	f.jwts[key] = "jwt-v1"
	r, err := New(Options{URL: f.URL + "/acc/", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, err := r.Fetch(ctx, key); err != nil || got != "jwt-v1" {
		t.Fatalf("fetch: %q %v", got, err)
	}
	st, err := os.Stat(filepath.Join(dir, key+".jwt"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stored file: %v %v", st, err)
	}
	// A pushed update is kept; with the URL down a new resolver on the
	// same directory (a restarted node) serves it.
	if err := r.Store(key, "jwt-v2"); err != nil {
		t.Fatal(err)
	}
	f.down.Store(true)
	r2, _ := New(Options{URL: f.URL + "/acc/", Dir: dir})
	if got, err := r2.Fetch(ctx, key); err != nil || got != "jwt-v2" {
		t.Fatalf("fetch with the URL down: %q %v", got, err)
	}
	if got := r2.Stored(); !slices.Equal(got, []string{key}) {
		t.Fatalf("stored: %v", got)
	}
	if err := r2.Delete(key); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Fetch(ctx, key); err == nil {
		t.Fatal("a deleted account was served")
	}
	if _, err := os.Stat(filepath.Join(dir, key+".jwt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deleted account's file: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, key+".jwt.deleted")); err != nil || strings.TrimSpace(string(b)) != "jwt-v2" {
		t.Fatalf("a soft delete keeps the JWT aside: %q %v", b, err)
	}
}

func TestLimitAndHardDelete(t *testing.T) {
	dir := t.TempDir()
	r, _ := New(Options{Dir: dir, Limit: 2, HardDelete: true})
	a, b, c := accountKey(t), accountKey(t), accountKey(t)
	for _, k := range []string{a, b} {
		if err := r.Store(k, "jwt-"+k); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Store(c, "jwt"); !errors.Is(err, ErrFull) {
		t.Fatalf("third account past a limit of 2: %v", err)
	}
	if err := r.Store(a, "jwt-a2"); err != nil {
		t.Fatalf("updating a stored account at the limit: %v", err)
	}
	if err := r.Delete(a); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("after a hard delete the directory holds %d files, want 1", len(entries))
	}
	if err := r.Store(c, "jwt"); err != nil {
		t.Fatalf("room after a delete: %v", err)
	}
}

func TestUnknownAccountsAreNotAskedAgainAtOnce(t *testing.T) {
	f := newFakeURL(t)
	r, _ := New(Options{URL: f.URL + "/acc/"})
	key := accountKey(t)
	for range 50 {
		if _, err := r.Fetch(context.Background(), key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown account: %v", err)
		}
	}
	if n := f.hits.Load(); n != 1 {
		t.Fatalf("%d URL requests for one unknown account, want 1", n)
	}
	// A pushed JWT makes it known at once (the URL knows it now too).
	f.mu.Lock()
	f.jwts[key] = "pushed"
	f.mu.Unlock()
	r.Store(key, "pushed")
	if got, err := r.Fetch(context.Background(), key); err != nil || got != "pushed" {
		t.Fatalf("after a push: %q %v", got, err)
	}
	if _, err := r.Fetch(context.Background(), "not-a-key"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bad key: %v", err)
	}
}

func TestPreloadAndMemory(t *testing.T) {
	key := accountKey(t)
	r, err := New(Options{Preload: map[string]string{key: " preloaded \n"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Fetch(context.Background(), key); err != nil || got != "preloaded" {
		t.Fatalf("preloaded: %q %v", got, err)
	}
	if _, err := New(Options{Preload: map[string]string{"bogus": "x"}}); err == nil {
		t.Fatal("a preload under a non-account key was accepted")
	}
}

// TestFailedURLIsLeftAlone: once the URL fails, stored JWTs are served
// without asking it again until the retry interval passes, so a node
// whose control plane is down does not wait on it per account.
func TestFailedURLIsLeftAlone(t *testing.T) {
	f := newFakeURL(t)
	r, _ := New(Options{URL: f.URL + "/acc/", Dir: t.TempDir()})
	keys := []string{accountKey(t), accountKey(t), accountKey(t)}
	for _, k := range keys {
		r.Store(k, "jwt-"+k)
	}
	f.down.Store(true)
	for _, k := range keys {
		if got, err := r.Fetch(context.Background(), k); err != nil || got != "jwt-"+k {
			t.Fatalf("fetch with the URL down: %q %v", got, err)
		}
	}
	if n := f.hits.Load(); n != 1 {
		t.Fatalf("%d URL requests while it was failing, want 1", n)
	}
	if _, err := r.Fetch(context.Background(), accountKey(t)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unstored account with the URL down: %v, want ErrUnavailable", err)
	}
}
