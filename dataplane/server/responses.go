package server

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
)

// Responses to requests that crossed a service import come back through a
// response route: the request's reply was rewritten to a fresh subject
// _R_.<account prefix>.<random> in the account that serves it, and one
// subscription there (_R_.<prefix>.>) looks the subject up and delivers
// the response to the requester's original reply subject in its own
// account.
//
// A route lives as the export's response type says: Singleton routes end
// with their first response; Stream and Chunked ones live on while
// responses keep coming within the response threshold (a Chunked one also
// ends at an empty message). Every route ends after the threshold without
// a response, or at once when the request or a response reached nobody,
// so routes of lost requests do not pile up.

// maxRoutes bounds the open response routes of one account; requests that
// would need more are dropped (and their requesters time out).
const maxRoutes = 100_000

// respTable holds one account's response routes.
type respTable struct {
	acc    *Account
	prefix string // "_R_.xxxxx."
	sub    *subscription

	mu struct {
		sync.Mutex
		routes map[string]*respRoute // by _R_ subject; guarded by mu
		timer  *time.Timer           // the next sweep; nil when none is due; guarded by mu
		due    time.Time             // when timer fires; guarded by mu
		gen    uint64                // numbers timers; a stale one does nothing; guarded by mu
	}
	lastWarn atomic.Int64 // unix seconds of the last "table full" warning
}

// respRoute is where responses to one request go.
type respRoute struct {
	to       *Account // the requester's account
	reply    string   // the requester's reply subject there
	single   bool     // Singleton: the first response ends the route
	chunked  bool     // Chunked: an empty response ends the route
	ttl      time.Duration
	deadline time.Time // no response by then ends the route
}

// base62 spells random tokens of _R_ subjects.
const base62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// randToken appends n random base62 characters (ten per 64 random bits).
func randToken(b []byte, n int) []byte {
	var v uint64
	for i := range n {
		if i%10 == 0 {
			v = rand.Uint64()
		}
		b = append(b, base62[v%62])
		v /= 62
	}
	return b
}

// responses returns the account's response routes, creating the table and
// its subscription the first time a request crosses into the account.
func (a *Account) responses() *respTable {
	if t := a.links.resp.Load(); t != nil {
		return t
	}
	a.links.respMu.Lock()
	defer a.links.respMu.Unlock()
	if t := a.links.resp.Load(); t != nil {
		return t
	}
	t := &respTable{acc: a, prefix: string(randToken([]byte("_R_."), 5)) + "."}
	t.mu.routes = map[string]*respRoute{}
	t.sub = &subscription{acc: a, subject: []byte(t.prefix + ">"), fwd: t}
	if err := a.insertSub(t.prefix+">", "", t.sub); err != nil {
		// The prefix is made of valid tokens; this cannot fail.
		panic("response route subscription: " + err.Error())
	}
	a.links.resp.Store(t)
	return t
}

// add opens a route for a request whose requester waits on reply in
// account to; it returns the subject the request goes out with. false
// means the table is full.
func (t *respTable) add(to *Account, reply []byte, respType string, ttl time.Duration, now time.Time) (string, bool) {
	key := string(randToken([]byte(t.prefix), 11))
	r := &respRoute{
		to: to, reply: string(reply), ttl: ttl, deadline: now.Add(ttl),
		single:  respType == "" || respType == jwt.ResponseTypeSingleton,
		chunked: respType == jwt.ResponseTypeChunked,
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.routes) >= maxRoutes {
		t.sweepLocked(now)
		if len(t.mu.routes) >= maxRoutes {
			if last := t.lastWarn.Load(); now.Unix() > last && t.lastWarn.CompareAndSwap(last, now.Unix()) {
				t.acc.srv.log.Warn("too many open service responses, dropping requests", "account", t.acc.name, "max", maxRoutes)
			}
			return "", false
		}
	}
	t.mu.routes[key] = r
	if t.mu.timer == nil || r.deadline.Before(t.mu.due) {
		t.armLocked(r.deadline, now)
	}
	return key, true
}

// take finds the route of a response published to subj, ending it if
// this response is its last. eof marks an empty response.
func (t *respTable) take(subj []byte, eof bool, now time.Time) (to *Account, reply string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.mu.routes[string(subj)]
	switch {
	case r == nil:
		return nil, "", false
	case !now.Before(r.deadline):
		delete(t.mu.routes, string(subj))
		return nil, "", false
	case r.single || (r.chunked && eof):
		delete(t.mu.routes, string(subj))
	default:
		r.deadline = now.Add(r.ttl)
	}
	return r.to, r.reply, true
}

// remove ends a route.
func (t *respTable) remove(key string) {
	t.mu.Lock()
	delete(t.mu.routes, key)
	t.mu.Unlock()
}

// open is the number of open routes.
func (t *respTable) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.routes)
}

// armLocked schedules the next sweep for at, replacing any scheduled.
func (t *respTable) armLocked(at, now time.Time) {
	if t.mu.timer != nil {
		t.mu.timer.Stop()
	}
	t.mu.gen++
	gen := t.mu.gen
	t.mu.due = at
	t.mu.timer = time.AfterFunc(at.Sub(now), func() { t.sweep(gen) })
}

// sweep ends the routes whose deadline passed and schedules the next
// sweep for the earliest remaining deadline. A timer replaced since it
// was set (gen is stale) does nothing.
func (t *respTable) sweep(gen uint64) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.mu.gen {
		return
	}
	t.mu.timer = nil
	if next := t.sweepLocked(now); !next.IsZero() {
		t.armLocked(next, now)
	}
}

// sweepLocked ends expired routes and returns the earliest deadline left
// (zero if none).
func (t *respTable) sweepLocked(now time.Time) time.Time {
	var next time.Time
	for k, r := range t.mu.routes {
		if !now.Before(r.deadline) {
			delete(t.mu.routes, k)
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	return next
}

func (t *respTable) stream() bool { return false }

// forward routes a response back to the requester.
func (t *respTable) forward(s *sender, subj, reply []byte, hdrLen int, msg []byte) {
	if s.links.depth >= maxLinkDepth {
		return
	}
	now := time.Now()
	to, dest, ok := t.take(subj, hdrLen < 0 && len(msg) == 0, now)
	if !ok {
		return
	}
	// A response that itself expects an answer gets a route back.
	var nreply []byte
	var back *respTable
	var backKey string
	if len(reply) > 0 {
		if len(reply) >= len(jsAckPrefix) && string(reply[:len(jsAckPrefix)]) == string(jsAckPrefix) {
			nreply = reply
		} else {
			back = to.responses()
			if backKey, ok = back.add(t.acc, reply, jwt.ResponseTypeSingleton, defaultRespTTL, now); ok {
				nreply = []byte(backKey)
			}
		}
	}
	d := []byte(dest)
	r := to.subs.MatchOnce(d)
	saved := s.links
	s.links = linkCtx{depth: saved.depth + 1}
	delivered := !r.Empty() && s.deliverLinked(r, true, d, nreply, hdrLen, msg)
	s.links = saved
	if !delivered {
		t.remove(string(subj))
		if nreply != nil && back != nil {
			back.remove(backKey)
		}
	}
}
