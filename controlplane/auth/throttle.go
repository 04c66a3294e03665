package auth

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("crypto/rand: %w", err)
	}
	return b, nil
}

// Throttle slows password guessing: after FreeFailures failed logins for
// a key (an email, a client address), further attempts are refused until
// a delay passes that doubles with every failure, up to MaxDelay. A
// successful login clears the key.
//
// Safe for concurrent use.
type Throttle struct {
	FreeFailures int
	BaseDelay    time.Duration
	MaxDelay     time.Duration

	mu      sync.Mutex
	entries map[string]*throttleEntry // guarded by mu
}

type throttleEntry struct {
	failures int
	until    time.Time
	last     time.Time
}

// NewThrottle returns a throttle with 5 free failures, then 1 s doubling
// to 15 minutes.
func NewThrottle() *Throttle {
	return &Throttle{FreeFailures: 5, BaseDelay: time.Second, MaxDelay: 15 * time.Minute,
		entries: map[string]*throttleEntry{}}
}

// Wait returns how long the keys must still wait before another attempt
// (zero if none of them is throttled).
func (t *Throttle) Wait(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		if e := t.entries[k]; e != nil && e.until.After(now) {
			wait = max(wait, e.until.Sub(now))
		}
	}
	return wait
}

// Fail records a failed attempt for every key.
func (t *Throttle) Fail(now time.Time, keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetOldLocked(now)
	for _, k := range keys {
		e := t.entries[k]
		if e == nil {
			e = &throttleEntry{}
			t.entries[k] = e
		}
		e.failures++
		e.last = now
		if over := e.failures - t.FreeFailures; over > 0 {
			d := t.BaseDelay << min(over-1, 30)
			if d > t.MaxDelay || d <= 0 {
				d = t.MaxDelay
			}
			e.until = now.Add(d)
		}
	}
}

// Succeed clears the keys.
func (t *Throttle) Succeed(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.entries, k)
	}
}

// forgetOldLocked drops entries idle for longer than MaxDelay, so the
// map does not grow with every address that ever failed once.
func (t *Throttle) forgetOldLocked(now time.Time) {
	if len(t.entries) < 1024 {
		return
	}
	for k, e := range t.entries {
		if now.Sub(e.last) > t.MaxDelay && !e.until.After(now) {
			delete(t.entries, k)
		}
	}
}
