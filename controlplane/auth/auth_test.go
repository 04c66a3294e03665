package auth

import (
	"errors"
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
		if w := th.Wait(now, "a"); w != 0 {
			t.Fatalf("attempt %d throttled by %v", i, w)
		}
		th.Fail(now, "a")
	}
	if w := th.Wait(now, "b"); w != 0 {
		t.Fatalf("other key throttled: %v", w)
	}
	th.Fail(now, "a") // 6th failure: 1 s
	if w := th.Wait(now, "b", "a"); w != time.Second {
		t.Fatalf("after 6 failures wait %v, want 1s", w)
	}
	now = now.Add(time.Second)
	th.Fail(now, "a") // 7th: 2 s
	if w := th.Wait(now, "a"); w != 2*time.Second {
		t.Fatalf("after 7 failures wait %v, want 2s", w)
	}
	th.Succeed("a")
	if w := th.Wait(now, "a"); w != 0 {
		t.Fatalf("after success wait %v", w)
	}
}
