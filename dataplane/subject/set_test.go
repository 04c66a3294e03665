package subject

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSetMatchAgreesWithMatches: a Set matches a subject exactly when one
// of its filters does, on random filter sets and subjects.
func TestSetMatchAgreesWithMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	toks := []string{"a", "b", "c", "*", ">"}
	word := func(wild bool) string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			k := len(toks)
			if !wild {
				k = 3
			}
			parts[i] = toks[rng.IntN(k)]
			if parts[i] == ">" && i < n-1 {
				parts[i] = "*"
			}
		}
		return strings.Join(parts, ".")
	}
	for range 5000 {
		filters := make([]string, rng.IntN(6))
		for i := range filters {
			filters[i] = word(true)
		}
		set := NewSet(filters)
		for range 20 {
			subj := word(false)
			want := false
			for _, f := range filters {
				want = want || Matches(f, subj)
			}
			if got := set.Match(subj); got != want {
				t.Fatalf("filters %q, subject %q: Set.Match %v, Matches %v", filters, subj, got, want)
			}
		}
	}
}

// TestSetMatchCostsPerToken: matching against 100,000 literal filters
// visits a few nodes, not 100,000 filters.
func TestSetMatchCostsPerToken(t *testing.T) {
	filters := make([]string, 100_000)
	for i := range filters {
		filters[i] = fmt.Sprintf("kv.b.%d", i)
	}
	set := NewSet(append(filters, "other.*"))
	allocs := testing.AllocsPerRun(100, func() {
		if set.Match("kv.b.x") || !set.Match("kv.b.99999") || !set.Match("other.q") {
			t.Fatal("wrong answer")
		}
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times", allocs)
	}
}

func BenchmarkSetMatch20000(b *testing.B) {
	filters := make([]string, 20_000)
	for i := range filters {
		filters[i] = fmt.Sprintf("a.%d", i)
	}
	set := NewSet(filters)
	for b.Loop() {
		set.Match("a.x")
	}
}

// TestSetOverlapsAgreesWithOverlaps: OverlapsOther answers what comparing
// f with every other filter answers.
func TestSetOverlapsAgreesWithOverlaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	toks := []string{"a", "b", "*", ">"}
	word := func() string {
		n := 1 + rng.IntN(3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = toks[rng.IntN(len(toks))]
			if parts[i] == ">" && i < n-1 {
				parts[i] = "*"
			}
		}
		return strings.Join(parts, ".")
	}
	for range 20000 {
		filters := make([]string, 1+rng.IntN(5))
		for i := range filters {
			filters[i] = word()
		}
		set := NewSet(filters)
		for i, f := range filters {
			want := false
			for j, g := range filters {
				want = want || (i != j && Overlaps(f, g))
			}
			budget := 1 << 20
			if got, ok := set.OverlapsOther(f, &budget); !ok || got != want {
				t.Fatalf("filters %q, %q: OverlapsOther %v (ok %v), pairwise %v", filters, f, got, ok, want)
			}
			budget = 1 << 20
			want = false
			for j, g := range filters {
				want = want || (i != j && SubsetOf(f, g))
			}
			if got, ok := set.CoveredByOther(f, &budget); !ok || got != want {
				t.Fatalf("filters %q, %q: CoveredByOther %v (ok %v), pairwise %v", filters, f, got, ok, want)
			}
		}
	}
}

// TestSetMatchTakesTokensLiterally: a subject published with a wildcard
// token (allowed without pedantic mode) gets the answer Matches gives,
// not the overlap answer.
func TestSetMatchTakesTokensLiterally(t *testing.T) {
	for _, c := range []struct {
		filter, subj string
	}{
		{"a.b", "a.*"}, {"a.*", "a.*"}, {"a.b.c", "a.>"}, {"a.*", "a.>"},
		{"a.>", "a.*"}, {"a.b", "*.b"}, {"*.b", "*.b"}, {">", "*"},
	} {
		if got, want := NewSet([]string{c.filter}).Match(c.subj), Matches(c.filter, c.subj); got != want {
			t.Errorf("filter %q, subject %q: Set.Match %v, Matches %v", c.filter, c.subj, got, want)
		}
	}
}

// TestSetOverlapsOtherBudget: a set crafted so a lookup fans out over
// every wildcard path runs out of budget and says so, and what each
// lookup visits is taken from the budget callers share.
func TestSetOverlapsOtherBudget(t *testing.T) {
	// Every prefix in {x,*}^12, each ending in its own last token: a
	// literal lookup walks all 2^12 prefixes and overlaps nothing.
	const depth = 12
	var filters []string
	for m := range 1 << depth {
		toks := make([]string, depth+1)
		for k := range depth {
			toks[k] = "x"
			if m>>k&1 == 1 {
				toks[k] = "*"
			}
		}
		toks[depth] = fmt.Sprint("e", m)
		filters = append(filters, strings.Join(toks, "."))
	}
	set := NewSet(filters)
	budget := 1000
	if _, ok := set.OverlapsOther(filters[0], &budget); ok || budget >= 0 {
		t.Fatalf("crafted set within a budget of 1000: ok %v, budget left %d", ok, budget)
	}
	budget = 1 << 20
	if overlaps, ok := set.OverlapsOther(filters[0], &budget); !ok || overlaps {
		t.Fatalf("crafted set: overlaps %v, ok %v", overlaps, ok)
	}
	if spent := 1<<20 - budget; spent < 1<<depth {
		t.Fatalf("a walk over %d prefixes cost %d", 1<<depth, spent)
	}
}

// BenchmarkSetOverlapsOther20000 is a stream's own subject check of
// 20,000 literal subjects.
func BenchmarkSetOverlapsOther20000(b *testing.B) {
	filters := make([]string, 20_000)
	for i := range filters {
		filters[i] = fmt.Sprintf("m.%d", i)
	}
	set := NewSet(filters)
	for b.Loop() {
		for _, f := range filters {
			budget := 1 << 20
			set.OverlapsOther(f, &budget)
		}
	}
}

// BenchmarkNewSet20000 is building the set of 20,000 literal filters.
func BenchmarkNewSet20000(b *testing.B) {
	filters := make([]string, 20_000)
	for i := range filters {
		filters[i] = fmt.Sprintf("m.%d", i)
	}
	for b.Loop() {
		NewSet(filters)
	}
}
