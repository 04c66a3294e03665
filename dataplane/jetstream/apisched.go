package jetstream

import (
	"runtime"
	"strings"
	"sync"
)

// API scheduling. Every account's $JS.API requests are served by one
// node-wide pool of workers, fairly per account, so that one tenant's
// flood or expensive requests slow that tenant and not its neighbours:
//
//   - each account has a lane: a bounded FIFO of its waiting requests;
//   - an account runs at most perAccount requests at once, so it can never
//     occupy every worker;
//   - a free worker takes one request from the lane at the front of the
//     ready list and puts the lane back at the end (round robin over the
//     accounts with work);
//   - a full lane refuses its own account's next request (10023), and
//     nobody else's.
//
// Workers are started on demand, up to a node-wide bound, and exit when
// no lane is ready, so an idle account costs a zeroed apiLane and an idle
// node no goroutine. Handlers may block on the apply path (a create waits
// for its fsync): a blocked handler holds one of its account's
// perAccount slots and one worker, and the worker bound is many times
// perAccount, so accounts waiting on their own slow requests leave
// workers for the others.
//
// Order: a lane starts its requests in arrival order. A request that may
// change the account (anything but the reads in apiReadOnly) runs alone
// in its lane: it starts once the lane's running requests are done, and
// nothing after it starts before it ends. So a create followed by an info
// from one client, sent without waiting, is answered as if served one
// after the other (nats-server's workers race there), while reads of one
// account run side by side.

// apiLimits size the scheduler.
type apiLimits struct {
	workers    int // goroutines serving requests, node-wide
	perAccount int // requests of one account running at once
	queue      int // requests waiting per account
	queueBytes int // bytes waiting per account
	totalBytes int // bytes waiting node-wide, shared fairly (see admitLocked)
}

// defaultAPILimits leave at least half the cores to other accounts
// whatever one account's API asks of the CPU.
func defaultAPILimits() apiLimits {
	return apiLimits{
		workers:    64,
		perAccount: max(1, runtime.GOMAXPROCS(0)/2),
		queue:      4096,
		queueBytes: 8 << 20,
		totalBytes: 64 << 20,
	}
}

// apiRequestOverhead is what a queued request costs beyond its bytes, so
// that the byte bounds also bound the count of tiny requests.
const apiRequestOverhead = 128

// apiScheduler is the node's pool of API workers and the ready list of
// the lanes they serve.
//
// Threading: submit is called on publishers' goroutines and never blocks
// on a handler; serve runs on the workers, up to limits.workers at once.
type apiScheduler struct {
	serve func(apiRequest)
	lim   apiLimits

	mu struct {
		sync.Mutex
		// ready lists, oldest first, the lanes whose head request may
		// start now. Invariant: a lane is in ready exactly when
		// lane.ready is set, and then canStart holds for it (only the
		// worker that takes it off the list starts its requests, and
		// nothing else can make its head unable to start).
		ready []*apiLane
		// workers counts the running worker goroutines; busy those of
		// them inside serve. Invariant: busy <= workers <= lim.workers.
		workers, busy int
		bytes         int // bytes waiting in all lanes
		lanes         int // lanes with requests waiting
		closed        bool
	}
	wg sync.WaitGroup // the workers
}

// apiLane is one account's share of the scheduler, all of it guarded by
// the scheduler's mu. Its zero value is an idle lane.
type apiLane struct {
	queue     []apiJob // waiting, oldest first
	bytes     int      // sum of queue's sizes
	running   int      // requests inside serve. Invariant: <= lim.perAccount
	exclusive bool     // the running request is one that runs alone
	ready     bool     // in the scheduler's ready list
}

// apiJob is a request waiting in its lane.
type apiJob struct {
	req       apiRequest
	exclusive bool
	size      int
}

func newAPIScheduler(lim apiLimits, serve func(apiRequest)) *apiScheduler {
	return &apiScheduler{serve: serve, lim: lim}
}

