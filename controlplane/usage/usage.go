// Package usage samples what each account uses on its cell at a fixed
// interval and keeps the samples as a bounded ring per account, in the
// control plane's store, so usage charts survive a restart. The console
// draws its charts from History.
//
// Key layout (in the same store as the records, a prefix of its own):
//
//	usage/<account id>/<unix seconds, 20 digits>   Sample (JSON)
//
// Invariant: the store holds exactly the samples of the in-memory rings.
// A round's puts and evictions are applied in one batch, and the rings
// change only after that batch is durable.
package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
)

// Defaults: a sample a minute, a day of them per account.
const (
	DefaultInterval = time.Minute
	DefaultCapacity = 24 * 60
)

// cellTimeout bounds one account's usage question, so a cell that does
// not answer delays a round by at most this much per account.
const cellTimeout = 5 * time.Second

// Sample is one account's usage at one moment.
type Sample struct {
	At time.Time `json:"at"`
	provision.Usage
}

// Cells answers what an account uses now; *provision.Cells is the real one.
type Cells interface {
	Usage(ctx context.Context, cell, pub string) (*provision.Usage, error)
}

// Accounts lists every account record; *records.Repo is the real one.
type Accounts interface {
	AllAccounts() ([]records.Account, error)
}

// Config is what a Sampler is built from.
type Config struct {
	Store    state.Store
	Accounts Accounts
	Cells    Cells
	// Capacity is how many samples each account keeps; DefaultCapacity if 0.
	Capacity int
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	Log *slog.Logger
}

// Sampler takes samples and serves them. Round and Run take samples
// (one round at a time: Run calls Round from one goroutine); History may
// be called concurrently with them.
type Sampler struct {
	cfg Config

	round sync.Mutex // one round at a time
	mu    struct {
		sync.RWMutex
		rings map[string]*ring // account id → its samples; guarded by mu
	}
}

// New loads the samples kept in the store and returns a Sampler.
func New(cfg Config) (*Sampler, error) {
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Sampler{cfg: cfg}
	s.mu.rings = map[string]*ring{}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

func sampleKey(accountID string, at time.Time) string {
	return fmt.Sprintf("usage/%s/%020d", accountID, max(at.Unix(), 0))
}

// load reads every kept sample into the rings (keys sort by time within
// an account). An account with more samples than the capacity (the
// capacity was lowered) keeps its newest; the rest are deleted.
func (s *Sampler) load() error {
	kvs, err := s.cfg.Store.Scan("usage/", 0)
	if err != nil {
		return fmt.Errorf("loading usage samples: %w", err)
	}
	b := new(state.Batch)
	for _, kv := range kvs {
		id, ts, ok := strings.Cut(strings.TrimPrefix(kv.Key, "usage/"), "/")
		if _, err := strconv.ParseInt(ts, 10, 64); !ok || err != nil {
			return fmt.Errorf("usage sample key %q: malformed", kv.Key)
		}
		var smp Sample
		if err := json.Unmarshal(kv.Value, &smp); err != nil {
			return fmt.Errorf("usage sample %s: %w", kv.Key, err)
		}
		r := s.mu.rings[id]
		if r == nil {
			r = newRing(s.cfg.Capacity)
			s.mu.rings[id] = r
		}
		if old, evicted := r.push(smp); evicted {
			b.Delete(sampleKey(id, old.At))
		}
	}
	if b.Len() > 0 {
		if err := s.cfg.Store.Apply(b); err != nil {
			return fmt.Errorf("trimming usage samples: %w", err)
		}
	}
	return nil
}

// Run takes a round of samples at once and then every interval until
// ctx ends.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Round(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.Error("sampling usage", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round samples every live account once, drops the samples of accounts
// that are gone, and stores the result in one batch. An account whose
// cell does not answer gets no sample this round (a gap in its chart,
// not a zero). It returns an error only if the store fails.
func (s *Sampler) Round(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()
	accts, err := s.cfg.Accounts.AllAccounts()
	if err != nil {
		return fmt.Errorf("listing accounts: %w", err)
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	taken := map[string]Sample{}
	live := map[string]bool{}
	for i := range accts {
		a := &accts[i]
		if a.Deleted {
			continue
		}
		live[a.ID] = true
		cctx, cancel := context.WithTimeout(ctx, cellTimeout)
		u, err := s.cfg.Cells.Usage(cctx, a.Cell, a.PublicKey)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, provision.ErrCellUnavailable) {
				s.cfg.Log.Warn("usage sample", "account", a.ID, "err", err)
			}
			continue
		}
		taken[a.ID] = Sample{At: now, Usage: *u}
	}
	return s.commit(now, taken, live)
}

