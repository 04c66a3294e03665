package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestGeneratedFileIsCurrent fails when errors.txt was edited without
// running go generate, so the table and the code can never disagree.
func TestGeneratedFileIsCurrent(t *testing.T) {
	src, err := os.ReadFile("../../errors.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../errors_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("errors_gen.go is stale: run `go generate ./dataplane/jetstream/api`")
	}
}

func TestParseRejects(t *testing.T) {
	for name, src := range map[string]string{
		"too few fields":  "10001 400 Foo\n",
		"bad status":      "10001 200 Foo bar\n",
		"duplicate code":  "10001 400 Foo bar\n10001 400 Baz bar\n",
		"duplicate name":  "10001 400 Foo bar\n10002 400 Foo bar\n",
		"unsorted":        "10002 400 Foo bar\n10001 400 Baz bar\n",
		"lower-case name": "10001 400 foo bar\n",
		"empty":           "# nothing\n",
	} {
		if _, err := parse([]byte(src)); err == nil {
			t.Errorf("%s: parse accepted %q", name, src)
		}
	}
}

func TestParsePlaceholders(t *testing.T) {
	es, err := parse([]byte("10042 500 Restore   unable to {subject}: {err} {subject}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(es[0].params, ","); got != "subject,err" {
		t.Fatalf("params = %q", got)
	}
	if es[0].desc != "unable to {subject}: {err} {subject}" {
		t.Fatalf("desc = %q", es[0].desc)
	}
}
