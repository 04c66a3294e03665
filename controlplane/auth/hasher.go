package auth

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"
)

// ErrBusy is returned by Hasher when no room in the memory budget came
// free in time; callers answer 429 with a Retry-After.
var ErrBusy = errors.New("too many password hashes in progress")

// DefaultHashBudget is the memory all concurrent password hashes may
// take: at argon2id's 19 MiB, six at a time.
const DefaultHashBudget = 128 << 20

// DefaultHashWait is how long a request waits for room in the budget
// before it is refused.
const DefaultHashWait = time.Second

// Hasher hashes and checks passwords within a memory budget. Each
// argon2id run allocates its memory parameter at once, so unbounded
// concurrent logins are unbounded memory: a run reserves its memory
// (the hash's own m for a check) before it starts, waits at most Wait for
// room, and gives up with ErrBusy. A hash larger than the whole budget
// runs alone.
//
// Runs are also capped at one fewer than the CPUs Go uses (at least one):
// each run keeps one core busy, so more at once only adds latency and
// memory, and the spare core keeps the health checks and the account
// resolver answering while logins queue.
//
// Safe for concurrent use.
type Hasher struct {
	budget  int64 // KiB
	maxRuns int   // most runs at once
	wait    time.Duration
	// onHash, if set, runs before each argon2id computation (tests count
	// them).
	onHash func()

	mu struct {
		sync.Mutex
		used    int64         // KiB reserved by runs in progress; guarded by mu
		runs    int           // runs in progress; guarded by mu
		changed chan struct{} // closed when used drops; guarded by mu
	}
}

// NewHasher returns a Hasher with a budget in bytes (DefaultHashBudget
// if <= 0) and a wait (DefaultHashWait if <= 0).
func NewHasher(budget int64, wait time.Duration) *Hasher {
	if budget <= 0 {
		budget = DefaultHashBudget
	}
	if wait <= 0 {
		wait = DefaultHashWait
	}
	h := &Hasher{budget: max(budget>>10, argonMemory), maxRuns: max(1, runtime.GOMAXPROCS(0)-1), wait: wait}
	h.mu.changed = make(chan struct{})
	return h
}

// Slots is how many hashes with the default parameters run at once.
func (h *Hasher) Slots() int { return min(int(h.budget/argonMemory), h.maxRuns) }

// OnHash sets a function that runs before every hash computation. Tests
// use it to count how many passwords were actually checked.
func (h *Hasher) OnHash(f func()) { h.onHash = f }

// Hash is HashPassword within the budget.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	release, err := h.acquire(ctx, argonMemory)
	if err != nil {
		return "", err
	}
	defer release()
	if h.onHash != nil {
		h.onHash()
	}
	return HashPassword(password)
}

// Check is CheckPassword within the budget; it reserves the memory the
// hash's own parameters need.
func (h *Hasher) Check(ctx context.Context, hash, password string) error {
	ph, err := parseHash(hash)
	if err != nil {
		return err
	}
	release, err := h.acquire(ctx, int64(ph.m))
	if err != nil {
		return err
	}
	defer release()
	if h.onHash != nil {
		h.onHash()
	}
	return ph.check(password)
}

// acquire reserves kib of the budget, waiting at most h.wait.
func (h *Hasher) acquire(ctx context.Context, kib int64) (release func(), err error) {
	kib = min(max(kib, 1), h.budget)
	timer := time.NewTimer(h.wait)
	defer timer.Stop()
	for {
		h.mu.Lock()
		if h.mu.used+kib <= h.budget && h.mu.runs < h.maxRuns {
			h.mu.used += kib
			h.mu.runs++
			h.mu.Unlock()
			return func() { h.release(kib) }, nil
		}
		changed := h.mu.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return nil, ErrBusy
		case <-ctx.Done():
			return nil, ErrBusy
		}
	}
}

func (h *Hasher) release(kib int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.used -= kib
	h.mu.runs--
	close(h.mu.changed)
	h.mu.changed = make(chan struct{})
}
