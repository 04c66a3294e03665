package jetstream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Stream backups (STREAM.SNAPSHOT, api_snapshot.go) and restores
// (STREAM.RESTORE, api_restore.go) run beside the API, each on its own
// goroutines, for as long as the client takes to send or receive the
// chunks. They are bounded, per account and per node, since each holds
// a frozen view of the store (a snapshot pins what it reads until it
// ends) or a stream being filled, and the engine stops them before it
// closes its appliers.
const (
	maxAccountTransfers = 4
	maxNodeTransfers    = 32
)

// errTooManyTransfers refuses a backup or restore past the bounds.
var errTooManyTransfers = errors.New("too many backups and restores in progress")

// transfers tracks the engine's running backups and restores.
type transfers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	n      atomic.Int32
}

func newTransfers() *transfers {
	t := &transfers{}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// begin takes a slot for one transfer of a; the caller runs release
// when the transfer's goroutines are done. It fails past the bounds or
// once the engine is stopping.
func (t *transfers) begin(a *jsAccount) (release func(), err error) {
	if t.ctx.Err() != nil {
		return nil, errors.New("jetstream is stopping")
	}
	if a.transfers.Add(1) > maxAccountTransfers {
		a.transfers.Add(-1)
		return nil, errTooManyTransfers
	}
	if t.n.Add(1) > maxNodeTransfers {
		t.n.Add(-1)
		a.transfers.Add(-1)
		return nil, errTooManyTransfers
	}
	t.wg.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			t.n.Add(-1)
			a.transfers.Add(-1)
			t.wg.Done()
		})
	}, nil
}

// stop ends every transfer and waits for them.
func (t *transfers) stop() {
	t.cancel()
	t.wg.Wait()
}
