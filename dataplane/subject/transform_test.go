package subject

import (
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func TestTransformApply(t *testing.T) {
	tests := []struct {
		name            string
		src, dest, subj string
		want            string
		ok              bool
	}{
		// Literals and plain matching.
		{"literal", "foo", "bar", "foo", "bar", true},
		{"literal no match", "foo", "bar", "baz", "", false},
		{"literal multi token", "foo.bar", "a.b.c", "foo.bar", "a.b.c", true},
		{"literal dollar tokens", "foo.*", "$x.$.{{}}.$JS", "foo.a", "$x.$.{{}}.$JS", true},
		{"empty src is >", "", "prefix.>", "a.b", "prefix.a.b", true},
		{"identity", ">", ">", "a.b.c", "a.b.c", true},

		// Wildcard references.
		{"dollar", "foo.*", "bar.$1", "foo.a", "bar.a", true},
		{"reorder dollar", "foo.*.*", "bar.$2.$1", "foo.a.b", "bar.b.a", true},
		{"reorder wildcard()", "foo.*.bar.*.baz", "req.{{wildcard(2)}}.{{wildcard(1)}}", "foo.A.bar.B.baz", "req.B.A", true},
		{"Wildcard capitalised", "foo.*", "{{Wildcard(1)}}", "foo.a", "a", true},
		{"wildcard whitespace", "foo.*", "{{ wildcard ( 1 ) }}", "foo.a", "a", true},
		{"repeat and skip", "foo.*.*", "$2.$2.x", "foo.a.b", "b.b.x", true},
		{"dollar plus and zero padded", "foo.*.*", "$+2.$01", "foo.a.b", "b.a", true},
		{"index 0 is first token", "a.*", "$0.{{wildcard(0)}}.$1", "a.b", "a.a.b", true},
		{"negative index is first token", "a.*", "$-1.$1", "a.b", "a.b", true},
		{"wildcard token looks like template", "*", "x.$1", "$1", "x.$1", true},
		{"wrong literal", "foo.*", "$1", "bar.a", "", false},
		{"too few tokens", "foo.*.*", "$1", "foo.a", "", false},
		{"too many tokens", "foo.*", "$1", "foo.a.b", "", false},

		// Full wildcard.
		{"fwc", "foo.>", "bar.>", "foo.a.b.c", "bar.a.b.c", true},
		{"fwc single", "foo.>", "bar.>", "foo.a", "bar.a", true},
		{"fwc needs a token", "foo.>", "bar.>", "foo", "", false},
		{"fwc with pwc", "foo.*.>", "x.$1.y.>", "foo.a.b.c", "x.a.y.b.c", true},
		{"fwc only in dest", "foo.>", ">", "foo.a.b", "a.b", true},
		{"fwc multi-token prefix", "baz.>", "my.pre.>", "baz.1.2.3", "my.pre.1.2.3", true},
		{"fwc index 0 from >", ">", "{{partition(3,0)}}.$0.>", "a.b", "1.a.a.b", true},

		// Invalid subjects never match.
		{"empty subject", ">", "x.>", "", "", false},
		{"empty token", ">", "x.>", "a..b", "", false},
		{"trailing dot", "foo.>", "x.>", "foo.a.", "", false},
		{"pwc in subject", "foo.*", "$1", "foo.*", "", false},
		{"fwc in subject", "foo.>", "x.>", "foo.a.>", "", false},
		{"identity still validates", ">", ">", "a.*", "", false},

		// splitFromLeft / splitFromRight.
		{"splitFromLeft", "*", "{{splitfromleft(1,3)}}", "12345", "123.45", true},
		{"splitFromLeft 1", "*", "{{SplitFromLeft(1,1)}}", "12345", "1.2345", true},
		{"splitFromLeft at len", "*", "{{splitFromLeft(1,5)}}", "12345", "12345", true},
		{"splitFromLeft past len", "*", "{{splitFromLeft(1,9)}}", "12345", "12345", true},
		{"splitFromLeft zero", "*", "{{splitFromLeft(1,0)}}", "12345", "12345", true},
		{"splitFromLeft negative", "*", "{{splitFromLeft(1,-2)}}", "12345", "12345", true},
		{"splitFromRight", "*", "{{SplitFromRight(1,3)}}", "12345", "12.345", true},
		{"splitFromRight 4", "*", "{{splitFromRight(1,4)}}", "12345", "1.2345", true},
		{"splitFromRight at len", "*", "{{splitFromRight(1,5)}}", "12345", "12345", true},

		// sliceFromLeft / sliceFromRight.
		{"sliceFromLeft", "*", "{{SliceFromLeft(1,3)}}", "1234567890", "123.456.789.0", true},
		{"sliceFromLeft even", "*", "{{sliceFromLeft(1,2)}}", "123456", "12.34.56", true},
		{"sliceFromLeft len-1", "*", "{{sliceFromLeft(1,3)}}", "1234", "123.4", true},
		{"sliceFromLeft 1", "*", "{{sliceFromLeft(1,1)}}", "abc", "a.b.c", true},
		{"sliceFromLeft at len", "*", "{{sliceFromLeft(1,4)}}", "1234", "1234", true},
		{"sliceFromRight", "*", "{{SliceFromRight(1,3)}}", "1234567890", "1.234.567.890", true},
		{"sliceFromRight even", "*", "{{sliceFromRight(1,2)}}", "123456", "12.34.56", true},
		{"sliceFromRight len-1", "*", "{{sliceFromRight(1,3)}}", "1234", "1.234", true},
		{"sliceFromRight zero", "*", "{{sliceFromRight(1,0)}}", "1234", "1234", true},

		// split.
		{"split", "*", "{{split(1,-)}}", "abc-def--ghi-", "abc.def.ghi", true},
		{"split leading delim", "*", "{{split(1,-)}}", "-abc-def--ghi-", "abc.def.ghi", true},
		{"split two leading delims keep a dot", "*", "{{split(1,-)}}", "--abc", ".abc", true},
		{"split no delim", "*", "{{split(1,-)}}", "abc", "abc", true},
		{"split only delims", "a.*.b", "x.{{split(1,-)}}.y", "a.---.b", "x..y", true},
		{"split multi-byte delim", "*", "{{split(1,ab)}}", "xabyababz", "x.y.z", true},
		{"split empty delim", "*", "{{split(1,)}}", "héllo", "h.é.l.l.o", true},
		{"split delim after comma space", "*", "{{split(1, -)}}", "a-b", "a.b", true},
		{"split combo", "*.*", "{{split(2,-)}}.{{splitfromleft(1,2)}}", "foo.-abc-def--ghij-", "abc.def.ghij.fo.o", true},

		// left / right.
		{"left", "*", "{{left(1,3)}}", "1234", "123", true},
		{"left 1", "*", "{{Left(1,1)}}", "1234", "1", true},
		{"left past len", "*", "{{left(1,6)}}", "1234", "1234", true},
		{"left zero", "*", "{{left(1,0)}}", "1234", "1234", true},
		{"right", "*", "{{right(1,3)}}", "1234", "234", true},
		{"right 1", "*", "{{Right(1,1)}}", "1234", "4", true},
		{"right past len", "*", "{{right(1,6)}}", "1234", "1234", true},

		// partition (values: FNV-1a 32, see TestPartitionHash).
		{"partition whole subject foo", "*", "bar.{{partition(10)}}", "foo", "bar.3", true},
		{"partition whole subject baz", "*", "bar.{{partition(10)}}", "baz", "bar.0", true},
		{"partition whole subject qux", "*", "bar.{{partition(10)}}", "qux", "bar.9", true},
		{"partition whole subject with dots", "*.*", "bar.{{partition(10)}}", "foo.bar", "bar.6", true},
		{"partition tokens concatenated", "orders.*.*", "p.{{partition(3,1,2)}}", "orders.customer42.EU", "p.0", true},
		{"partition token order matters", "orders.*.*", "p.{{partition(3,2,1)}}", "orders.customer42.EU", "p.1", true},
		{"partition whole 3-token subject", "orders.*.*", "p.{{partition(10)}}", "orders.customer42.EU", "p.0", true},
		{"partition no separator", "*.*", "{{partition(7,1,2)}}", "ab.cd", "3", true},
		{"partition repeated index", "x.*", "{{partition(1000,1,1)}}", "x.ab", "913", true},
		{"partition zero", "*", "bar.{{partition(0)}}", "baz", "bar.0", true},
		{"partition one", "*", "bar.{{partition(1,1)}}", "baz", "bar.0", true},
		{"partition index 0", "*", "bar.{{partition(10, 0)}}", "foo", "bar.3", true},
		{"partition spaced", "*.*", "{{ Partition ( 7 , 1 , 2 ) }}", "ab.cd", "3", true},
		{"partition with fwc", "*.>", "{{partition(10)}}.$1.>", "foo.bar", "6.foo.bar", true},
		{"partition literal src", "foo.bar", "baz.{{partition(10)}}", "foo.bar", "baz.6", true},
		{"partition literal src", "foo.baz", "qux.{{partition(10)}}", "foo.baz", "qux.4", true},
		{"partition literal src 5", "test.subject", "result.{{partition(5)}}", "test.subject", "result.0", true},
		{"partition literal src ignores indexes", "foo.bar", "baz.{{partition(10,1)}}", "foo.bar", "baz.6", true},
		{"partition and wildcards", "foo.*.*", "foo.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(3,1,2)}}", "foo.ab.cd", "foo.ab.cd.1", true},

		// random with a single outcome.
		{"random zero", "*", "bar.{{random(0)}}", "qux", "bar.0", true},
		{"random one", "*", "bar.{{Random(1)}}", "qux", "bar.0", true},
		{"random literal src", "foo", "bar.{{random(1)}}", "foo", "bar.0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTransform(tt.src, tt.dest)
			if err != nil {
				t.Fatalf("NewTransform(%q, %q): %v", tt.src, tt.dest, err)
			}
			got, ok := tr.Apply(tt.subj)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("%q -> %q: Apply(%q) = %q, %v; want %q, %v", tt.src, tt.dest, tt.subj, got, ok, tt.want, tt.ok)
			}
			if m := tr.Match(tt.subj); m != tt.ok {
				t.Fatalf("Match(%q) = %v, want %v", tt.subj, m, tt.ok)
			}
		})
	}
}