// submit queues req in lane l and reports whether it was accepted; a
// refused request is the caller's to answer (overloaded). exclusive
// requests run alone in their lane.
func (s *apiScheduler) submit(l *apiLane, req apiRequest, exclusive bool) bool {
	size := apiRequestOverhead + len(req.subject) + len(req.reply) + len(req.hdr) + len(req.body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || !s.admitLocked(l, size) {
		return false
	}
	if len(l.queue) == 0 {
		s.mu.lanes++
	}
	l.queue = append(l.queue, apiJob{req: req, exclusive: exclusive, size: size})
	l.bytes += size
	s.mu.bytes += size
	s.readyLocked(l)
	s.spawnLocked()
	return true
}

// admitLocked reports whether lane l may queue size more bytes. A lane
// always holds at least one request. Past the node-wide bound only lanes
// holding more than an equal share of it are refused, so another
// account's flood never makes this account's requests fail.
func (s *apiScheduler) admitLocked(l *apiLane, size int) bool {
	if len(l.queue) == 0 {
		return true
	}
	if len(l.queue) >= s.lim.queue || l.bytes+size > s.lim.queueBytes {
		return false
	}
	return fairShare(l.bytes, size, s.mu.bytes, s.lim.totalBytes, s.mu.lanes)
}

// fairShare reports whether a holder of mine bytes, one of holders
// sharing a pool that holds total bytes against limit, may add size more:
// anyone may within the limit; past it only a holder below an equal share
// of it. So one holder's flood never refuses the others, while what the
// pool holds past limit is each holder's share at most.
func fairShare(mine, size, total, limit, holders int) bool {
	return total+size <= limit || mine+size <= limit/max(1, holders)
}

// canStart reports whether l's oldest request may start now.
func (s *apiScheduler) canStart(l *apiLane) bool {
	if len(l.queue) == 0 || l.exclusive || l.running >= s.lim.perAccount {
		return false
	}
	return !l.queue[0].exclusive || l.running == 0
}

// readyLocked appends l to the ready list if its head may start and it
// is not listed yet.
func (s *apiScheduler) readyLocked(l *apiLane) {
	if !l.ready && s.canStart(l) {
		l.ready = true
		s.mu.ready = append(s.mu.ready, l)
	}
}

// spawnLocked starts workers while ready lanes outnumber the workers
// about to look for work, up to the bound.
func (s *apiScheduler) spawnLocked() {
	for s.mu.workers < s.lim.workers && s.mu.workers-s.mu.busy < len(s.mu.ready) {
		s.mu.workers++
		s.wg.Add(1)
		go s.work()
	}
}

// work serves one request at a time from the front of the ready list
// until no lane is ready.
func (s *apiScheduler) work() {
	defer s.wg.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.mu.ready) > 0 {
		l := s.mu.ready[0]
		s.mu.ready[0] = nil
		s.mu.ready = s.mu.ready[1:]
		if len(s.mu.ready) == 0 {
			s.mu.ready = nil // an idle node keeps no backing array
		}
		l.ready = false
		j := l.take()
		if len(l.queue) == 0 {
			s.mu.lanes--
		}
		s.mu.bytes -= j.size
		l.running++
		l.exclusive = j.exclusive
		s.mu.busy++
		// Back of the line: the lane's next request waits for every
		// other ready account's turn.
		s.readyLocked(l)
		s.spawnLocked()

		s.mu.Unlock()
		s.serve(j.req)
		s.mu.Lock()

		s.mu.busy--
		l.running--
		l.exclusive = false
		s.readyLocked(l)
	}
	s.mu.workers--
}

// take removes and returns the lane's oldest request.
func (l *apiLane) take() apiJob {
	j := l.queue[0]
	l.queue[0] = apiJob{}
	l.queue = l.queue[1:]
	if len(l.queue) == 0 {
		l.queue = nil // an idle lane keeps no backing array
	}
	l.bytes -= j.size
	return j
}

// close refuses new requests; those queued are still served.
func (s *apiScheduler) close() {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
}

// wait returns once every worker has exited: after close, once every
// queued request was served.
func (s *apiScheduler) wait() {
	s.wg.Wait()
}

// apiReadOnly reports whether the API operation op (the subject after
// the API prefix) only reads, and so may run beside other requests of
// its account. Anything else, including what no route serves, runs
// alone in its lane.
func apiReadOnly(op string) bool {
	switch op {
	case "INFO", "STREAM.NAMES", "STREAM.LIST":
		return true
	}
	for _, p := range [...]string{"STREAM.INFO.", "STREAM.MSG.GET.", "DIRECT.GET.",
		"CONSUMER.INFO.", "CONSUMER.NAMES.", "CONSUMER.LIST."} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}
