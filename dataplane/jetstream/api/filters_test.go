package api

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/contrail/contrail/dataplane/subject"
)

// pairwiseBadFilter is nats-server's definition, comparing every pair:
// the first filter in order that is invalid or a subset of another.
func pairwiseBadFilter(filters []string) ErrorCode {
	for i, f := range filters {
		if !validSubject(f) {
			return CodeStreamInvalidConfig
		}
		for j, g := range filters {
			if i != j && validSubject(g) && subject.SubsetOf(f, g) {
				return CodeConsumerOverlappingSubjectFilters
			}
		}
	}
	return 0
}

// TestFirstBadFilterAgreesWithPairwise: the trie check answers what
// comparing every pair answers, on hand-picked and random filter sets.
func TestFirstBadFilterAgreesWithPairwise(t *testing.T) {
	sets := [][]string{
		{"a", "b"}, {"a", "a"}, {"a.>", "a.b"}, {"a.b", "a.>"}, {"a.*", "a.b"}, {"a.*", "a.>"},
		{"a.>", "a.*"}, {">", "a"}, {"*", "a"}, {"*", "a.b"}, {"a.*.c", "a.b.*"}, {"a.*", "a.*"},
		{">", ">"}, {"a.>", "b.>"}, {"a", ">.x"}, {">.x", "a", "a"}, {"a", "a", ">.x"}, {"a..b"},
		{"*.b", "a.*"}, {"a.b.c", "*.*.*"}, {"a.b", "*.*.*"}, {"foo.*", "foo"},
	}
	tokens := []string{"a", "b", "*", ">", ""}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rng.IntN(6)
		set := make([]string, n)
		for i := range set {
			toks := make([]string, 1+rng.IntN(3))
			for k := range toks {
				toks[k] = tokens[rng.IntN(len(tokens)-1)]
				if rng.IntN(50) == 0 {
					toks[k] = "" // an invalid filter now and then
				}
			}
			set[i] = strings.Join(toks, ".")
		}
		sets = append(sets, set)
	}
	for _, set := range sets {
		if got, want := codeOf(firstBadFilter(set)), pairwiseBadFilter(set); got != want {
			t.Fatalf("%q: got %d, pairwise %d", set, got, want)
		}
	}
}

// TestManyFilters: 20,000 filters are checked at once (nats-server takes
// tens of seconds, comparing every pair) and get nats-server's answer;
// more than MaxConsumerFilters are refused.
func TestManyFilters(t *testing.T) {
	stream := &StreamConfig{Name: "S", Subjects: []string{"a.>"}}
	filters := make([]string, 20000)
	for i := range filters {
		filters[i] = fmt.Sprintf("a.%d", i)
	}
	start := time.Now()
	cfg := ConsumerConfig{Durable: "C", AckPolicy: AckExplicit, FilterSubjects: filters}
	if err := cfg.Validate(stream); err != nil {
		t.Fatalf("20,000 distinct filters: %v", err)
	}
	cfg.FilterSubjects = append(filters, "a.19999")
	if err := cfg.Validate(stream); codeOf(err) != CodeConsumerOverlappingSubjectFilters {
		t.Fatalf("20,000 filters with a duplicate: %v", err)
	}
	cfg.FilterSubjects = append(filters, "a.*")
	if err := cfg.Validate(stream); codeOf(err) != CodeConsumerOverlappingSubjectFilters {
		t.Fatalf("20,000 filters and a wildcard over them: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("three checks of 20,000 filters took %v", d)
	}
	many := make([]string, MaxConsumerFilters+1)
	for i := range many {
		many[i] = fmt.Sprintf("a.%d", i)
	}
	cfg.FilterSubjects = many
	if err := cfg.Validate(stream); codeOf(err) != CodeStreamInvalidConfig || !strings.Contains(err.Error(), "filter subjects") {
		t.Fatalf("%d filters: %v", len(many), err)
	}
}

// TestFilterCheckBudget: a set crafted so each lookup fans out over every
// wildcard path is refused once the budget is spent, not checked for
// minutes; the sets clients send stay far inside it.
func TestFilterCheckBudget(t *testing.T) {
	// Every prefix in {x,*}^12 ends in its own last token: no filter is a
	// subset of another, and a lookup of an all-literal prefix walks all
	// 2^12 of them.
	var set []string
	const depth = 12
	for m := range 1 << depth {
		toks := make([]string, depth+1)
		for k := range depth {
			toks[k] = "x"
			if m>>k&1 == 1 {
				toks[k] = "*"
			}
		}
		toks[depth] = fmt.Sprint("e", m)
		set = append(set, strings.Join(toks, "."))
	}
	if err := firstBadFilterWithin(set, 100_000); codeOf(err) != CodeStreamInvalidConfig || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("crafted set: %v", err)
	}
	// 100,000 literal keys of ten tokens and a few wildcards beside them
	// need a small part of the budget.
	keys := make([]string, 0, 100_010)
	for i := range 100_000 {
		keys = append(keys, fmt.Sprintf("kv.b.%d.a.b.c.d.e.f.g", i))
	}
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("other.%d.*.>", i))
	}
	if err := firstBadFilterWithin(keys, filterCheckBudget/2); err != nil {
		t.Fatalf("100,000 keys: %v", err)
	}
}

// TestRequestSizeBound: a body over MaxRequestSize is refused before
// decoding.
func TestRequestSizeBound(t *testing.T) {
	var v map[string]any
	body := []byte(`{"a":"` + strings.Repeat("x", MaxRequestSize) + `"}`)
	if err := DecodeRequest(body, &v); err != ErrRequestTooLarge {
		t.Fatalf("over-size body: %v", err)
	}
	if v != nil {
		t.Fatal("over-size body was decoded")
	}
	if err := DecodeRequest(body[:MaxRequestSize-2], &v); err == ErrRequestTooLarge {
		t.Fatal("a body within the bound was refused for its size")
	}
}

// TestManyStreamSubjects: 20,000 stream subjects are checked at once
// (pairwise took 10 s), and an overlap is reported as comparing every
// pair reports it: the first subject overlapping a later one, with it.
func TestManyStreamSubjects(t *testing.T) {
	subjects := make([]string, 20000)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("m.%d", i)
	}
	start := time.Now()
	if _, err := (&StreamConfig{Name: "M", Subjects: subjects}).Normalize(StreamEnv{}); err != nil {
		t.Fatalf("20,000 subjects: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("checking 20,000 subjects took %v", d)
	}
	for _, tc := range []struct {
		subjects []string
		want     string
	}{
		{append(append([]string{}, subjects[:50]...), "q", "m.*", "m.7"), `subject "m.0" overlaps with "m.*"`},
		{[]string{"a.*", "b", "a.x", "*.x"}, `subject "a.*" overlaps with "a.x"`},
		{[]string{"b", "a.>", "c", "a.b.c"}, `subject "a.>" overlaps with "a.b.c"`},
		{[]string{"x", "y", "x"}, `subject "x" overlaps with "x"`},
	} {
		_, err := (&StreamConfig{Name: "M", Subjects: tc.subjects}).Normalize(StreamEnv{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s", tc.subjects, err, tc.want)
		}
	}
}
