package provision

import (
	"context"
	"testing"

	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/tenant"
)

// TestReconnectedCellGetsDeletesAgain: a deleted account leaves a
// tombstone once its cell acknowledged the delete, and every time the
// cell (re)connects the next pass pushes the disabling JWT again (a cell
// that restarted may have lost it), until the cell takes it.
func TestReconnectedCellGetsDeletesAgain(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.account(t, tenant.DefaultLimits())
	live := w.account(t, tenant.DefaultLimits())
	deleted, err := w.repo.UpdateAccount(a.OrgID, a.ID, false, func(a *records.Account) error {
		a.Deleted = true
		return w.prov.Change(a)
	})
	if err != nil {
		t.Fatal(err)
	}
	if behind := w.prov.Reconcile(ctx); behind != 0 {
		t.Fatalf("%d behind", behind)
	}
	ts, err := w.repo.Tombstones("c1")
	if err != nil || len(ts) != 1 || ts[0].JWT != deleted.JWT {
		t.Fatalf("tombstones %+v, %v; want the deleted account's disabling JWT", ts, err)
	}
	before := len(w.pusher.got())
	if behind := w.prov.Reconcile(ctx); behind != 0 || len(w.pusher.got()) != before {
		t.Fatal("a pass without a reconnect pushed again")
	}

	// The cell reconnects while still flaky: the delete stays owed.
	w.pusher.setDown(true)
	w.prov.CellConnected("c1")
	if behind := w.prov.Reconcile(ctx); behind != 1 {
		t.Fatalf("%d behind with the cell down, want the deleted account", behind)
	}
	w.pusher.setDown(false)
	if behind := w.prov.Reconcile(ctx); behind != 0 {
		t.Fatalf("%d behind", behind)
	}
	pushes := w.pusher.got()[before:]
	if len(pushes) != 1 || pushes[0].pub != a.PublicKey || pushes[0].jwt != deleted.JWT || pushes[0].cell != "c1" {
		t.Fatalf("pushes after the reconnect: %+v, want the disabling JWT once", pushes)
	}
	if c := w.claims(t, pushes[0].jwt, a.PublicKey); c.Limits.Conn != 0 {
		t.Fatalf("re-pushed JWT allows %d connections", c.Limits.Conn)
	}
	// Once through, it is not pushed again until the next reconnect; a
	// reconnect of another cell does not push it.
	w.prov.CellConnected("c2")
	w.prov.Reconcile(ctx)
	if n := len(w.pusher.got()) - before; n != 1 {
		t.Fatalf("%d pushes, want 1", n)
	}
	if r := w.record(t, live); r.Deleted {
		t.Fatal("the live account was touched")
	}
}
