package api

import (
	"errors"

	"github.com/contrail/contrail/dataplane/subject"
)

// errFiltersTooComplex is why a filter set whose overlap check would
// outgrow filterCheckBudget is refused.
var errFiltersTooComplex = errors.New("consumer filter subjects are too complex to check")

// filterCheckBudget bounds the set nodes one overlap check (of a
// consumer's filters, or of a stream's subjects) may visit.
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
// comparing every pair: the filters go into a subject.Set, and each is
// looked up by following only the branches that can cover it.
//
// Invalid filters are left out of the set: nats-server's subset test
// on an invalid subject is meaningless, and such a filter is refused
// anyway, at the latest at its own position.
func firstBadFilter(filters []string) *Error {
	return firstBadFilterWithin(filters, filterCheckBudget)
}

// firstBadFilterWithin is firstBadFilter visiting at most budget set
// nodes.
func firstBadFilterWithin(filters []string, budget int) *Error {
	set := subject.NewSet(validSubjects(filters))
	for _, f := range filters {
		if !validSubject(f) {
			return NewStreamInvalidConfigError(errBadSubject)
		}
		covered, within := set.CoveredByOther(f, &budget)
		if !within {
			return NewStreamInvalidConfigError(errFiltersTooComplex)
		}
		if covered {
			return NewConsumerOverlappingSubjectFiltersError()
		}
	}
	return nil
}