func TestTransformRandom(t *testing.T) {
	tr, err := NewTransform("*", "bar.{{random(6)}}")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 1000 {
		got, ok := tr.Apply("qux")
		if !ok {
			t.Fatal("no match")
		}
		switch got {
		case "bar.0", "bar.1", "bar.2", "bar.3", "bar.4", "bar.5":
			seen[got] = true
		default:
			t.Fatalf("random(6) gave %q", got)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("random(6) produced only %v in 1000 draws", seen)
	}
}

func TestTransformErrors(t *testing.T) {
	tests := []struct {
		src, dest string
		source    bool   // the source is at fault
		reason    string // substring of the error
	}{
		{"foo..", "bar", true, "not a valid subject filter"},
		{"foo.>.bar", "bar", true, "not a valid subject filter"},
		{"foo bar", "bar", true, "not a valid subject filter"},
		{"foo", "", false, "empty destination"},

		{"foo", "bar..baz", false, "empty token"},
		{"foo", "bar.", false, "empty token"},
		{"foo.>", "a.>.b", false, "'>' must be the last token"},
		{"foo.*", "bar.*", false, "'*' is not allowed"},
		{"foo.*", "bar.$1.>", false, "ends in '>' but source"},
		{"foo.>", "bar.baz", false, "ends in '>' but destination"},
		{"", "bar", false, "ends in '>' but destination"},
		{"foo", "a b", false, "whitespace"},
		{"foo", "a\tb", false, "whitespace"},
		{"foo", "a\x00b", false, "whitespace"},

		{"foo.*", "bar.$2", false, "index 2 out of range"},
		{"foo.*", "foo.{{wildcard(2)}}", false, "out of range"},
		{"foo.>", "foo.$1.>", false, "out of range"},
		{"foo.*", "{{partition(3,1,2)}}", false, "out of range"},
		{"foo.*", "{{left(3,1)}}", false, "out of range"},
		{"foo", "bla.{{wildcard(1)}}", false, "has no wildcards"},
		{"foo", "bla.$1", false, "has no wildcards"},
		{"foo", "bla.{{split(1,-)}}", false, "has no wildcards"},
		{"foo", "bla.{{splitFromLeft(1,1)}}", false, "has no wildcards"},

		{"foo.*", "foo.{{unimplemented(1)}}", false, "unknown mapping function"},
		{"foo.*", "foo.{{PARTITION(3)}}", false, "unknown mapping function"},
		{"foo.*", "foo.{{wildCard(1)}}", false, "unknown mapping function"},
		{"foo.*", "foo.{{ wildcard5) }}", false, "unknown mapping function"},
		{"foo.*", "foo.{{splitLeft(2,2}}", false, "unknown mapping function"},
		{"foo.*", "foo.{{ }}", false, "unknown mapping function"},
		{"foo.*", "foo.{{wildcard}}", false, "unknown mapping function"},

		{"foo.*", "foo.{{wildcard()}}", false, "not enough arguments"},
		{"foo.*", "foo.{{wildcard(1,2)}}", false, "too many arguments"},
		{"foo.*", "foo.{{wildcard(foo)}}", false, "not an integer"},
		{"foo.*", "foo.{{wildcard(\t1)}}", false, "not an integer"},
		{"foo.*", "foo.{{partition()}}", false, "partition count"},
		{"foo.*", "foo.{{partition(x,1)}}", false, "partition count"},
		{"foo.*", "foo.{{partition(3,x)}}", false, "not an integer"},
		{"foo.*", "foo.{{partition(2147483648)}}", false, "partition count"},
		{"foo.*", "foo.{{partition(-1,1)}}", false, "partition count"},
		{"foo.*", "foo.{{random()}}", false, "random count"},
		{"foo.*", "foo.{{random(2147483648)}}", false, "random count"},
		{"foo.*", "foo.{{random(-2)}}", false, "random count"},
		{"foo.*", "foo.{{random(1,2)}}", false, "exactly one argument"},
		{"foo.*", "foo.{{left(1)}}", false, "not enough arguments"},
		{"foo.*", "foo.{{right()}}", false, "not enough arguments"},
		{"foo.*", "foo.{{sliceFromLeft(1,2,3)}}", false, "too many arguments"},
		{"foo.*", "foo.{{splitFromRight(x,2)}}", false, "not an integer"},
		{"foo.*", "foo.{{sliceFromRight(1,x)}}", false, "not a 32-bit integer"},
		{"foo.*", "foo.{{left(1,2147483648)}}", false, "not a 32-bit integer"},
		{"foo.*", "foo.{{split(1)}}", false, "not enough arguments"},
		{"foo.*", "foo.{{split(1,-,x)}}", false, "too many arguments"},
		{"foo.*", "foo.{{split(1,- )}}", false, "may not hold a space"},
		{"foo.*", "foo.{{split(x,-)}}", false, "not an integer"},
		{"foo.*", "foo.{{wildcard(\n1)}}", false, "unknown mapping function"},
	}
	for _, tt := range tests {
		tr, err := NewTransform(tt.src, tt.dest)
		if err == nil {
			t.Errorf("NewTransform(%q, %q) = %v, want an error", tt.src, tt.dest, tr)
			continue
		}
		if !errors.Is(err, ErrBadTransform) {
			t.Errorf("NewTransform(%q, %q): %v does not wrap ErrBadTransform", tt.src, tt.dest, err)
		}
		var te *TransformError
		if !errors.As(err, &te) || te.Source != tt.source {
			t.Errorf("NewTransform(%q, %q): %#v, want Source=%v", tt.src, tt.dest, err, tt.source)
		}
		if !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("NewTransform(%q, %q): %q does not mention %q", tt.src, tt.dest, err, tt.reason)
		}
	}
}

