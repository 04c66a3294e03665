package usage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
)

// fakeCells answers each account's usage from a table; an account
// marked down answers as a cell that is not there.
type fakeCells struct {
	mu    sync.Mutex
	usage map[string]provision.Usage // by public key
	down  map[string]bool            // by cell
	asked map[string]int             // by public key
}

func (f *fakeCells) Usage(_ context.Context, cell, pub string) (*provision.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[pub]++
	if f.down[cell] {
		return nil, fmt.Errorf("%w: test cell down", provision.ErrCellUnavailable)
	}
	u := f.usage[pub]
	return &u, nil
}

func (f *fakeCells) set(pub string, msgs uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage[pub] = provision.Usage{Messages: msgs, StorageBytes: msgs * 10, Connections: 1}
}

type fakeAccounts struct{ list []records.Account }

func (f *fakeAccounts) AllAccounts() ([]records.Account, error) { return f.list, nil }

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type world struct {
	t     *testing.T
	store state.Store
	cells *fakeCells
	accts *fakeAccounts
	clock *clock
}

func newWorld(t *testing.T) *world {
	return &world{t: t, store: state.NewMem(),
		cells: &fakeCells{usage: map[string]provision.Usage{}, down: map[string]bool{}, asked: map[string]int{}},
		accts: &fakeAccounts{list: []records.Account{{ID: "acc_a", Cell: "c1", PublicKey: "PA"}, {ID: "acc_b", Cell: "c2", PublicKey: "PB"}}},
		clock: &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
}

func (w *world) sampler(capacity int) *Sampler {
	w.t.Helper()
	s, err := New(Config{Store: w.store, Accounts: w.accts, Cells: w.cells, Capacity: capacity, Now: w.clock.Now})
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

func (w *world) round(s *Sampler) {
	w.t.Helper()
	if err := s.Round(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

// keys counts the samples the store holds for an account.
func (w *world) keys(id string) int {
	w.t.Helper()
	kvs, err := w.store.Scan("usage/"+id+"/", 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(kvs)
}

// history is the account's samples since, or fails the test.
func (w *world) history(s *Sampler, id string, since time.Time) []Sample {
	w.t.Helper()
	smps, err := s.History(id, since)
	if err != nil {
		w.t.Fatal(err)
	}
	return smps
}

func messages(smps []Sample) []uint64 {
	var out []uint64
	for _, s := range smps {
		out = append(out, s.Messages)
	}
	return out
}

// TestRingIsBoundedAndKept: each account keeps its newest capacity
// samples, in memory and in the store alike, and a new Sampler on the
// same store (a restart) serves the same history.
func TestRingIsBoundedAndKept(t *testing.T) {
	w := newWorld(t)
	s := w.sampler(3)
	for i := range 5 {
		w.cells.set("PA", uint64(i))
		w.cells.set("PB", uint64(100+i))
		w.round(s)
		w.clock.advance(time.Minute)
	}
	since := w.clock.Now().Add(-time.Hour)
	if got := messages(w.history(s, "acc_a", since)); fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("acc_a history = %v, want [2 3 4]", got)
	}
	if got := messages(w.history(s, "acc_b", since)); fmt.Sprint(got) != "[102 103 104]" {
		t.Fatalf("acc_b history = %v", got)
	}
	if n := w.keys("acc_a"); n != 3 {
		t.Fatalf("store holds %d samples of acc_a, want 3", n)
	}
	again := w.sampler(3)
	if got := messages(w.history(again, "acc_a", since)); fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("after a restart acc_a history = %v, want [2 3 4]", got)
	}
	// The window cuts the oldest.
	if got := messages(w.history(again, "acc_a", w.clock.Now().Add(-2*time.Minute))); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("the last two minutes = %v, want [3 4]", got)
	}
	// A lower capacity at start keeps the newest and deletes the rest.
	small := w.sampler(2)
	if got := messages(w.history(small, "acc_a", since)); fmt.Sprint(got) != "[3 4]" || w.keys("acc_a") != 2 {
		t.Fatalf("capacity 2: history %v, %d kept", got, w.keys("acc_a"))
	}
	// The ring goes on from where it was.
	w.cells.set("PA", 5)
	w.round(small)
	if got := messages(w.history(small, "acc_a", since)); fmt.Sprint(got) != "[4 5]" || w.keys("acc_a") != 2 {
		t.Fatalf("after one more round: history %v, %d kept", got, w.keys("acc_a"))
	}
}

// TestUnavailableCellLeavesAGap: an account whose cell does not answer
// gets no sample (not a zero), the cell's other accounts are not asked
// in that round, and the other cells' accounts are sampled as usual.
func TestUnavailableCellLeavesAGap(t *testing.T) {
	w := newWorld(t)
	w.accts.list = append(w.accts.list, records.Account{ID: "acc_c", Cell: "c1", PublicKey: "PC"})
	s := w.sampler(10)
	w.cells.set("PA", 7)
	w.cells.set("PB", 8)
	w.round(s)
	w.clock.advance(time.Minute)
	w.cells.down["c1"] = true
	w.round(s)
	since := w.clock.Now().Add(-time.Hour)
	if got := messages(w.history(s, "acc_a", since)); fmt.Sprint(got) != "[7]" {
		t.Fatalf("acc_a = %v, want only the sample before the cell went down", got)
	}
	if got := w.history(s, "acc_b", since); len(got) != 2 {
		t.Fatalf("acc_b has %d samples, want 2", len(got))
	}
	if n := w.cells.asked["PC"]; n != 1 {
		t.Fatalf("acc_c was asked %d times, want once: its cell was down in the second round", n)
	}
	// The cell is back: the gap stays a gap, and sampling goes on.
	w.clock.advance(time.Minute)
	w.cells.down["c1"] = false
	w.round(s)
	if got := messages(w.history(s, "acc_a", since)); fmt.Sprint(got) != "[7 7]" {
		t.Fatalf("acc_a after the cell came back = %v", got)
	}
}

// TestDeletedAccountsSamplesGo: once an account is gone (or marked
// deleted), its samples leave memory and the store.
func TestDeletedAccountsSamplesGo(t *testing.T) {
	w := newWorld(t)
	s := w.sampler(10)
	w.round(s)
	w.clock.advance(time.Minute)
	w.accts.list[0].Deleted = true
	w.round(s)
	if got := w.history(s, "acc_a", time.Time{}); got != nil {
		t.Fatalf("a deleted account still has history %v", got)
	}
	if n := w.keys("acc_a"); n != 0 {
		t.Fatalf("store keeps %d samples of a deleted account", n)
	}
	if n := w.keys("acc_b"); n != 2 {
		t.Fatalf("acc_b keeps %d samples, want 2", n)
	}
}

// TestTwoRoundsInOneSecond keep the first sample: keys are by second.
func TestTwoRoundsInOneSecond(t *testing.T) {
	w := newWorld(t)
	s := w.sampler(10)
	w.cells.set("PA", 1)
	w.round(s)
	w.cells.set("PA", 2)
	w.round(s)
	if got := messages(w.history(s, "acc_a", time.Time{})); fmt.Sprint(got) != "[1]" || w.keys("acc_a") != 1 {
		t.Fatalf("history %v with %d keys, want [1] and 1", got, w.keys("acc_a"))
	}
}

// TestRunSamplesAtOnce: Run takes its first round before the first tick,
// so a fresh control plane has a point to draw, and stops with its
// context (here already ended: one round, then Run returns).
func TestRunSamplesAtOnce(t *testing.T) {
	w := newWorld(t)
	s := w.sampler(10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx, time.Hour)
	if got := w.history(s, "acc_a", time.Time{}); len(got) != 1 {
		t.Fatalf("Run took %d samples at start, want 1", len(got))
	}
}
