package subject

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomFilter draws a filter of 1-4 tokens from a small alphabet, so
// that overlaps are frequent.
func randomFilter(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	s := ""
	for i := range n {
		if i > 0 {
			s += "."
		}
		switch x := r.IntN(10); {
		case x == 0 && i == n-1:
			s += ">"
		case x <= 2:
			s += "*"
		default:
			s += string(rune('a' + r.IntN(3)))
		}
	}
	return s
}

// TestOverlappingMatchesOverlaps holds the trie walk to the pairwise rule:
// for random filters, Overlapping reports exactly the subscribers whose
// filters Overlaps says overlap the query.
func TestOverlappingMatchesOverlaps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		idx := NewIndex[int]()
		var filters []string
		for i := range 30 {
			f := randomFilter(r)
			filters = append(filters, f)
			queue := ""
			if i%5 == 0 {
				queue = "q"
			}
			if err := idx.Insert(f, queue, i); err != nil {
				t.Fatal(err)
			}
		}
		for range 20 {
			q := randomFilter(r)
			var want, got []int
			for i, f := range filters {
				if Overlaps(q, f) {
					want = append(want, i)
				}
			}
			idx.Overlapping(q, func(i int) bool {
				got = append(got, i)
				return true
			})
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: Overlapping(%q) = %v, want %v (filters %v)", round, q, got, want, filters)
			}
			// Stopping at the first answer finds one exactly when there is one.
			n := 0
			idx.Overlapping(q, func(int) bool { n++; return false })
			if n != min(len(want), 1) {
				t.Fatalf("round %d: Overlapping(%q) stopping at the first: %d calls, want %d", round, q, n, min(len(want), 1))
			}
		}
	}
}

// TestOverlappingVisitsDoNotGrowWithSubscriptions is the scaling check:
// a literal query visits the same number of trie nodes among ten
// filters as among a hundred thousand.
func TestOverlappingVisitsDoNotGrowWithSubscriptions(t *testing.T) {
	visits := func(n int) int {
		idx := NewIndex[int]()
		for i := range n {
			if err := idx.Insert(fmt.Sprintf("orders.%d.*", i), "", i); err != nil {
				t.Fatal(err)
			}
		}
		if err := idx.Insert("orders.>", "", -1); err != nil {
			t.Fatal(err)
		}
		return idx.Overlapping("orders.new.eu", func(int) bool { return true })
	}
	small, large := visits(10), visits(100_000)
	if small != large {
		t.Fatalf("a literal query visited %d nodes among 10 filters and %d among 100,000", small, large)
	}
}