func TestTransformAccepts(t *testing.T) {
	// Destinations nats-server accepts that look odd.
	for _, tt := range []struct{ src, dest string }{
		{"foo.*.*", "bar.$2"},              // not every wildcard has to be used
		{"foo.*.*", "bar.{{wildcard(1)}}"}, // likewise
		{"foo.*.*", "bar.{{partition(1)}}"},
		{"foo.*.*", "bar.{{random(5)}}"},
		{"foo.*", "foo.{{partition(2147483647)}}"},
		{"foo.bar", "foo.{{random(2147483647)}}"},
		{"foo.*", "{{splitFromLeft(1,-5)}}"},
		{"foo.*", "{{split(1,)}}"},
		{"foo.*", "$foo"},
		{"foo.*", "{{}}"},
		{"foo.*", "{{x"},
		{"foo.*", "x{{wildcard(1)}}"},
		{"foo.*", "{{wildcard(1)}}x"},
		{"", "prefix.>"},
		{"foo.*", "{{wildcard(9999999999999)}}x"},
	} {
		if _, err := NewTransform(tt.src, tt.dest); err != nil {
			t.Errorf("NewTransform(%q, %q): %v", tt.src, tt.dest, err)
		}
	}
	tr, err := NewTransform("", "prefix.>")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Source() != ">" || tr.Destination() != "prefix.>" || tr.String() != "> -> prefix.>" {
		t.Fatalf("accessors: %q %q %q", tr.Source(), tr.Destination(), tr)
	}
}