// commit stores the round's samples and evictions, then applies them to
// the rings.
func (s *Sampler) commit(now time.Time, taken map[string]Sample, live map[string]bool) error {
	s.mu.RLock()
	b := new(state.Batch)
	var gone []string
	for id, r := range s.mu.rings {
		if !live[id] {
			gone = append(gone, id)
			for _, smp := range r.all() {
				b.Delete(sampleKey(id, smp.At))
			}
		}
	}
	for id, smp := range taken {
		r := s.mu.rings[id]
		if r != nil {
			if last, ok := r.last(); ok && !smp.At.After(last.At) {
				delete(taken, id) // two rounds in one second: keep the first
				continue
			}
			if old, full := r.oldest(); full {
				b.Delete(sampleKey(id, old.At))
			}
		}
		data, err := json.Marshal(smp)
		if err != nil {
			s.mu.RUnlock()
			return fmt.Errorf("encoding usage sample: %w", err)
		}
		b.Put(sampleKey(id, smp.At), data)
	}
	s.mu.RUnlock()
	if b.Len() == 0 {
		return nil
	}
	if err := s.cfg.Store.Apply(b); err != nil {
		return fmt.Errorf("storing usage samples: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range gone {
		delete(s.mu.rings, id)
	}
	for id, smp := range taken {
		r := s.mu.rings[id]
		if r == nil {
			r = newRing(s.cfg.Capacity)
			s.mu.rings[id] = r
		}
		r.push(smp)
	}
	return nil
}

// History returns the account's samples taken at or after since, oldest
// first (a copy the caller may keep).
func (s *Sampler) History(accountID string, since time.Time) []Sample {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.mu.rings[accountID]
	if r == nil {
		return nil
	}
	var out []Sample
	for _, smp := range r.all() {
		if !smp.At.Before(since) {
			out = append(out, smp)
		}
	}
	return out
}

// ring is a fixed-capacity circular buffer of samples in time order.
//
// Invariant: 0 <= n <= len(buf); the oldest sample is buf[start].
type ring struct {
	buf      []Sample
	start, n int
}

func newRing(capacity int) *ring { return &ring{buf: make([]Sample, capacity)} }

// push appends smp; when full it overwrites the oldest and returns it.
func (r *ring) push(smp Sample) (evicted Sample, ok bool) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = smp
		r.n++
		return Sample{}, false
	}
	evicted = r.buf[r.start]
	r.buf[r.start] = smp
	r.start = (r.start + 1) % len(r.buf)
	return evicted, true
}

// oldest returns the sample the next push would evict, if the ring is full.
func (r *ring) oldest() (Sample, bool) {
	if r.n < len(r.buf) {
		return Sample{}, false
	}
	return r.buf[r.start], true
}

func (r *ring) last() (Sample, bool) {
	if r.n == 0 {
		return Sample{}, false
	}
	return r.buf[(r.start+r.n-1)%len(r.buf)], true
}

func (r *ring) all() []Sample {
	out := make([]Sample, 0, r.n)
	for i := range r.n {
		out = append(out, r.buf[(r.start+i)%len(r.buf)])
	}
	return out
}
