package state

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStores runs one suite against every implementation.
func TestStores(t *testing.T) {
	impls := map[string]func(t *testing.T) Store{
		"mem": func(t *testing.T) Store { return NewMem() },
		"pebble": func(t *testing.T) Store {
			s, err := OpenPebble("db", vfs.NewMem(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range impls {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			if _, err := s.Get("a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get missing: %v, want ErrNotFound", err)
			}
			b := new(Batch)
			for i := range 5 {
				b.Put(fmt.Sprintf("p/%d", i), []byte{byte(i)})
			}
			b.Put("q/0", []byte("q")).Put("p", []byte("bare"))
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
			kvs, err := s.Scan("p/", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(kvs) != 5 || kvs[0].Key != "p/0" || kvs[4].Key != "p/4" || kvs[3].Value[0] != 3 {
				t.Fatalf("Scan p/ = %v", kvs)
			}
			if err := s.Apply(new(Batch).Delete("p/1").Delete("nope").Put("p/2", []byte("x"))); err != nil {
				t.Fatal(err)
			}
			kvs, _ = s.Scan("p/", 0)
			if len(kvs) != 4 || string(kvs[1].Value) != "x" {
				t.Fatalf("after delete: %v", kvs)
			}
			v, err := s.Get("q/0")
			if err != nil || string(v) != "q" {
				t.Fatalf("Get q/0 = %q, %v", v, err)
			}
			all, _ := s.Scan("", 0)
			if len(all) != 6 {
				t.Fatalf("Scan all = %d keys, want 6", len(all))
			}
			first, _ := s.Scan("p/", 2)
			if len(first) != 2 || first[0].Key != "p/0" || first[1].Key != "p/2" {
				t.Fatalf("Scan p/ limit 2 = %v", first)
			}
		})
	}
}

// TestPebbleReopen checks writes survive closing and reopening.
func TestPebbleReopen(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenPebble("db", fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Put(s, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenPebble("db", fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get("k"); err != nil || string(v) != "v" {
		t.Fatalf("after reopen: %q, %v", v, err)
	}
}

func TestPrefixEnd(t *testing.T) {
	if got := string(prefixEnd("ab")); got != "ac" {
		t.Fatalf("prefixEnd(ab) = %q", got)
	}
	if got := prefixEnd("a\xff"); string(got) != "b" {
		t.Fatalf("prefixEnd(a\\xff) = %q", got)
	}
	if prefixEnd("") != nil {
		t.Fatal("prefixEnd empty should be nil")
	}
}