func TestPartitionHash(t *testing.T) {
	// FNV-1a 32 test vectors from the FNV specification.
	for _, tt := range []struct {
		s    string
		want uint32
	}{
		{"", 0x811c9dc5},
		{"a", 0xe40c292c},
		{"foobar", 0xbf9cf968},
	} {
		if got := fnv1a(fnvOffset32, tt.s); got != tt.want {
			t.Errorf("fnv1a(%q) = %#x, want %#x", tt.s, got, tt.want)
		}
	}
	// The table's partition values, as hashes.
	for _, tt := range []struct {
		s    string
		want uint32
	}{
		{"foo", 0xa9f37ed7},
		{"foo.bar", 0xcb942ef4},
		{"customer42EU", 0xec27df81},
		{"EUcustomer42", 0x7432f26d},
		{"orders.customer42.EU", 0x602e6bec},
		{"abcd", 0xce3479bd},
		{"abab", 0xd83906a9},
	} {
		if got := fnv1a(fnvOffset32, tt.s); got != tt.want {
			t.Errorf("fnv1a(%q) = %#x, want %#x", tt.s, got, tt.want)
		}
	}
	// Hashing pieces in turn equals hashing their concatenation, and the
	// inline hash agrees with hash/fnv.
	r := rand.New(rand.NewPCG(7, 11))
	for range 1000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		cutAt := r.IntN(len(b) + 1)
		h := fnv.New32a()
		h.Write(b)
		if got := fnv1a(fnv1a(fnvOffset32, string(b[:cutAt])), string(b[cutAt:])); got != h.Sum32() {
			t.Fatalf("fnv1a(%x) = %#x, hash/fnv %#x", b, got, h.Sum32())
		}
	}
}

