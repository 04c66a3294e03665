package api

import (
	"errors"
	"strings"
)

// errFiltersTooComplex is why a filter set whose overlap check would
// outgrow filterCheckBudget is refused.
var errFiltersTooComplex = errors.New("consumer filter subjects are too complex to check")

// filterCheckBudget bounds the trie nodes one overlap check may visit.
// Typical sets (literal keys, a few wildcards) visit about one node per
// token; only sets built so that every filter's walk fans out over many
// wildcard paths (no client makes those) can reach it. It keeps the check
// to about a second on one core, while 100,000 filters of ten tokens
// each need about a quarter of it.
const filterCheckBudget = 4 << 20

// firstBadFilter finds the filter that nats-server's consumer check
// reports first: walking filters in order, the first that is invalid
// (errBadSubject) or a subset of another filter in the list
// (overlapping). It answers what nats-server answers, in time linear in
// the total length of the filters for the sets clients send, instead of
// comparing every pair: the filters go into a token trie, and each is
// looked up by following only the branches that can cover it.
//
// Invalid filters are left out of the trie: nats-server's subset test
// on an invalid subject is meaningless, and such a filter is refused
// anyway, at the latest at its own position.
func firstBadFilter(filters []string) *Error {
	return firstBadFilterWithin(filters, filterCheckBudget)
}

// firstBadFilterWithin is firstBadFilter visiting at most budget trie
// nodes.
func firstBadFilterWithin(filters []string, budget int) *Error {
	valid := make([]bool, len(filters))
	t := newFilterTrie()
	for i, f := range filters {
		if valid[i] = validSubject(f); valid[i] {
			t.insert(f)
		}
	}
	for i, f := range filters {
		if !valid[i] {
			return NewStreamInvalidConfigError(errBadSubject)
		}
		covered, ok := t.coveredByOther(f, &budget)
		if !ok {
			return NewStreamInvalidConfigError(errFiltersTooComplex)
		}
		if covered {
			return NewConsumerOverlappingSubjectFiltersError()
		}
	}
	return nil
}

// filterTrie holds filters by token; count is how many filters end at a
// node (duplicates count twice).
type filterTrie struct {
	kids  map[string]*filterTrie
	count int
}

func newFilterTrie() *filterTrie { return &filterTrie{} }

func (t *filterTrie) insert(f string) {
	n := t
	for tok := range strings.SplitSeq(f, ".") {
		if n.kids == nil {
			n.kids = map[string]*filterTrie{}
		}
		k := n.kids[tok]
		if k == nil {
			k = &filterTrie{}
			n.kids[tok] = k
		}
		n = k
	}
	n.count++
}

// coveredByOther reports whether another filter in t (not f's own entry;
// a duplicate of f does count) matches every subject f matches, as
// subject.SubsetOf(f, other) decides it. ok is false when the walk ran
// out of budget.
func (t *filterTrie) coveredByOther(f string, budget *int) (covered, ok bool) {
	return t.covers(strings.Split(f, "."), true, budget)
}

// covers walks the branches of n that can cover toks; exact says the path
// so far spells f itself, whose own entry does not count.
func (n *filterTrie) covers(toks []string, exact bool, budget *int) (covered, ok bool) {
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
