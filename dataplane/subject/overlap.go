package subject

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
	w := overlapWalk[S]{fn: fn}
	w.walk(idx.mu.root, filter)
	return w.visited
}

// overlapWalk is one Overlapping query in progress.
type overlapWalk[S comparable] struct {
	fn      func(S) bool
	visited int
	stopped bool
}

// walk reports the filters at or below n's children that overlap rest,
// the query's tokens not matched yet (at least one).
func (w *overlapWalk[S]) walk(n *node[S], rest string) {
	w.visited++
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
		w.visited++
		w.emit(c)
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

// subtree reports every filter at n or below it.
func (w *overlapWalk[S]) subtree(n *node[S]) {
	w.visited++
	w.emit(n)
	n.eachChild(func(c *node[S]) { w.subtree(c) }, &w.stopped)
}

// emit reports the subscribers of filters ending at n.
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
