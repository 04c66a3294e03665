// Package usage samples what each account uses on its cell at a fixed
// interval and keeps the samples as a bounded ring per account in the
// control plane's store, so usage charts survive a restart. The console
// draws its charts from History.
//
// Key layout (in the same store as the records, a prefix of its own):
//
//	usage/<account id>/<unix seconds, 20 digits>   Sample (JSON)
//
// Invariant: an account holds at most Capacity samples. A round's puts
// and evictions are applied in one batch, and what the Sampler remembers
// of the store (a count and the newest time per account) changes only
// after that batch is durable.
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
// be called concurrently with them. The samples live only in the store:
// memory holds two numbers per account, whatever the capacity.
type Sampler struct {
	cfg Config

	mu   sync.Mutex      // one round at a time; guards kept
	kept map[string]kept // account id → what the store holds of it
}

// kept is what the store holds of one account's samples.
//
// Invariant: n is the number of the account's sample keys in the store,
// 1 <= n <= capacity, and last is the newest one's time.
type kept struct {
	n    int
	last int64 // unix seconds
}

// New reads what the store keeps and returns a Sampler. An account with
// more samples than the capacity (it was lowered) keeps its newest; the
// rest are deleted.
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
	s := &Sampler{cfg: cfg, kept: map[string]kept{}}
	kvs, err := cfg.Store.Scan(prefix, 0)
	if err != nil {
		return nil, fmt.Errorf("loading usage samples: %w", err)
	}
	byAccount := map[string][]string{} // keys in time order
	for _, kv := range kvs {
		id, secs, err := parseKey(kv.Key)
		if err != nil {
			return nil, err
		}
		byAccount[id] = append(byAccount[id], kv.Key)
		s.kept[id] = kept{n: len(byAccount[id]), last: secs}
	}
	b := new(state.Batch)
	for id, keys := range byAccount {
		if extra := len(keys) - cfg.Capacity; extra > 0 {
			for _, k := range keys[:extra] {
				b.Delete(k)
			}
			k := s.kept[id]
			k.n = cfg.Capacity
			s.kept[id] = k
		}
	}
	if b.Len() > 0 {
		if err := cfg.Store.Apply(b); err != nil {
			return nil, fmt.Errorf("trimming usage samples: %w", err)
		}
	}
	return s, nil
}

const prefix = "usage/"

func accountPrefix(id string) string { return prefix + id + "/" }

func sampleKey(id string, secs int64) string {
	return fmt.Sprintf("%s%020d", accountPrefix(id), max(secs, 0))
}

func parseKey(key string) (id string, secs int64, err error) {
	id, ts, ok := strings.Cut(strings.TrimPrefix(key, prefix), "/")
	secs, perr := strconv.ParseInt(ts, 10, 64)
	if !ok || perr != nil || id == "" {
		return "", 0, fmt.Errorf("usage sample key %q: malformed", key)
	}
	return id, secs, nil
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
// not a zero), and neither do the other accounts of that cell: one
// unreachable cell costs a round one timeout, not one per account. It
// returns an error only if the store fails.
func (s *Sampler) Round(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	accts, err := s.cfg.Accounts.AllAccounts()
	if err != nil {
		return fmt.Errorf("listing accounts: %w", err)
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	b := new(state.Batch)
	next := map[string]kept{}
	down := map[string]bool{}
	for i := range accts {
		a := &accts[i]
		if a.Deleted {
			continue
		}
		k, had := s.kept[a.ID]
		if had {
			next[a.ID] = k
		}
		if down[a.Cell] || (had && now.Unix() <= k.last) {
			continue // the cell is down, or this second is sampled already
		}
		cctx, cancel := context.WithTimeout(ctx, cellTimeout)
		u, err := s.cfg.Cells.Usage(cctx, a.Cell, a.PublicKey)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, provision.ErrCellUnavailable) {
				down[a.Cell] = true
			} else {
				s.cfg.Log.Warn("usage sample", "account", a.ID, "err", err)
			}
			continue
		}
		data, err := json.Marshal(Sample{At: now, Usage: *u})
		if err != nil {
			return fmt.Errorf("encoding usage sample: %w", err)
		}
		if k.n >= s.cfg.Capacity {
			// Evict the oldest: the first keys under the account.
			old, err := s.cfg.Store.Scan(accountPrefix(a.ID), k.n-s.cfg.Capacity+1)
			if err != nil {
				return fmt.Errorf("usage samples of %s: %w", a.ID, err)
			}
			for _, kv := range old {
				b.Delete(kv.Key)
				k.n--
			}
		}
		b.Put(sampleKey(a.ID, now.Unix()), data)
		next[a.ID] = kept{n: k.n + 1, last: now.Unix()}
	}
	for id := range s.kept {
		if _, live := next[id]; !live {
			gone, err := s.cfg.Store.Scan(accountPrefix(id), 0)
			if err != nil {
				return fmt.Errorf("usage samples of %s: %w", id, err)
			}
			for _, kv := range gone {
				b.Delete(kv.Key)
			}
		}
	}
	if b.Len() > 0 {
		if err := s.cfg.Store.Apply(b); err != nil {
			return fmt.Errorf("storing usage samples: %w", err)
		}
	}
	s.kept = next
	return nil
}

// History returns the account's samples taken at or after since, oldest
// first.
func (s *Sampler) History(accountID string, since time.Time) ([]Sample, error) {
	kvs, err := s.cfg.Store.Scan(accountPrefix(accountID), 0)
	if err != nil {
		return nil, fmt.Errorf("usage samples of %s: %w", accountID, err)
	}
	var out []Sample
	for _, kv := range kvs {
		if _, secs, err := parseKey(kv.Key); err != nil || secs < since.Unix() {
			continue
		}
		var smp Sample
		if err := json.Unmarshal(kv.Value, &smp); err != nil {
			return nil, fmt.Errorf("usage sample %s: %w", kv.Key, err)
		}
		out = append(out, smp)
	}
	return out, nil
}