func TestTransformAllocs(t *testing.T) {
	for _, tt := range []struct {
		src, dest, subj string
		allocs          float64
	}{
		{"foo.*", "bar", "foo.a", 0},
		{">", ">", "a.b.c", 0},
		{"foo.>", ">", "foo.a.b", 0},
		{"foo.*.*", "bar.$2.$1", "foo.a.b", 1},
		{"foo.*.>", "{{partition(16,1)}}.{{sliceFromLeft(1,2)}}.{{split(1,-)}}.>", "foo.a-b-c.x.y", 1},
		{"*.*.*.*.*.*.*.*.*.*", "$10.$9.$8.$7.$6.$5.$4.$3.$2.$1", "a.b.c.d.e.f.g.h.i.j", 2},
	} {
		tr, err := NewTransform(tt.src, tt.dest)
		if err != nil {
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(100, func() {
			if _, ok := tr.Apply(tt.subj); !ok {
				t.Fatal("no match")
			}
		})
		if got > tt.allocs {
			t.Errorf("%q -> %q: Apply allocates %v times, want <= %v", tt.src, tt.dest, got, tt.allocs)
		}
		if got := testing.AllocsPerRun(100, func() { tr.Match(tt.subj) }); got != 0 {
			t.Errorf("%q: Match allocates %v times", tt.src, got)
		}
	}
}

func TestTransformConcurrent(t *testing.T) {
	det, err := NewTransform("orders.*.*.>", "p.{{partition(8,1,2)}}.$2.{{sliceFromLeft(1,1)}}.>")
	if err != nil {
		t.Fatal(err)
	}
	rnd, err := NewTransform("orders.*.*.>", "r.{{random(3)}}.>")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := det.Apply("orders.c1.EU.x")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if got, ok := det.Apply("orders.c1.EU.x"); !ok || got != want {
					t.Errorf("Apply = %q, %v; want %q", got, ok, want)
					return
				}
				switch got, _ := rnd.Apply("orders.c1.EU.x"); got {
				case "r.0.x", "r.1.x", "r.2.x":
				default:
					t.Errorf("random Apply = %q", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzTransform(f *testing.F) {
	seeds := [][3]string{
		{"foo.*.*", "bar.$2.$1", "foo.a.b"},
		{"foo.>", "bar.>", "foo.a.b.c"},
		{"*.*", "{{partition(10,1,2)}}.$1", "ab.cd"},
		{"*", "{{split(1,-)}}", "--a-b"},
		{"*", "{{split(1,)}}", "h\xffllo"},
		{"*", "{{SliceFromRight(1,3)}}", "1234567890"},
		{"*", "{{ sliceFromLeft( 1 , 4 ) }}", "1234567890"},
		{">", "{{partition(3,0)}}.>", "x.y"},
		{"*", "{{splitFromLeft(1,2)}}.{{splitFromRight(1,2)}}.{{left(1,2)}}.{{right(1,2)}}", "abcdef"},
		{"a.*.b.*", "$0.$-1.$01.{{Wildcard(+2)}}", "a.x.b.y"},
		{"", ">", "a"},
		{"*", "{{random(3)}}", "a"},
		{"*.*.*.*.*.*.*.*.*.*", "$10.$9.$8.$7.$6.$5.$4.$3.$2.$1", "a.b.c.d.e.f.g.h.i.j"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, src, dest, subj string) {
		tr, err := NewTransform(src, dest)
		if err != nil {
			if !errors.Is(err, ErrBadTransform) {
				t.Fatalf("error %v does not wrap ErrBadTransform", err)
			}
			return
		}
		got, ok := tr.Apply(subj)
		if m := tr.Match(subj); m != ok {
			t.Fatalf("Match = %v, Apply ok = %v", m, ok)
		}
		if !ok {
			if got != "" {
				t.Fatalf("no match but Apply returned %q", got)
			}
			return
		}
		for _, tok := range strings.Split(subj, ".") {
			if tok == "" || tok == "*" || tok == ">" {
				t.Fatalf("subject %q with token %q matched", subj, tok)
			}
		}
		src = tr.Source()
		if !Matches(src, subj) {
			t.Fatalf("Apply matched %q against %q, Matches disagrees", subj, src)
		}
		if !strings.Contains(strings.ToLower(dest), "random") {
			if again, _ := tr.Apply(subj); again != got {
				t.Fatalf("Apply not deterministic: %q then %q", got, again)
			}
		}
	})
}

func BenchmarkTransformApply(b *testing.B) {
	for _, bb := range []struct{ name, src, dest, subj string }{
		{"reorder", "orders.*.*", "out.$2.$1", "orders.customer42.EU"},
		{"partition", "orders.*.*", "orders.{{partition(16,1,2)}}.$1.$2", "orders.customer42.EU"},
		{"fwc", "in.>", "out.>", "in.a.b.c.d"},
		{"identity", ">", ">", "in.a.b.c.d"},
	} {
		tr, err := NewTransform(bb.src, bb.dest)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.Apply(bb.subj)
			}
		})
	}
}
