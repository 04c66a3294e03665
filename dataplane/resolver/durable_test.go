package resolver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// accountJWT signs an account JWT for pub issued at iat (jwt.Encode
// always stamps the current second, and the tests need several JWTs of
// one account in a known order).
func accountJWT(t testing.TB, signer nkeys.KeyPair, pub string, iat int64) string {
	t.Helper()
	ac := jwt.NewAccountClaims(pub)
	iss, _ := signer.PublicKey()
	ac.Issuer, ac.IssuedAt, ac.ID = iss, iat, fmt.Sprintf("jti-%d", iat)
	ac.Type = jwt.AccountClaim
	ac.Version = 2
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"ed25519-nkey"}`))
	body, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	signing := header + "." + enc.EncodeToString(body)
	sig, err := signer.Sign([]byte(signing))
	if err != nil {
		t.Fatal(err)
	}
	token := signing + "." + enc.EncodeToString(sig)
	if got := issuedAt(token); got != iat {
		t.Fatalf("test JWT reads back iat %d, want %d", got, iat)
	}
	return token
}

// TestURLNotFoundDeletesStored: an authoritative 404 from the URL means
// the account was deleted: its stored JWT goes, also across a restart.
// A URL that does not answer (5xx, refused) still leaves stored JWTs
// served.
func TestURLNotFoundDeletesStored(t *testing.T) {
	f := newFakeURL(t)
	fs := vfs.NewMem()
	key := accountKey(t)
	r, err := New(Options{URL: f.URL + "/acc/", Dir: "jwt", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Store(key, "jwt-v1"); err != nil {
		t.Fatal(err)
	}
	f.down.Store(true) // 502
	if got, err := r.Fetch(ctx, key); err != nil || got != "jwt-v1" {
		t.Fatalf("URL failing: %q %v, want the stored JWT", got, err)
	}
	f.down.Store(false) // and it does not know the account: 404
	r, _ = New(Options{URL: f.URL + "/acc/", Dir: "jwt", FS: fs})
	if _, err := r.Fetch(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("URL says 404: %v, want ErrNotFound", err)
	}
	if got := r.Stored(); len(got) != 0 {
		t.Fatalf("after a 404 the resolver still holds %v", got)
	}
	// A restarted node with the URL unreachable does not bring it back.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := "http://" + ln.Addr().String() + "/acc/"
	ln.Close()
	r, _ = New(Options{URL: refused, Dir: "jwt", FS: fs})
	if got, err := r.Fetch(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted account with the URL refused: %q %v, want the URL's error", got, err)
	}
	// Stored JWTs of other accounts are served while it is refused.
	other := accountKey(t)
	r.Store(other, "jwt-other")
	r, _ = New(Options{URL: refused, Dir: "jwt", FS: fs})
	if got, err := r.Fetch(ctx, other); err != nil || got != "jwt-other" {
		t.Fatalf("URL refused: %q %v, want the stored JWT", got, err)
	}
}

// TestDeletedAccountSurvivesPowerCut: every store, rename and remove is
// on disk when it returns: a power cut right after (only synced data
// survives) neither brings back a deleted account's JWT nor an older JWT.
func TestDeletedAccountSurvivesPowerCut(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	for _, hard := range []bool{false, true} {
		t.Run(fmt.Sprintf("hard=%v", hard), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			open := func(fs vfs.FS) *Resolver {
				r, err := New(Options{Dir: "jwt", FS: fs, HardDelete: hard})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			r := open(fs)
			gone, kept := accountKey(t), accountKey(t)
			for _, k := range []string{gone, kept} {
				if err := r.Store(k, accountJWT(t, op, k, 100)); err != nil {
					t.Fatal(err)
				}
			}
			newer := accountJWT(t, op, kept, 200)
			if err := r.Store(kept, newer); err != nil {
				t.Fatal(err)
			}
			if err := r.Delete(gone); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 20 {
				// Anything not synced may or may not survive; what was
				// acknowledged must.
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
				r2 := open(crashed)
				if got := r2.Stored(); !slices.Equal(got, []string{kept}) {
					t.Fatalf("crash %d: stored %v, want only %s", i, got, kept)
				}
				if got, ok := r2.stored(kept); !ok || got != newer {
					t.Fatalf("crash %d: the kept account's JWT is not the newest", i)
				}
			}
		})
	}
}

// TestStoreKeepsNewest: concurrent stores of one account's JWTs, in any
// order, leave the newest in memory and on disk; an older one is
// refused with ErrStale, also when it arrives from the URL.
func TestStoreKeepsNewest(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	fs := vfs.NewMem()
	r, _ := New(Options{Dir: "jwt", FS: fs})
	key := accountKey(t)
	const n = 32
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = accountJWT(t, op, key, int64(1000+i))
	}
	order := rand.Perm(n)
	var wg sync.WaitGroup
	for _, i := range order {
		wg.Go(func() {
			if err := r.Store(key, tokens[i]); err != nil && !errors.Is(err, ErrStale) {
				t.Errorf("store %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	newest := tokens[n-1]
	if got, _ := r.stored(key); got != newest {
		t.Fatalf("in memory: iat %d, want %d", issuedAt(got), issuedAt(newest))
	}
	r2, _ := New(Options{Dir: "jwt", FS: fs})
	if got, _ := r2.stored(key); got != newest {
		t.Fatalf("on disk: iat %d, want %d", issuedAt(got), issuedAt(newest))
	}
	if err := r.Store(key, tokens[0]); !errors.Is(err, ErrStale) {
		t.Fatalf("an older JWT: %v, want ErrStale", err)
	}
	// The URL answering an older JWT than a push stored does not win.
	f := newFakeURL(t)
	f.jwts[key] = tokens[3]
	r3, _ := New(Options{URL: f.URL + "/acc/", Dir: "jwt", FS: fs})
	if got, err := r3.Fetch(context.Background(), key); err != nil || got != newest {
		t.Fatalf("fetch: iat %d %v, want the stored newer one", issuedAt(got), err)
	}
}

// TestFetchTimeoutServesStored: a URL that does not answer in time is
// down, not a deletion.
func TestFetchTimeoutServesStored(t *testing.T) {
	stall := make(chan struct{})
	f := newFakeURL(t)
	f.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stall })
	defer close(stall)
	r, _ := New(Options{URL: f.URL + "/acc/", Dir: "jwt", FS: vfs.NewMem(), Timeout: 50 * time.Millisecond})
	key := accountKey(t)
	r.Store(key, "jwt-v1")
	if got, err := r.Fetch(context.Background(), key); err != nil || strings.TrimSpace(got) != "jwt-v1" {
		t.Fatalf("URL timing out: %q %v", got, err)
	}
}

// TestFetchServesWhatItCannotStore: a JWT from the URL that the
// directory has no room for is served all the same.
func TestFetchServesWhatItCannotStore(t *testing.T) {
	f := newFakeURL(t)
	r, _ := New(Options{URL: f.URL + "/acc/", Dir: "jwt", FS: vfs.NewMem(), Limit: 1})
	full, extra := accountKey(t), accountKey(t)
	r.Store(full, "jwt-full")
	f.jwts[extra] = "jwt-extra"
	if got, err := r.Fetch(context.Background(), extra); err != nil || got != "jwt-extra" {
		t.Fatalf("fetch past the limit: %q %v", got, err)
	}
}
