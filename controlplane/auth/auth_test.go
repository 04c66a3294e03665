package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPassword(t *testing.T) {
	h, err := HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPassword(h, "correct horse battery"); err != nil {
		t.Fatalf("right password: %v", err)
	}
	if err := CheckPassword(h, "wrong horse battery"); !errors.Is(err, ErrMismatch) {
		t.Fatalf("wrong password: %v", err)
	}
	h2, _ := HashPassword("correct horse battery")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	if err := CheckPassword("garbage", "x"); err == nil || errors.Is(err, ErrMismatch) {
		t.Fatalf("garbage hash: %v", err)
	}
}

func TestToken(t *testing.T) {
	key, _ := NewSigningKey()
	s, err := NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	tok, err := s.Sign("tok_1", "api", "per_1", "org_1", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Verify(tok, now.Add(time.Minute))
	if err != nil || c.ID != "tok_1" || c.Subject != "per_1" || c.Org != "org_1" || c.Kind != "api" {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	if _, err := s.Verify(tok, now.Add(2*time.Hour)); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("expired: %v", err)
	}
	other, _ := NewSigningKey()
	s2, _ := NewSigner(other)
	if _, err := s2.Verify(tok, now); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("other key: %v", err)
	}
	if _, err := s.Verify(tok+"x", now); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("tampered: %v", err)
	}
}

func TestThrottle(t *testing.T) {
	th := NewThrottle()
	now := time.Unix(0, 0)
	for i := 0; i < 5; i++ {
		if w := th.Attempt(now, "a"); w != 0 {
			t.Fatalf("attempt %d throttled by %v", i, w)
		}
	}
	if w := th.Attempt(now, "b"); w != 0 {
		t.Fatalf("other key throttled: %v", w)
	}
	if w := th.Attempt(now, "b", "a"); w != time.Second {
		t.Fatalf("after 5 attempts wait %v, want 1s", w)
	}
	if w := th.Attempt(now, "b"); w != 0 {
		t.Fatalf("a refused attempt counted for b: %v", w)
	}
	now = now.Add(time.Second)
	if w := th.Attempt(now, "a"); w != 0 { // the 6th, after waiting
		t.Fatalf("after the wait: %v", w)
	}
	if w := th.Attempt(now, "a"); w != 2*time.Second {
		t.Fatalf("after 6 attempts wait %v, want 2s", w)
	}
	th.Succeed("a")
	if w := th.Attempt(now, "a"); w != 0 {
		t.Fatalf("after success wait %v", w)
	}
	// A key idle for longer than MaxDelay starts over.
	for range 10 {
		th.Attempt(now, "c")
	}
	now = now.Add(th.MaxDelay + time.Second)
	for i := range 5 {
		if w := th.Attempt(now, "c"); w != 0 {
			t.Fatalf("idle key, attempt %d: %v", i, w)
		}
	}
}

// TestThrottleConcurrentAttempts: attempts are reserved before the
// password is checked, so of many concurrent ones only the allowance
// passes.
func TestThrottleConcurrentAttempts(t *testing.T) {
	th := NewThrottle()
	now := time.Unix(1_700_000_000, 0)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if th.Attempt(now, "email:x@example.com", "ip:10.0.0.1") == 0 {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := passed.Load(); got != int64(th.Free) {
		t.Fatalf("%d of 64 concurrent attempts passed, want %d", got, th.Free)
	}
}

func TestThrottleBoundsKeys(t *testing.T) {
	th := NewThrottle()
	th.MaxKeys = 100
	now := time.Unix(0, 0)
	th.Attempt(now, "victim")
	for i := range 1000 {
		now = now.Add(time.Millisecond)
		th.Attempt(now, fmt.Sprintf("k%d", i))
		if n := len(th.entries); n > th.MaxKeys {
			t.Fatalf("%d keys remembered, bound %d", n, th.MaxKeys)
		}
	}
}

// TestThrottleKeepsWaitingKeys: a flood of invented keys makes room by
// forgetting idle keys, never a key that is still made to wait, so it
// cannot reset the throttle on the key being guessed.
func TestThrottleKeepsWaitingKeys(t *testing.T) {
	th := NewThrottle()
	th.MaxKeys = 100
	now := time.Unix(0, 0)
	for range th.Free + 1 {
		th.Attempt(now, "email:victim")
	}
	for i := range 1000 { // well within the victim's one-second wait
		now = now.Add(100 * time.Microsecond)
		th.Attempt(now, fmt.Sprintf("email:k%d", i))
	}
	if w := th.Attempt(now, "email:victim"); w == 0 {
		t.Fatal("the flood of other keys let the throttled key try again at once")
	}
}

// TestThrottleRelease: an attempt given back (never checked) does not
// count towards the allowance or the delay.
func TestThrottleRelease(t *testing.T) {
	th := NewThrottle()
	now := time.Unix(0, 0)
	for range th.Free - 1 {
		th.Attempt(now, "a")
	}
	for range 10 {
		if w := th.Attempt(now, "a"); w != 0 {
			t.Fatalf("last free attempt refused: %v", w)
		}
		th.Release("a")
	}
	if w := th.Attempt(now, "a"); w != 0 {
		t.Fatalf("released attempts counted: wait %v", w)
	}
	if w := th.Attempt(now, "a"); w != time.Second {
		t.Fatalf("after the allowance wait %v, want 1s", w)
	}
	th.Release("a")
	if w := th.Attempt(now, "a"); w != 0 {
		t.Fatalf("a released attempt past the allowance still makes the key wait %v", w)
	}
	th.Release("unknown") // nothing reserved: nothing happens
}

// TestHasherBudget: no more hashes run at once than the budget holds,
// and a request that finds no room in time gets ErrBusy.
func TestHasherBudget(t *testing.T) {
	h := NewHasher(2*argonMemory<<10, 50*time.Millisecond)
	h.maxRuns = 4 // the memory budget is the bound here, whatever the CPUs
	if h.Slots() != 2 {
		t.Fatalf("slots %d, want 2", h.Slots())
	}
	var running, peak atomic.Int64
	gate := make(chan struct{})
	h.OnHash(func() {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-gate
		running.Add(-1)
	})
	hash, _ := HashPassword("correct horse battery")
	var busy atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if err := h.Check(context.Background(), hash, "wrong"); errors.Is(err, ErrBusy) {
				busy.Add(1)
			}
		})
	}
	// Four of six find no room within the wait while two hold the budget.
	for busy.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	if peak.Load() != 2 || busy.Load() != 4 {
		t.Fatalf("peak %d concurrent hashes, %d busy; want 2 and 4", peak.Load(), busy.Load())
	}
	if err := h.Check(context.Background(), hash, "correct horse battery"); err != nil {
		t.Fatalf("after the burst: %v", err)
	}
}
