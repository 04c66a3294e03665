package subject

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
)

func TestValid(t *testing.T) {
	tests := []struct {
		s               string
		literal, filter bool
	}{
		{"foo", true, true},
		{"foo.bar.baz", true, true},
		{"foo.*", false, true},
		{"foo.>", false, true},
		{">", false, true},
		{"*", false, true},
		{"foo.*.bar", false, true},
		{"foo.>.bar", false, false},
		{"foo*.bar", true, true},
		{"foo.b>r", true, true},
		{"", false, false},
		{".", false, false},
		{"foo.", false, false},
		{".foo", false, false},
		{"foo..bar", false, false},
		{"foo bar", false, false},
		{"foo\tbar", false, false},
		{"foo\r", false, false},
		{"$JS.API.INFO", true, true},
	}
	for _, tt := range tests {
		if got := ValidLiteralString(tt.s); got != tt.literal {
			t.Errorf("ValidLiteral(%q) = %v, want %v", tt.s, got, tt.literal)
		}
		if got := ValidFilterString(tt.s); got != tt.filter {
			t.Errorf("ValidFilter(%q) = %v, want %v", tt.s, got, tt.filter)
		}
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		filter, subj string
		want         bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"foo.*", "foo.bar", true},
		{"foo.*", "foo", false},
		{"foo.*", "foo.bar.baz", false},
		{"foo.>", "foo.bar.baz", true},
		{"foo.>", "foo", false},
		{">", "a.b.c", true},
		{"*.*", "a.b", true},
		{"*.b.>", "a.b.c.d", true},
		{"*.b.>", "a.c.c.d", false},
		{"foo.bar", "foo.bar.baz", false},
		{"foo.bar.baz", "foo.bar", false},
	}
	for _, tt := range tests {
		if got := Matches(tt.filter, tt.subj); got != tt.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tt.filter, tt.subj, got, tt.want)
		}
	}
}

