package auth

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
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

// Throttle slows password guessing and sign-up floods. Every attempt for
// a key (an email, a client address) is counted when it is reserved,
// before the password is hashed, so concurrent attempts cannot all pass
// the check at once. The first Free attempts are allowed; after them each
// attempt waits a delay that doubles from BaseDelay up to MaxDelay. A
// successful login clears its keys; a key idle for longer than MaxDelay
// starts afresh.
//
// The zero value with the parameters set is ready to use. Safe for
// concurrent use.
type Throttle struct {
	Free int
	// FreeFor gives some classes of keys their own allowance: a key is
	// "<class>:<value>" ("ip:192.0.2.1"), and a class listed here gets
	// that many free attempts instead of Free. Many people share one
	// address behind a NAT, so an address gets more than an email.
	FreeFor   map[string]int
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxKeys bounds how many keys are remembered; past it, keys idle the
	// longest are forgotten first (an attacker inventing emails must not
	// grow memory without bound).
	MaxKeys int

	mu      sync.Mutex
	entries map[string]*throttleEntry // guarded by mu
}

type throttleEntry struct {
	attempts int       // reserved since the key was last cleared
	until    time.Time // no attempt before this
	last     time.Time // the last attempt
}

// NewThrottle returns the login throttle: 5 free attempts per email and
// 50 per client address ("ip:" keys), then 1 s doubling to 15 minutes.
func NewThrottle() *Throttle {
	return &Throttle{Free: 5, FreeFor: map[string]int{"ip": 50}, BaseDelay: time.Second, MaxDelay: 15 * time.Minute,
		MaxKeys: 1 << 16, entries: map[string]*throttleEntry{}}
}

// free is the allowance of key.
func (t *Throttle) free(key string) int {
	if class, _, ok := strings.Cut(key, ":"); ok {
		if n, ok := t.FreeFor[class]; ok {
			return n
		}
	}
	return t.Free
}

// NewSignupThrottle returns the sign-up throttle (keyed by client
// address): 30 sign-ups, then 1 s doubling to one minute.
func NewSignupThrottle() *Throttle {
	return &Throttle{Free: 30, BaseDelay: time.Second, MaxDelay: time.Minute, MaxKeys: 1 << 16,
		entries: map[string]*throttleEntry{}}
}

// Attempt reserves an attempt for every key at now. It returns zero if
// the attempt may go ahead (and counts it for every key), or how long the
// keys must still wait (and counts nothing).
func (t *Throttle) Attempt(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		if e := t.entries[k]; e != nil && !t.staleLocked(e, now) && e.until.After(now) {
			wait = max(wait, e.until.Sub(now))
		}
	}
	if wait > 0 {
		return wait
	}
	if t.entries == nil {
		t.entries = map[string]*throttleEntry{}
	}
	for _, k := range keys {
		e := t.entries[k]
		if e == nil || t.staleLocked(e, now) {
			t.makeRoomLocked(now)
			e = &throttleEntry{}
			t.entries[k] = e
		}
		e.attempts++
		e.last = now
		t.setUntilLocked(k, e)
	}
	return 0
}

// setUntilLocked sets when e's key may next try, from its attempts since
// its last one: after the Free-th attempt the next one waits BaseDelay,
// then twice that, and so on up to MaxDelay.
func (t *Throttle) setUntilLocked(key string, e *throttleEntry) {
	e.until = time.Time{}
	if over := e.attempts - t.free(key); over >= 0 {
		d := t.BaseDelay << min(over, 30)
		if d > t.MaxDelay || d <= 0 {
			d = t.MaxDelay
		}
		e.until = e.last.Add(d)
	}
}

// Release gives back an attempt Attempt reserved for the keys that was
// never checked (the server was too busy to hash the password), so a
// busy server does not count against the people it turned away.
func (t *Throttle) Release(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		e := t.entries[k]
		if e == nil {
			continue
		}
		if e.attempts--; e.attempts <= 0 {
			delete(t.entries, k)
			continue
		}
		t.setUntilLocked(k, e)
	}
}

// Succeed clears the keys: a right password ends the throttling.
func (t *Throttle) Succeed(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.entries, k)
	}
}

// staleLocked reports whether e has been idle long enough to start over.
func (t *Throttle) staleLocked(e *throttleEntry, now time.Time) bool {
	return now.Sub(e.last) > t.MaxDelay && !e.until.After(now)
}

// makeRoomLocked keeps the map under MaxKeys before a key is added:
// stale entries go first, then, if that is not enough, the eighth idle
// the longest (in one sort, so a flood of new keys costs O(log n) each),
// keys still made to wait last: a flood of invented keys must not make
// room by forgetting the key it is guessing for.
func (t *Throttle) makeRoomLocked(now time.Time) {
	if t.MaxKeys <= 0 || len(t.entries) < t.MaxKeys {
		return
	}
	for k, e := range t.entries {
		if t.staleLocked(e, now) {
			delete(t.entries, k)
		}
	}
	if len(t.entries) < t.MaxKeys {
		return
	}
	keys := make([]string, 0, len(t.entries))
	for k := range t.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		ea, eb := t.entries[a], t.entries[b]
		if wa, wb := ea.until.After(now), eb.until.After(now); wa != wb {
			if wa {
				return 1
			}
			return -1
		}
		return ea.last.Compare(eb.last)
	})
	for _, k := range keys[:len(keys)/8+1] {
		delete(t.entries, k)
	}
}
