package jetstream

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// schedHarness drives an apiScheduler whose handler blocks every request
// until the test releases it by name: starts are awaited on a channel,
// so the tests never sleep.
type schedHarness struct {
	t       *testing.T
	s       *apiScheduler
	started chan string
	release map[string]chan struct{}
}

func newSchedHarness(t *testing.T, lim apiLimits) *schedHarness {
	h := &schedHarness{t: t, started: make(chan string, 1024), release: map[string]chan struct{}{}}
	h.s = newAPIScheduler(lim, func(req apiRequest) {
		h.started <- req.subject
		<-h.gate(req.subject)
	})
	t.Cleanup(func() {
		for _, ch := range h.release {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		h.s.close()
		h.s.wait()
	})
	return h
}

// gate is the channel request name waits on; made at submit, before any
// worker can look it up.
func (h *schedHarness) gate(name string) chan struct{} {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.release[name]
}

// submit queues request name (names are unique) and reports whether it
// was accepted.
func (h *schedHarness) submit(l *apiLane, name string, exclusive bool) bool {
	h.s.mu.Lock()
	h.release[name] = make(chan struct{})
	h.s.mu.Unlock()
	return h.s.submit(l, apiRequest{subject: name}, exclusive)
}

func (h *schedHarness) mustSubmit(l *apiLane, name string, exclusive bool) {
	h.t.Helper()
	if !h.submit(l, name, exclusive) {
		h.t.Fatalf("%s was refused", name)
	}
}

func (h *schedHarness) done(name string) { close(h.gate(name)) }

// next returns the name of the next request to start.
func (h *schedHarness) next() string {
	h.t.Helper()
	select {
	case name := <-h.started:
		return name
	case <-time.After(10 * time.Second):
		h.t.Fatal("no request started")
		return ""
	}
}

// expect awaits the start of exactly the requests named, in any order.
func (h *schedHarness) expect(names ...string) {
	h.t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for range names {
		if got := h.next(); !want[got] {
			h.t.Fatalf("%s started; want %v", got, names)
		}
	}
}

// state reads a lane's counters under the scheduler's lock.
func (h *schedHarness) state(l *apiLane) (waiting, running int) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return len(l.queue), l.running
}

// wantLane checks a lane's counters. The scheduler decides a start under
// its lock before calling the handler, so once the starts and ends the
// test caused are through, the counters say whether anything more began.
func (h *schedHarness) wantLane(l *apiLane, waiting, running int) {
	h.t.Helper()
	if w, r := h.state(l); w != waiting || r != running {
		h.t.Fatalf("lane has %d waiting, %d running; want %d, %d", w, r, waiting, running)
	}
}

// waitLane waits until a released request's end has been counted (its
// worker takes the lock after the handler returns) and the lane's
// counters are as given.
func (h *schedHarness) waitLane(l *apiLane, waiting, running int) {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if w, r := h.state(l); w == waiting && r == running {
			return
		}
		if time.Now().After(deadline) {
			h.wantLane(l, waiting, running)
		}
		runtime.Gosched()
	}
}

func testLimits() apiLimits {
	return apiLimits{workers: 8, perAccount: 2, queue: 100, queueBytes: 1 << 20, totalBytes: 16 << 20}
}

// One account can never run more than its cap, and another account's
// request starts at once beside it.
func TestAPISchedPerAccountCap(t *testing.T) {
	h := newSchedHarness(t, testLimits())
	var a, b apiLane
	for i := range 6 {
		h.mustSubmit(&a, "a"+string(rune('0'+i)), false)
	}
	h.expect("a0", "a1")
	h.wantLane(&a, 4, 2)
	h.mustSubmit(&b, "b0", false)
	h.expect("b0")
	h.wantLane(&a, 4, 2)
	h.done("a0")
	h.expect("a2")
	h.wantLane(&a, 3, 2)
}

// With one worker, accounts with work take turns, one request each.
func TestAPISchedRoundRobin(t *testing.T) {
	lim := testLimits()
	lim.workers = 1
	h := newSchedHarness(t, lim)
	var a, b, c apiLane
	h.mustSubmit(&a, "a0", false)
	h.expect("a0")
	for _, n := range []string{"a1", "a2", "a3"} {
		h.mustSubmit(&a, n, false)
	}
	h.mustSubmit(&b, "b0", false)
	h.mustSubmit(&b, "b1", false)
	h.mustSubmit(&c, "c0", false)
	var order []string
	prev := "a0"
	for range 6 {
		h.done(prev)
		prev = h.next()
		order = append(order, prev)
	}
	h.done(prev)
	if got, want := strings.Join(order, " "), "a1 b0 c0 a2 b1 a3"; got != want {
		t.Fatalf("served %s; want %s", got, want)
	}
}

// With every worker blocked in one account's handlers (waiting on the
// apply path, say), the next free worker goes to the account that waited,
// not to the blocked account's next request.
func TestAPISchedWorkerBound(t *testing.T) {
	lim := testLimits()
	lim.workers = 2
	h := newSchedHarness(t, lim)
	var a, b apiLane
	for _, n := range []string{"a0", "a1", "a2"} {
		h.mustSubmit(&a, n, false)
	}
	h.expect("a0", "a1")
	h.mustSubmit(&b, "b0", false)
	h.wantLane(&b, 1, 0)
	h.s.mu.Lock()
	workers := h.s.mu.workers
	h.s.mu.Unlock()
	if workers != 2 {
		t.Fatalf("%d workers; the bound is 2", workers)
	}
	h.done("a0")
	h.expect("b0")
	h.wantLane(&a, 1, 1)
	h.done("b0")
	h.expect("a2")
}

