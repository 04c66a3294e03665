package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contrail/contrail/controlplane/records"
)

// Pusher sends account JWTs to cells; *Cells is the real one.
type Pusher interface {
	Push(ctx context.Context, cell, pub, jwt string) error
}

// Provisioner keeps cells in step with the records: every change to an
// account bumps its generation and re-signs its JWT; Sync pushes the
// latest JWT and records the generation the cell acknowledged; Run retries
// whatever is behind. Pushing is idempotent: a cell that gets the same JWT
// twice keeps it.
//
// Pushes of one account are serialized (a per-account lock held across
// the push), and each push sends the record's latest JWT, so a cell never
// ends on an older JWT than the last one acknowledged.
type Provisioner struct {
	Keys   *Keys
	repo   *records.Repo
	pusher Pusher
	log    *slog.Logger
	now    func() time.Time
	kick   chan struct{}

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by account id; guarded by mu
	// resend are the cells whose deleted accounts are pushed again on the
	// next pass (guarded by mu): a cell that (re)connects may have
	// restarted and lost a delete it acknowledged.
	resend map[string]bool

	// stats count what the provisioner did, for Collectors.
	stats struct {
		passes atomic.Uint64 // reconcile passes completed
		pushed atomic.Uint64 // pushes a cell acknowledged
		failed atomic.Uint64 // pushes that failed
		behind atomic.Int64  // accounts behind after the last pass
	}
}

// New returns a Provisioner.
func New(keys *Keys, repo *records.Repo, pusher Pusher, log *slog.Logger) *Provisioner {
	return &Provisioner{Keys: keys, repo: repo, pusher: pusher, log: log, now: time.Now,
		kick: make(chan struct{}, 1), locks: map[string]*sync.Mutex{}, resend: map[string]bool{}}
}

// SetPusher sets the pusher after construction (cells are dialled with a
// callback into the provisioner).
func (p *Provisioner) SetPusher(pusher Pusher) { p.pusher = pusher }

// Change re-signs the account after change modified it and bumps its
// generation, inside the repo's update. Use it as (or inside) the change
// function of records.Repo.UpdateAccount.
func (p *Provisioner) Change(a *records.Account) error {
	token, err := p.Keys.SignAccount(a, p.now())
	if err != nil {
		return err
	}
	a.JWT = token
	a.Generation++
	return nil
}

func (p *Provisioner) lock(id string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		p.locks[id] = l
	}
	return l
}

// Sync pushes the account's latest JWT to its cell and records it as
// pushed; a deleted account is purged once its cell has the disabling JWT.
// On failure the account stays behind and Run retries it.
func (p *Provisioner) Sync(ctx context.Context, orgID, id string) error {
	l := p.lock(id)
	l.Lock()
	defer l.Unlock()
	a, err := p.repo.AccountRecord(orgID, id)
	if errors.Is(err, records.ErrNotFound) {
		return nil // purged meanwhile
	}
	if err != nil {
		return err
	}
	if a.Pushed >= a.Generation {
		return nil
	}
	if p.pusher == nil {
		return fmt.Errorf("%w: no cells", ErrCellUnavailable)
	}
	if err := p.pusher.Push(ctx, a.Cell, a.PublicKey, a.JWT); err != nil {
		p.stats.failed.Add(1)
		return fmt.Errorf("pushing account %s to %s: %w", a.ID, a.Cell, err)
	}
	p.stats.pushed.Add(1)
	if a.Deleted {
		if err := p.repo.PurgeAccount(orgID, id, a.Generation, p.now()); err != nil {
			return fmt.Errorf("purging account %s: %w", a.ID, err)
		}
		p.log.Info("account removed", "account", a.ID, "public_key", a.PublicKey, "cell", a.Cell)
		return nil
	}
	_, err = p.repo.UpdateAccount(orgID, id, true, func(cur *records.Account) error {
		cur.Pushed = max(cur.Pushed, a.Generation)
		return nil
	})
	if err == nil {
		p.log.Debug("account pushed", "account", a.ID, "generation", a.Generation, "cell", a.Cell)
	}
	return err
}

// CellConnected is called whenever the connection to a cell is
// (re)established: the next pass pushes everything the cell is behind
// on, and the disabling JWTs of the cell's deleted accounts again, since
// a cell that restarted may have lost a delete it had acknowledged.
func (p *Provisioner) CellConnected(cell string) {
	p.mu.Lock()
	p.resend[cell] = true
	p.mu.Unlock()
	p.Kick()
}

// Kick asks Run to reconcile now (a cell came back).
func (p *Provisioner) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run reconciles every interval and on Kick until ctx ends.
func (p *Provisioner) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.Reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
	}
}

// Reconcile pushes every account whose cell is behind, once, and returns
// how many are still behind.
func (p *Provisioner) Reconcile(ctx context.Context) int {
	accts, err := p.repo.AllAccounts()
	if err != nil {
		p.log.Error("reconcile: listing accounts", "err", err)
		return -1
	}
	behind := 0
	for _, a := range accts {
		if a.Pushed >= a.Generation {
			continue
		}
		if err := p.Sync(ctx, a.OrgID, a.ID); err != nil {
			behind++
			p.log.Warn("reconcile: push failed; will retry", "account", a.ID, "cell", a.Cell, "err", err)
		}
	}
	behind += p.resendDeletes(ctx)
	p.stats.behind.Store(int64(behind))
	p.stats.passes.Add(1)
	return behind
}

// resendDeletes pushes the disabling JWT of every deleted account of each
// cell marked by CellConnected, and returns how many it could not push
// because the cell is unavailable (the cell stays marked, so the next
// pass tries again). A cell that refuses one is logged, not retried.
func (p *Provisioner) resendDeletes(ctx context.Context) int {
	p.mu.Lock()
	cells := make([]string, 0, len(p.resend))
	for c := range p.resend {
		cells = append(cells, c)
	}
	p.mu.Unlock()
	behind := 0
	for _, cell := range cells {
		ts, err := p.repo.Tombstones(cell)
		if err != nil {
			p.log.Error("reconcile: listing deleted accounts", "cell", cell, "err", err)
			behind++
			continue
		}
		missed := 0
		for _, t := range ts {
			if p.pusher == nil {
				missed++
				continue
			}
			if err := p.pusher.Push(ctx, cell, t.PublicKey, t.JWT); err != nil {
				p.stats.failed.Add(1)
				if errors.Is(err, ErrCellUnavailable) {
					missed++
				} else {
					p.log.Warn("reconcile: cell refused a deleted account's JWT", "account", t.AccountID, "cell", cell, "err", err)
				}
				continue
			}
			p.stats.pushed.Add(1)
		}
		if missed == 0 {
			p.mu.Lock()
			delete(p.resend, cell)
			p.mu.Unlock()
			if len(ts) > 0 {
				p.log.Debug("deleted accounts pushed again", "cell", cell, "count", len(ts))
			}
		}
		behind += missed
	}
	return behind
}
