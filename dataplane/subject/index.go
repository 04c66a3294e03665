package subject

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrInvalidSubject is returned when a subscription's subject is not a
// valid filter.
var ErrInvalidSubject = errors.New("invalid subject")

// maxCache bounds the match cache. Past it the cache is dropped whole: a
// workload with that many distinct hot subjects gains little from caching.
const maxCache = 4096

// maxScanOnChange bounds the cached entries a wildcard filter's change
// checks one by one; past it the cache is dropped whole (see
// invalidateLocked), so a change costs at most this many matches.
const maxScanOnChange = 256

// Result is the set of subscribers a published subject reaches. A Result is
// immutable once returned: it is shared by the cache and every caller.
type Result[S comparable] struct {
	// Plain subscribers each receive the message.
	Plain []S
	// Queues holds one slice per queue group; one member of each receives
	// it. Members of same-named groups on different filters form one group.
	Queues [][]S
	qnames []string
}

// Empty reports whether nobody is interested.
func (r *Result[S]) Empty() bool { return len(r.Plain) == 0 && len(r.Queues) == 0 }

// Index maps subscription filters to subscribers and answers which
// subscribers a literal subject reaches. Literal lookups are cached.
//
// Index is safe for concurrent use: matches share a read lock, changes take
// the write lock and invalidate the affected cache entries.
type Index[S comparable] struct {
	mu struct {
		sync.RWMutex
		root  *node[S]
		cache map[string]*Result[S] // guarded by mu; values immutable
		count int                   // guarded by mu
	}
	gen atomic.Uint64 // bumped on every change

	inserts, removes, matches, hits atomic.Uint64
}

// Stats are an index's counters, as /subsz reports them.
type Stats struct {
	Subscriptions int
	CacheEntries  int
	Inserts       uint64
	Removes       uint64
	Matches       uint64
	CacheHits     uint64
}

// Stats snapshots the index's counters.
func (idx *Index[S]) Stats() Stats {
	idx.mu.RLock()
	st := Stats{Subscriptions: idx.mu.count, CacheEntries: len(idx.mu.cache)}
	idx.mu.RUnlock()
	st.Inserts, st.Removes = idx.inserts.Load(), idx.removes.Load()
	st.Matches, st.CacheHits = idx.matches.Load(), idx.hits.Load()
	return st
}

// node is one token position of a trie of filters, shared by Index and
// Set: next holds the literal tokens that follow, pwc a '*', fwc a '>';
// plain and queues are the entries of the filter spelled by the path to
// n, so every entry at one node has the same filter.
type node[S comparable] struct {
	next   map[string]*node[S]
	pwc    *node[S]
	fwc    *node[S]
	plain  []S
	queues map[string][]S
}

func (n *node[S]) empty() bool {
	return len(n.next) == 0 && n.pwc == nil && n.fwc == nil && len(n.plain) == 0 && len(n.queues) == 0
}

// NewIndex returns an empty index.
func NewIndex[S comparable]() *Index[S] {
	idx := &Index[S]{}
	idx.mu.root = &node[S]{}
	idx.mu.cache = make(map[string]*Result[S])
	return idx
}

// Generation changes whenever the set of subscriptions changes, so callers
// can keep their own caches of Match results.
func (idx *Index[S]) Generation() uint64 { return idx.gen.Load() }

// Count is the number of subscriptions held.
func (idx *Index[S]) Count() int {
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	return idx.mu.count
}

// Insert adds s as a subscriber to filter, in queue group queue if queue
// is not empty.
func (idx *Index[S]) Insert(filter, queue string, s S) error {
	if !ValidFilterString(filter) {
		return ErrInvalidSubject
	}
	idx.mu.Lock()
	defer idx.mu.Unlock()
	n := idx.mu.root.path(filter)
	if queue == "" {
		n.plain = append(n.plain, s)
	} else {
		if n.queues == nil {
			n.queues = make(map[string][]S)
		}
		n.queues[queue] = append(n.queues[queue], s)
	}
	idx.mu.count++
	idx.inserts.Add(1)
	idx.invalidateLocked(filter)
	return nil
}

