package subject

import "math"

// Overlapping calls fn for every subscriber whose filter overlaps filter
// (some literal subject matches both, as Overlaps decides), until fn
// returns false. A subscriber with several overlapping filters is passed
// once for each. filter must be valid.
//
// The walk follows filter's tokens through the trie, so its cost is the
// number of trie nodes that can overlap, not the number of subscriptions:
// a literal filter visits at most two nodes per token (the literal child
// and the '*' child). The return value is that number of nodes visited,
// for tests and benchmarks that hold the walk to its bound.
func (idx *Index[S]) Overlapping(filter string, fn func(S) bool) (visited int) {
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	visited, _ = overlapping(idx.mu.root, filter, math.MaxInt, fn)
	return visited
}

// overlapping is the one overlap walk over a trie of filters, for the
// Index (under its lock) and for a Set (immutable, so without one): it
// calls fn for every entry at or below root whose filter overlaps filter,
// until fn returns false or more than limit nodes have been visited.
// visited is the number of nodes visited; complete is false when the
// limit cut the walk short, and what was not reported is unknown.
func overlapping[S comparable](root *node[S], filter string, limit int, fn func(S) bool) (visited int, complete bool) {
	w := overlapWalk[S]{fn: fn, limit: limit}
	w.walk(root, filter)
	return w.visited, !w.exhausted
}

// overlapWalk is one overlapping query in progress. stopped ends it,
// whether fn asked to (false) or the limit was reached (exhausted too).
type overlapWalk[S comparable] struct {
	fn             func(S) bool
	visited, limit int
	stopped        bool
	exhausted      bool
}

// visit counts one more node, and reports false (ending the walk) if
// that is past the limit.
func (w *overlapWalk[S]) visit() bool {
	if w.visited++; w.visited > w.limit {
		w.stopped, w.exhausted = true, true
		return false
	}
	return true
}

// walk reports the filters at or below n's children that overlap rest,
// the query's tokens not matched yet (at least one).
func (w *overlapWalk[S]) walk(n *node[S], rest string) {
	if !w.visit() {
		return
	}
	tok, rest, more := cut(rest)
	if tok == ">" {
		// One or more tokens of anything: every filter longer than n's
		// depth overlaps.
		n.eachChild(func(c *node[S]) { w.subtree(c) }, &w.stopped)
		return
	}
	// A filter ending in '>' here takes this token and whatever follows.
	if n.fwc != nil {
		w.emit(n.fwc)
	}
	step := func(c *node[S]) {
		if w.stopped {
			return
		}
		if more {
			w.walk(c, rest)
			return
		}
		// The query ends here: only filters ending here too overlap
		// (a '>' below needs one more token).
		if w.visit() {
			w.emit(c)
		}
	}
	if n.pwc != nil {
		step(n.pwc)
	}
	if tok == "*" {
		for _, c := range n.next {
			if step(c); w.stopped {
				return
			}
		}
	} else if c := n.next[tok]; c != nil {
		step(c)
	}
}

// subtree reports every filter at n or below it. Every leaf of the trie
// holds an entry, so a walk that stops at its first answer visits about
// one path's length of nodes here, however large the subtree.
func (w *overlapWalk[S]) subtree(n *node[S]) {
	if !w.visit() {
		return
	}
	w.emit(n)
	n.eachChild(func(c *node[S]) { w.subtree(c) }, &w.stopped)
}

// emit reports the entries of the filter ending at n.
func (w *overlapWalk[S]) emit(n *node[S]) {
	for _, s := range n.plain {
		if w.stopped {
			return
		}
		w.stopped = !w.fn(s)
	}
	for _, members := range n.queues {
		for _, s := range members {
			if w.stopped {
				return
			}
			w.stopped = !w.fn(s)
		}
	}
}

// eachChild calls fn for each child of n until *stop is set.
func (n *node[S]) eachChild(fn func(*node[S]), stop *bool) {
	for _, c := range n.next {
		if *stop {
			return
		}
		fn(c)
	}
	for _, c := range []*node[S]{n.pwc, n.fwc} {
		if c != nil && !*stop {
			fn(c)
		}
	}
}
