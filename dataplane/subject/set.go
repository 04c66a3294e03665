package subject

import (
	"slices"
	"strings"
)

// Set is a fixed set of valid filters held as a token tree, so that
// "does any filter match this subject" and "is this filter inside
// another" cost about one step per token for the sets clients build (many
// literal keys, a few wildcards) however many filters there are, where a
// list costs one comparison per filter. Never worse than the list: a walk
// visits each tree node at most once. A Set is immutable once built and
// safe for concurrent use.
//
// The tree is the Index's trie, each filter's entry being the filter
// itself, and OverlapsOther is the Index's overlap walk; a Set needs no
// lock because nothing changes it after NewSet.
type Set struct {
	root node[string]
}

// NewSet builds a Set of filters, which must be valid (ValidFilterString).
func NewSet(filters []string) *Set {
	s := &Set{}
	// One array backs every filter's entry (cap 1 each, so a duplicate's
	// append copies out rather than overwrite a neighbour).
	entries := slices.Clone(filters)
	for i, f := range filters {
		n := s.root.path(f)
		if n.plain == nil {
			n.plain = entries[i : i+1 : i+1]
		} else {
			n.plain = append(n.plain, f)
		}
	}
	return s
}

// others is how many entries n holds besides f's own one: all entries at
// a node spell the same filter, so n is f's node exactly when they are f.
func others(n *node[string], f string) int {
	if c := len(n.plain); c > 0 && n.plain[0] == f {
		return c - 1
	}
	return len(n.plain)
}

// Match reports whether some filter of the set matches the literal
// subject, as Matches decides for one filter.
func (s *Set) Match(literal string) bool {
	return matchAny(&s.root, literal)
}

// matchAny is Match below n. It is not the overlap walk: a subject's
// tokens are taken literally, as Matches takes them, so that a published
// subject holding a '*' or '>' token (allowed without pedantic mode) gets
// the answer the per-filter comparison gives.
func matchAny(n *node[string], subj string) bool {
	for {
		if n.fwc != nil && len(n.fwc.plain) > 0 {
			return true
		}
		tok, rest, more := cut(subj)
		if k := n.pwc; k != nil {
			if !more {
				if len(k.plain) > 0 {
					return true
				}
			} else if matchAny(k, rest) {
				return true
			}
		}
		k := n.next[tok]
		if k == nil {
			return false
		}
		if !more {
			return len(k.plain) > 0
		}
		n, subj = k, rest
	}
}

// CoveredByOther reports whether another filter of the set (f's own
// entry aside; a duplicate of f counts) matches every subject f matches,
// as SubsetOf decides it. f must be valid. Each tree node visited costs
// one from budget; ok is false, and the answer unknown, once it runs out.
func (s *Set) CoveredByOther(f string, budget *int) (covered, ok bool) {
	return covers(&s.root, f, strings.Split(f, "."), budget)
}

// covers walks the branches of n that can cover toks, the tokens of f
// not matched yet.
func covers(n *node[string], f string, toks []string, budget *int) (covered, ok bool) {
	if *budget--; *budget < 0 {
		return false, false
	}
	if len(toks) == 0 {
		return others(n, f) > 0, true
	}
	// A '>' covers any non-empty rest, wildcards included.
	if n.fwc != nil && others(n.fwc, f) > 0 {
		return true, true
	}
	tok := toks[0]
	if tok == ">" {
		return false, true
	}
	if k := n.child(tok, false); k != nil {
		if c, ok := covers(k, f, toks[1:], budget); c || !ok {
			return c, ok
		}
	}
	if tok != "*" && n.pwc != nil {
		// A '*' covers a literal token, never the other way round.
		return covers(n.pwc, f, toks[1:], budget)
	}
	return false, true
}

// OverlapsOther reports whether another filter of the set (f's own entry
// aside; a duplicate of f counts) matches some subject f matches, as
// Overlaps decides it. f must be valid. Each tree node visited costs one
// from budget; ok is false, and the answer unknown, once it runs out.
func (s *Set) OverlapsOther(f string, budget *int) (overlaps, ok bool) {
	self := false
	visited, ok := overlapping(&s.root, f, max(*budget, 0), func(g string) bool {
		if g == f && !self {
			self = true
			return true
		}
		overlaps = true
		return false
	})
	*budget -= visited
	return overlaps, ok
}
