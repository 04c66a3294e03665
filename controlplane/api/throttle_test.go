package api

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/records"
)

// countHashes makes the API's hasher count the passwords it checks.
func (a *testAPI) countHashes() *atomic.Int64 {
	var n atomic.Int64
	a.srv.Hasher = auth.NewHasher(0, time.Minute) // the throttle, not the budget, is under test
	a.srv.Hasher.OnHash(func() { n.Add(1) })
	return &n
}

// clock makes the API's clock one the test moves.
func (a *testAPI) clock(start time.Time) func(time.Duration) {
	var mu sync.Mutex
	now := start
	a.srv.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	return func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

// TestConcurrentWrongLoginsAreThrottled: 64 concurrent wrong passwords
// for one email are counted before they are checked, so only the
// throttle's allowance is hashed; the rest get 429 with Retry-After.
func TestConcurrentWrongLoginsAreThrottled(t *testing.T) {
	a := newTestAPI(t)
	advance := a.clock(time.Unix(1_700_000_000, 0))
	hash, err := auth.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	o := &records.Org{ID: records.NewID("org"), Name: "o"}
	p := &records.Person{ID: records.NewID("usr"), Email: "ann@example.com", PasswordHash: hash, OrgID: o.ID}
	if err := a.repo.SignUp(p, o); err != nil {
		t.Fatal(err)
	}
	hashes := a.countHashes()
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			req := httptest.NewRequest("POST", "/v1/login",
				strings.NewReader(fmt.Sprintf(`{"email":"ann@example.com","password":"wrong password %d"}`, i)))
			req.RemoteAddr = fmt.Sprintf("10.0.%d.%d:1234", i/200, i%200+1) // many addresses, one email
			rec := httptest.NewRecorder()
			a.srv.ServeHTTP(rec, req)
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
			if rec.Code == http.StatusTooManyRequests {
				if ra, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || ra < 1 {
					t.Errorf("429 without a Retry-After: %q", rec.Header().Get("Retry-After"))
				}
			}
		})
	}
	wg.Wait()
	free := a.srv.Throttle.Free
	if got := hashes.Load(); got > int64(free) {
		t.Fatalf("%d passwords checked for one email, throttle allows %d", got, free)
	}
	if codes[http.StatusUnauthorized] != free || codes[http.StatusTooManyRequests] != 64-free {
		t.Fatalf("answers %v, want %d x 401 and the rest 429", codes, free)
	}
	// The right password also waits; after the wait it works and clears.
	a.problem("POST", "/v1/login", "", `{"email":"ann@example.com","password":"correct horse battery"}`, http.StatusTooManyRequests)
	advance(time.Second)
	a.ok("POST", "/v1/login", "", `{"email":"ann@example.com","password":"correct horse battery"}`, http.StatusOK, nil)
	a.problem("POST", "/v1/login", "", `{"email":"ann@example.com","password":"wrong again"}`, http.StatusUnauthorized)
}

// TestSignupThrottledPerAddress: one client address gets the sign-up
// allowance, then 429; another address is not affected; X-Forwarded-For
// from an untrusted peer is ignored.
func TestSignupThrottledPerAddress(t *testing.T) {
	a := newTestAPI(t)
	a.clock(time.Unix(1_700_000_000, 0))
	a.srv.SignupThrottle = &auth.Throttle{Free: 3, BaseDelay: time.Second, MaxDelay: time.Minute}
	hashes := a.countHashes()
	signup := func(i int, addr, xff string) int {
		req := httptest.NewRequest("POST", "/v1/signup", strings.NewReader(
			fmt.Sprintf(`{"email":"p%d@example.com","password":"correct horse battery","organization":"o"}`, i)))
		req.RemoteAddr = addr
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		a.srv.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 3 {
		if code := signup(i, "192.0.2.1:1000", fmt.Sprintf("198.51.100.%d", i)); code != http.StatusCreated {
			t.Fatalf("sign-up %d: %d", i, code)
		}
	}
	if code := signup(3, "192.0.2.1:1000", "198.51.100.99"); code != http.StatusTooManyRequests {
		t.Fatalf("4th sign-up from one address (forged X-Forwarded-For): %d, want 429", code)
	}
	if code := signup(4, "192.0.2.2:1000", ""); code != http.StatusCreated {
		t.Fatalf("another address: %d", code)
	}
	if hashes.Load() != 4 {
		t.Fatalf("%d hashes, want 4 (a refused sign-up hashes nothing)", hashes.Load())
	}
}

// TestTrustedProxyAddress: behind a trusted proxy the client address is
// the one it forwards.
func TestTrustedProxyAddress(t *testing.T) {
	_, n, _ := netParseCIDR("192.0.2.0/24")
	ext := clientAddress(n)
	for _, c := range []struct{ remote, xff, want string }{
		{"192.0.2.1:1", "198.51.100.7", "198.51.100.7"},
		{"192.0.2.1:1", "198.51.100.7, 192.0.2.9", "198.51.100.7"},
		{"203.0.113.5:1", "198.51.100.7", "203.0.113.5"}, // not a proxy we trust
		{"127.0.0.1:1", "198.51.100.7", "127.0.0.1"},     // nor is loopback unless listed
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = c.remote
		req.Header.Set("X-Forwarded-For", c.xff)
		if got := ext(req); got != c.want {
			t.Errorf("from %s with X-Forwarded-For %q: %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}

func netParseCIDR(s string) (net.IP, []*net.IPNet, error) {
	ip, n, err := net.ParseCIDR(s)
	return ip, []*net.IPNet{n}, err
}
