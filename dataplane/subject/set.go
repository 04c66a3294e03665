package subject

import "strings"

// Set is a fixed set of valid filters held as a token tree, so that
// "does any filter match this subject" and "is this filter inside
// another" cost about one step per token for the sets clients build (many
// literal keys, a few wildcards) however many filters there are, where a
// list costs one comparison per filter. Never worse than the list: a walk
// visits each tree node at most once. A Set is immutable once built and
// safe for concurrent use.
type Set struct {
	root setNode
}

// setNode is one token position; count is how many filters end here
// (a duplicate counts twice), below how many end further down.
type setNode struct {
	kids         map[string]*setNode
	count, below int
}

// NewSet builds a Set of filters, which must be valid (ValidFilterString).
func NewSet(filters []string) *Set {
	s := &Set{}
	for _, f := range filters {
		n := &s.root
		for tok := range strings.SplitSeq(f, ".") {
			n.below++
			if n.kids == nil {
				n.kids = map[string]*setNode{}
			}
			k := n.kids[tok]
			if k == nil {
				k = &setNode{}
				n.kids[tok] = k
			}
			n = k
		}
		n.count++
	}
	return s
}

// Match reports whether some filter of the set matches the literal
// subject, as Matches decides for one filter.
func (s *Set) Match(literal string) bool {
	return s.root.match(literal)
}

func (n *setNode) match(subj string) bool {
	if k := n.kids[">"]; k != nil && k.count > 0 {
		return true
	}
	tok, rest, more := cut(subj)
	for _, k := range [2]*setNode{n.kids[tok], n.kids["*"]} {
		switch {
		case k == nil:
		case more:
			if k.match(rest) {
				return true
			}
		case k.count > 0:
			return true
		}
	}
	return false
}

// CoveredByOther reports whether another filter of the set (f's own
// entry aside; a duplicate of f counts) matches every subject f matches,
// as SubsetOf decides it. f must be valid. Each tree node visited costs
// one from budget; ok is false, and the answer unknown, once it runs out.
func (s *Set) CoveredByOther(f string, budget *int) (covered, ok bool) {
	return s.root.covers(strings.Split(f, "."), true, budget)
}

// covers walks the branches of n that can cover toks; exact says the path
// so far spells f itself, whose own entry does not count.
func (n *setNode) covers(toks []string, exact bool, budget *int) (covered, ok bool) {
	if *budget--; *budget < 0 {
		return false, false
	}
	if len(toks) == 0 {
		return n.count > 1 || (!exact && n.count > 0), true
	}
	// A '>' covers any non-empty rest, wildcards included.
	if k := n.kids[">"]; k != nil {
		own := exact && len(toks) == 1 && toks[0] == ">"
		if k.count > 1 || (!own && k.count > 0) {
			return true, true
		}
	}
	tok := toks[0]
	if tok == ">" {
		return false, true
	}
	if k := n.kids[tok]; k != nil {
		if c, ok := k.covers(toks[1:], exact, budget); c || !ok {
			return c, ok
		}
	}
	if tok != "*" {
		// A '*' covers a literal token, never the other way round.
		if k := n.kids["*"]; k != nil {
			return k.covers(toks[1:], false, budget)
		}
	}
	return false, true
}

// OverlapsOther reports whether another filter of the set (f's own entry
// aside; a duplicate of f counts) matches some subject f matches, as
// Overlaps decides it. f must be valid. Each tree node visited costs one
// from budget; ok is false, and the answer unknown, once it runs out.
func (s *Set) OverlapsOther(f string, budget *int) (overlaps, ok bool) {
	return s.root.overlaps(strings.Split(f, "."), true, budget)
}

// overlaps walks the branches of n that can share a subject with toks;
// exact says the path so far spells f itself, whose own entry does not
// count.
func (n *setNode) overlaps(toks []string, exact bool, budget *int) (overlaps, ok bool) {
	if *budget--; *budget < 0 {
		return false, false
	}
	self := 0 // f's own entry, where it is counted
	if exact {
		self = 1
	}
	if len(toks) == 0 {
		return n.count-self > 0, true
	}
	tok := toks[0]
	if tok == ">" {
		// Every filter ending further down shares a subject with it.
		return n.below-self > 0, true
	}
	// A '>' here shares a subject with any non-empty rest.
	if k := n.kids[">"]; k != nil && k.count > 0 {
		return true, true
	}
	if tok == "*" {
		// Any token can share a subject with '*'.
		for key, k := range n.kids {
			if o, ok := k.overlaps(toks[1:], exact && key == "*", budget); o || !ok {
				return o, ok
			}
		}
		return false, true
	}
	if k := n.kids[tok]; k != nil {
		if o, ok := k.overlaps(toks[1:], exact, budget); o || !ok {
			return o, ok
		}
	}
	if k := n.kids["*"]; k != nil {
		return k.overlaps(toks[1:], false, budget)
	}
	return false, true
}