// Remove deletes s from filter (and queue); it reports whether s was there.
func (idx *Index[S]) Remove(filter, queue string, s S) bool {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	var path [32]*node[S]
	nodes := path[:0]
	n := idx.mu.root
	for tok, rest, more := cut(filter); n != nil; tok, rest, more = cut(rest) {
		nodes = append(nodes, n)
		n = n.child(tok, false)
		if !more {
			break
		}
	}
	if n == nil || !n.remove(queue, s) {
		return false
	}
	idx.mu.count--
	idx.removes.Add(1)
	idx.pruneLocked(nodes, n, filter)
	idx.invalidateLocked(filter)
	return true
}

// path returns the node filter ends at below n, creating what is missing.
func (n *node[S]) path(filter string) *node[S] {
	for tok, rest, more := cut(filter); ; tok, rest, more = cut(rest) {
		n = n.child(tok, true)
		if !more {
			return n
		}
	}
}

func (n *node[S]) child(tok string, create bool) *node[S] {
	slot := &n.pwc
	switch tok {
	case "*":
	case ">":
		slot = &n.fwc
	default:
		c := n.next[tok]
		if c == nil && create {
			if n.next == nil {
				n.next = make(map[string]*node[S])
			}
			c = &node[S]{}
			n.next[tok] = c
		}
		return c
	}
	if *slot == nil && create {
		*slot = &node[S]{}
	}
	return *slot
}

func (n *node[S]) remove(queue string, s S) bool {
	if queue == "" {
		var ok bool
		n.plain, ok = removeFrom(n.plain, s)
		return ok
	}
	members, ok := removeFrom(n.queues[queue], s)
	if !ok {
		return false
	}
	if len(members) == 0 {
		delete(n.queues, queue)
	} else {
		n.queues[queue] = members
	}
	return true
}

func removeFrom[S comparable](list []S, s S) ([]S, bool) {
	for i, v := range list {
		if v == s {
			last := len(list) - 1
			list[i] = list[last]
			var zero S
			list[last] = zero
			return list[:last], true
		}
	}
	return list, false
}

// pruneLocked drops nodes left empty by a removal, leaf first, so the trie
// does not grow with every subject ever subscribed to.
func (idx *Index[S]) pruneLocked(parents []*node[S], leaf *node[S], filter string) {
	toks := make([]string, 0, len(parents))
	for tok, rest, more := cut(filter); ; tok, rest, more = cut(rest) {
		toks = append(toks, tok)
		if !more {
			break
		}
	}
	child := leaf
	for i := len(parents) - 1; i >= 0 && child.empty(); i-- {
		p := parents[i]
		switch tok := toks[i]; tok {
		case "*":
			p.pwc = nil
		case ">":
			p.fwc = nil
		default:
			delete(p.next, tok)
		}
		child = p
	}
}

// invalidateLocked drops cached results the changed filter could affect.
func (idx *Index[S]) invalidateLocked(filter string) {
	idx.gen.Add(1)
	if IsLiteral(filter) {
		delete(idx.mu.cache, filter)
		return
	}
	if len(idx.mu.cache) > maxScanOnChange {
		// Checking every entry against the filter made each wildcard
		// change cost up to maxCache matches: a partition's new leader
		// subscribing the ack subjects of 10,000 consumers spent 3 s
		// here, and every other node as long installing them as remote
		// interest. Matching afresh refills the cache.
		clear(idx.mu.cache)
		return
	}
	for k := range idx.mu.cache {
		if Matches(filter, k) {
			delete(idx.mu.cache, k)
		}
	}
}

// Match returns the subscribers a published literal subject reaches. The
// result must not be modified.
func (idx *Index[S]) Match(literal []byte) *Result[S] {
	idx.matches.Add(1)
	idx.mu.RLock()
	if r, ok := idx.mu.cache[string(literal)]; ok {
		idx.mu.RUnlock()
		idx.hits.Add(1)
		return r
	}
	r := &Result[S]{}
	matchNode(idx.mu.root, literal, r)
	r.qnames = nil
	gen := idx.gen.Load() // stable: changes bump it under the write lock
	idx.mu.RUnlock()

	idx.mu.Lock()
	// Cache only if nothing changed since the match: a change in between
	// may have made r stale after invalidating the entry we would insert.
	if idx.gen.Load() == gen {
		if len(idx.mu.cache) >= maxCache {
			idx.mu.cache = make(map[string]*Result[S])
		}
		idx.mu.cache[string(literal)] = r
	}
	idx.mu.Unlock()
	return r
}