func TestOverlapsAndSubset(t *testing.T) {
	tests := []struct {
		a, b           string
		overlap, subAB bool
	}{
		{"foo", "foo", true, true},
		{"foo", "bar", false, false},
		{"foo.*", "foo.bar", true, false},
		{"foo.bar", "foo.*", true, true},
		{"foo.>", "foo.*", true, false},
		{"foo.*", "foo.>", true, true},
		{"*.bar", "foo.*", true, false},
		{"foo.*", "bar.>", false, false},
		{">", "a", true, false},
		{"a.b", ">", true, true},
		{"a.*.c", "a.b.*", true, false},
		{"a.*", "a.*.c", false, false},
	}
	for _, tt := range tests {
		if got := Overlaps(tt.a, tt.b); got != tt.overlap {
			t.Errorf("Overlaps(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.overlap)
		}
		if got := Overlaps(tt.b, tt.a); got != tt.overlap {
			t.Errorf("Overlaps(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.overlap)
		}
		if got := SubsetOf(tt.a, tt.b); got != tt.subAB {
			t.Errorf("SubsetOf(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.subAB)
		}
	}
}

func names(r *Result[string]) (plain []string, queues []string) {
	plain = append(plain, r.Plain...)
	sort.Strings(plain)
	for _, q := range r.Queues {
		g := append([]string(nil), q...)
		sort.Strings(g)
		queues = append(queues, fmt.Sprint(g))
	}
	sort.Strings(queues)
	return plain, queues
}

func TestIndexMatch(t *testing.T) {
	idx := NewIndex[string]()
	subs := []struct{ filter, queue, id string }{
		{"foo.bar", "", "lit"},
		{"foo.*", "", "pwc"},
		{"foo.>", "", "fwc"},
		{">", "", "all"},
		{"*.bar", "", "pwc-first"},
		{"foo.bar", "q", "q1"},
		{"foo.*", "q", "q2"},
		{"foo.bar", "r", "r1"},
	}
	for _, s := range subs {
		if err := idx.Insert(s.filter, s.queue, s.id); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 2; round++ { // second round hits the cache
		plain, queues := names(idx.Match([]byte("foo.bar")))
		if fmt.Sprint(plain) != "[all fwc lit pwc pwc-first]" {
			t.Fatalf("plain = %v", plain)
		}
		if fmt.Sprint(queues) != "[[q1 q2] [r1]]" {
			t.Fatalf("queues = %v", queues)
		}
	}
	plain, _ := names(idx.Match([]byte("foo.baz.x")))
	if fmt.Sprint(plain) != "[all fwc]" {
		t.Fatalf("plain = %v", plain)
	}
	if plain, _ := names(idx.Match([]byte("nothing"))); fmt.Sprint(plain) != "[all]" {
		t.Fatalf("only > should match, got %v", plain)
	}

	// Removing invalidates the cache.
	if !idx.Remove("foo.*", "", "pwc") || idx.Remove("foo.*", "", "pwc") {
		t.Fatal("remove should succeed once")
	}
	idx.Remove(">", "", "all")
	plain, _ = names(idx.Match([]byte("foo.bar")))
	if fmt.Sprint(plain) != "[fwc lit pwc-first]" {
		t.Fatalf("after remove plain = %v", plain)
	}
	if err := idx.Insert("foo..bar", "", "bad"); err == nil {
		t.Fatal("invalid filter accepted")
	}
	if idx.Count() != 6 {
		t.Fatalf("count = %d", idx.Count())
	}
}

func TestIndexPrunes(t *testing.T) {
	idx := NewIndex[int]()
	for i := 0; i < 100; i++ {
		idx.Insert(fmt.Sprintf("a.%d.*.>", i), "", i)
	}
	for i := 0; i < 100; i++ {
		idx.Remove(fmt.Sprintf("a.%d.*.>", i), "", i)
	}
	if !idx.mu.root.empty() {
		t.Fatalf("trie not pruned: %+v", idx.mu.root)
	}
}

func TestIndexConcurrent(t *testing.T) {
	idx := NewIndex[int]()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				f := fmt.Sprintf("x.%d", i%10)
				idx.Insert(f, "", w*1000+i)
				idx.Match([]byte(f))
				idx.Remove(f, "", w*1000+i)
			}
		}()
	}
	wg.Wait()
	if idx.Count() != 0 {
		t.Fatalf("count = %d", idx.Count())
	}
	// Every cached result must be empty now: a stale entry would deliver
	// to removed subscribers.
	for i := 0; i < 10; i++ {
		if r := idx.Match([]byte(fmt.Sprintf("x.%d", i))); !r.Empty() {
			t.Fatalf("stale cache entry for x.%d: %+v", i, r)
		}
	}
}

func BenchmarkMatchCached(b *testing.B) {
	idx := NewIndex[int]()
	idx.Insert("foo.bar", "", 1)
	subj := []byte("foo.bar")
	for b.Loop() {
		idx.Match(subj)
	}
}

// TestMatchMemo: a memo answers what a fresh match would, through every
// kind of change to the index, and counts as a cache hit while nothing
// changed.
func TestMatchMemo(t *testing.T) {
	idx := NewIndex[int]()
	var m Memo[int]
	subj := []byte("_INBOX.abc.1")
	check := func(want ...int) {
		t.Helper()
		got := idx.MatchMemo(subj, &m)
		fresh := idx.MatchOnce(subj)
		plain := append([]int(nil), got.Plain...)
		sort.Ints(plain)
		freshPlain := append([]int(nil), fresh.Plain...)
		sort.Ints(freshPlain)
		if fmt.Sprint(plain) != fmt.Sprint(want) || fmt.Sprint(freshPlain) != fmt.Sprint(want) {
			t.Fatalf("memo %v, fresh %v, want %v", plain, freshPlain, want)
		}
	}
	check()
	if err := idx.Insert("_INBOX.abc.*", "", 1); err != nil {
		t.Fatal(err)
	}
	check(1)
	before := idx.Stats().CacheHits
	check(1)
	if idx.Stats().CacheHits <= before {
		t.Fatal("an unchanged index was matched again")
	}
	if err := idx.Insert("unrelated.>", "", 2); err != nil {
		t.Fatal(err)
	}
	check(1)
	if err := idx.Insert(">", "", 3); err != nil {
		t.Fatal(err)
	}
	check(1, 3)
	idx.Remove("_INBOX.abc.*", "", 1)
	check(3)
	idx.Remove(">", "", 3)
	check()
}

// TestMatchOnceInto: matching one-off subjects into one scratch result
// answers what MatchOnce answers, subject after subject, keeps nothing of
// the previous match, allocates nothing once the scratch has grown, and
// hands back a cached result as it is.
func TestMatchOnceInto(t *testing.T) {
	idx := NewIndex[string]()
	for _, s := range []struct{ filter, queue, id string }{
		{"_INBOX.a.*", "", "a"}, {"_INBOX.>", "", "all"}, {"_INBOX.b.1", "", "b1"},
		{"_INBOX.b.*", "q", "q1"}, {"_INBOX.*.1", "q", "q2"},
	} {
		if err := idx.Insert(s.filter, s.queue, s.id); err != nil {
			t.Fatal(err)
		}
	}
	var scratch Result[string]
	for round := 0; round < 2; round++ {
		for _, subj := range []string{"_INBOX.a.1", "_INBOX.b.1", "_INBOX.c.2", "other", "_INBOX.b.2"} {
			gotPlain, gotQueues := names(idx.MatchOnceInto([]byte(subj), &scratch))
			wantPlain, wantQueues := names(idx.MatchOnce([]byte(subj)))
			if fmt.Sprint(gotPlain, gotQueues) != fmt.Sprint(wantPlain, wantQueues) {
				t.Fatalf("%s: into scratch %v %v, MatchOnce %v %v", subj, gotPlain, gotQueues, wantPlain, wantQueues)
			}
		}
	}
	scratch.Reset()
	if !scratch.Empty() || cap(scratch.Plain) == 0 {
		t.Fatalf("Reset: %+v, want empty with its room kept", scratch)
	}
	if n := testing.AllocsPerRun(100, func() { idx.MatchOnceInto([]byte("_INBOX.a.7"), &scratch) }); n != 0 {
		t.Errorf("a match into grown scratch allocates %v times", n)
	}
	cached := idx.Match([]byte("_INBOX.a.9"))
	if got := idx.MatchOnceInto([]byte("_INBOX.a.9"), &scratch); got != cached {
		t.Error("a cached subject was matched again instead of answered from the cache")
	}
}

// TestIndexWildcardChangeWithLargeCache: with more cached subjects than a
// change checks one by one, a wildcard insert or removal drops the cache
// whole, and every match after it is right; below that, only the
// entries the filter matches go.
func TestIndexWildcardChangeWithLargeCache(t *testing.T) {
	for _, cached := range []int{maxScanOnChange / 2, 4 * maxScanOnChange} {
		idx := NewIndex[int]()
		if err := idx.Insert("other", "", 1); err != nil {
			t.Fatal(err)
		}
		subj := func(i int) []byte { return []byte("a." + strconv.Itoa(i)) }
		for i := range cached {
			if r := idx.Match(subj(i)); !r.Empty() {
				t.Fatalf("a.%d matched %v before any subscription on a.>", i, r.Plain)
			}
		}
		idx.Match([]byte("other"))
		if err := idx.Insert("a.>", "", 2); err != nil {
			t.Fatal(err)
		}
		if st := idx.Stats(); cached < maxScanOnChange && st.CacheEntries != 1 {
			t.Fatalf("%d cached: %d entries left after inserting a.>, want only other's", cached, st.CacheEntries)
		}
		for i := range cached {
			if r := idx.Match(subj(i)); len(r.Plain) != 1 || r.Plain[0] != 2 {
				t.Fatalf("%d cached: a.%d matched %v after inserting a.>", cached, i, r.Plain)
			}
		}
		if r := idx.Match([]byte("other")); len(r.Plain) != 1 || r.Plain[0] != 1 {
			t.Fatalf("%d cached: other matched %v", cached, r.Plain)
		}
		if !idx.Remove("a.>", "", 2) {
			t.Fatal("a.> not removed")
		}
		for i := range cached {
			if r := idx.Match(subj(i)); !r.Empty() {
				t.Fatalf("%d cached: a.%d matched %v after removing a.>", cached, i, r.Plain)
			}
		}
	}
}