// A change runs alone in its lane, in arrival order: reads queued after
// it wait for it, and it waits for the reads before it.
func TestAPISchedExclusiveOrder(t *testing.T) {
	h := newSchedHarness(t, testLimits())
	var a, b apiLane
	h.mustSubmit(&a, "create", true)
	h.mustSubmit(&a, "info1", false)
	h.mustSubmit(&a, "info2", false)
	h.expect("create")
	h.wantLane(&a, 2, 1)
	// Another account is not held up by it.
	h.mustSubmit(&b, "b-create", true)
	h.expect("b-create")
	h.done("b-create")

	h.done("create")
	h.expect("info1", "info2")
	h.mustSubmit(&a, "update", true)
	h.mustSubmit(&a, "info3", false)
	h.wantLane(&a, 2, 2)
	h.done("info1")
	h.waitLane(&a, 2, 1) // the update still waits for info2
	h.done("info2")
	h.expect("update")
	h.wantLane(&a, 1, 1)
	h.done("update")
	h.expect("info3")
}

// A full lane refuses its own account's requests only.
func TestAPISchedOverloadPerAccount(t *testing.T) {
	lim := testLimits()
	lim.perAccount, lim.queue = 1, 3
	h := newSchedHarness(t, lim)
	var a, b apiLane
	h.mustSubmit(&a, "a0", false)
	h.expect("a0")
	for _, n := range []string{"a1", "a2", "a3"} {
		h.mustSubmit(&a, n, false)
	}
	if h.submit(&a, "a4", false) {
		t.Fatal("a4 was accepted past the account's queue bound")
	}
	h.mustSubmit(&b, "b0", false)
	h.expect("b0")
	h.done("a0")
	h.expect("a1")
	h.mustSubmit(&a, "a5", false)
}

// Past the node-wide byte bound, the account holding more than its share
// is refused and the others are not.
func TestAPISchedOverloadFairShare(t *testing.T) {
	lim := testLimits()
	lim.perAccount = 1
	lim.totalBytes = 8 * (apiRequestOverhead + 2)
	h := newSchedHarness(t, lim)
	var a, b apiLane
	h.mustSubmit(&a, "a0", false)
	h.expect("a0")
	n := 0
	for ; h.submit(&a, "a"+string(rune('A'+n)), false); n++ {
	}
	if n != 8 {
		t.Fatalf("a queued %d requests alone; want the node's 8", n)
	}
	h.mustSubmit(&b, "b0", false)
	h.expect("b0")
	// b holds less than half of the node's bound: accepted though the
	// node is past it; a, holding more, is refused.
	for _, n := range []string{"b1", "b2", "b3", "b4"} {
		h.mustSubmit(&b, n, false)
	}
	if h.submit(&b, "b5", false) {
		t.Fatal("b5 was accepted past b's share")
	}
	if h.submit(&a, "aZ", false) {
		t.Fatal("a was accepted past its share")
	}
}

// Once the work is done no worker is left and no lane holds memory;
// after close, requests are refused.
func TestAPISchedIdle(t *testing.T) {
	h := newSchedHarness(t, testLimits())
	var a apiLane
	h.mustSubmit(&a, "a0", false)
	h.mustSubmit(&a, "a1", true)
	h.expect("a0")
	h.done("a0")
	h.expect("a1")
	h.done("a1")
	h.s.close()
	h.s.wait()
	if h.submit(&a, "late", false) {
		t.Fatal("accepted after close")
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.mu.workers != 0 || h.s.mu.busy != 0 || h.s.mu.ready != nil || h.s.mu.bytes != 0 || h.s.mu.lanes != 0 {
		t.Fatalf("scheduler not idle: %d workers, %d busy, %d ready, %d bytes, %d lanes",
			h.s.mu.workers, h.s.mu.busy, len(h.s.mu.ready), h.s.mu.bytes, h.s.mu.lanes)
	}
	if a.queue != nil || a.bytes != 0 || a.running != 0 || a.ready {
		t.Fatalf("lane not idle: %+v", a)
	}
}

// Requests queued before close are still served.
func TestAPISchedCloseDrains(t *testing.T) {
	lim := testLimits()
	lim.perAccount = 1
	h := newSchedHarness(t, lim)
	var a apiLane
	h.mustSubmit(&a, "a0", false)
	h.mustSubmit(&a, "a1", false)
	h.expect("a0")
	h.s.close()
	h.done("a0")
	h.expect("a1")
	h.done("a1")
	h.s.wait()
}

func TestAPIReadOnly(t *testing.T) {
	for op, want := range map[string]bool{
		"INFO": true, "STREAM.INFO.S": true, "STREAM.NAMES": true, "STREAM.LIST": true,
		"STREAM.MSG.GET.S": true, "CONSUMER.INFO.S.C": true, "CONSUMER.NAMES.S": true,
		"CONSUMER.LIST.S": true, "DIRECT.GET.S": true,
		"STREAM.CREATE.S": false, "STREAM.UPDATE.S": false, "STREAM.DELETE.S": false,
		"STREAM.PURGE.S": false, "STREAM.MSG.DELETE.S": false, "CONSUMER.CREATE.S.C": false,
		"CONSUMER.DELETE.S.C": false, "CONSUMER.PAUSE.S.C": false, "STREAM.INFO": false,
		"NOPE": false, "": false,
	} {
		if got := apiReadOnly(op); got != want {
			t.Errorf("apiReadOnly(%q) = %v, want %v", op, got, want)
		}
	}
}