// MatchOnce is Match for subjects unlikely to be seen again (reply
// inboxes): it uses the cache but does not fill it, so one-off subjects do
// not evict hot ones.
func (idx *Index[S]) MatchOnce(literal []byte) *Result[S] {
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	return idx.matchOnceLocked(literal, nil)
}

// MatchOnceInto is MatchOnce for a caller that matches one-off subjects
// again and again (the server's acknowledgements, a client's replies): a
// subject not in the cache is matched into scratch, emptied first and
// reused from call to call, so the match allocates nothing. The result
// (scratch, or a cached one) must not be modified, and is valid until
// scratch is reused.
func (idx *Index[S]) MatchOnceInto(literal []byte, scratch *Result[S]) *Result[S] {
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	return idx.matchOnceLocked(literal, scratch)
}

// Reset empties r for reuse, keeping its room, and drops what it held
// so that a kept scratch result does not keep subscribers alive.
func (r *Result[S]) Reset() {
	clear(r.Plain)
	r.Plain = r.Plain[:0]
	clear(r.Queues)
	r.Queues = r.Queues[:0]
	clear(r.qnames)
	r.qnames = r.qnames[:0]
}

// matchOnceLocked answers a cached result, or matches literal into
// scratch (emptied first), or into a new result when scratch is nil.
// Called with idx.mu held (read or write).
func (idx *Index[S]) matchOnceLocked(literal []byte, scratch *Result[S]) *Result[S] {
	idx.matches.Add(1)
	if r, ok := idx.mu.cache[string(literal)]; ok {
		idx.hits.Add(1)
		return r
	}
	if scratch != nil {
		scratch.Reset()
		matchNode(idx.mu.root, literal, scratch)
		return scratch
	}
	r := &Result[S]{}
	matchNode(idx.mu.root, literal, r)
	r.qnames = nil
	return r
}

// Memo remembers what one literal subject matched, for a caller that
// delivers to that subject again and again (a pull request's reply
// inbox, a push consumer's deliver subject): while the index is
// unchanged, MatchMemo answers from it without a walk or an allocation.
// A Memo belongs to one subject; it is safe for concurrent use.
type Memo[S comparable] struct {
	p atomic.Pointer[memoEntry[S]]
}

type memoEntry[S comparable] struct {
	gen uint64
	r   *Result[S]
}

// MatchMemo is MatchOnce for the subject m remembers. The result must
// not be modified.
func (idx *Index[S]) MatchMemo(literal []byte, m *Memo[S]) *Result[S] {
	if e := m.p.Load(); e != nil && e.gen == idx.gen.Load() {
		idx.matches.Add(1)
		idx.hits.Add(1)
		return e.r
	}
	idx.mu.RLock()
	// Read under the lock: every change bumps gen under the write lock,
	// so the result is exactly the index at this gen.
	gen := idx.gen.Load()
	r := idx.matchOnceLocked(literal, nil)
	idx.mu.RUnlock()
	m.p.Store(&memoEntry[S]{gen: gen, r: r})
	return r
}

func matchNode[S comparable](n *node[S], subj []byte, r *Result[S]) {
	for {
		if n.fwc != nil {
			collect(n.fwc, r)
		}
		end := len(subj)
		for i, c := range subj {
			if c == sep {
				end = i
				break
			}
		}
		tok := subj[:end]
		last := end == len(subj)
		if n.pwc != nil {
			if last {
				collect(n.pwc, r)
			} else {
				matchNode(n.pwc, subj[end+1:], r)
			}
		}
		next := n.next[string(tok)]
		if next == nil {
			return
		}
		if last {
			collect(next, r)
			return
		}
		n, subj = next, subj[end+1:]
	}
}

func collect[S comparable](n *node[S], r *Result[S]) {
	r.Plain = append(r.Plain, n.plain...)
next:
	for name, members := range n.queues {
		for i, q := range r.qnames {
			if q == name {
				r.Queues[i] = append(r.Queues[i], members...)
				continue next
			}
		}
		r.qnames = append(r.qnames, name)
		r.Queues = append(r.Queues, append([]S(nil), members...))
	}
}
