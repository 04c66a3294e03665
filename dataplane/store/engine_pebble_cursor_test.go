package store

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCursorSeeksStayInRange: a recovery read of an empty range does not
// walk the deleted keys after it. Unbounded, each such seek stepped over
// every tombstone up to the next live key (the raft log's truncated
// entries lie after the stream records), and a node taking a partition of
// thousands of empty streams spent minutes there.
func TestCursorSeeksStayInRange(t *testing.T) {
	s := mustOpen(t, vfs.NewMem())
	defer s.Close()
	db := s.eng.(*pebbleEngine).db
	const dead = 20000
	for i := range dead {
		must(t, db.Set(fmt.Appendf(nil, "z%08d", i), []byte("v"), nil))
	}
	for i := range dead {
		must(t, db.Delete(fmt.Appendf(nil, "z%08d", i), nil))
	}
	must(t, db.Set([]byte("zz"), []byte("live"), nil))

	cur, err := s.eng.newCursor()
	must(t, err)
	defer cur.close()
	c := cur.(*pebbleCursor)
	for range 100 {
		n := 0
		must(t, c.scan([]byte("y"), []byte("y\xff"), false, func(k, v []byte) (bool, error) { n++; return true, nil }))
		must(t, c.scan([]byte("y"), []byte("y\xff"), true, func(k, v []byte) (bool, error) { n++; return true, nil }))
		if err := c.get([]byte("y1"), func([]byte) error { n++; return nil }); err != errKeyNotFound {
			t.Fatalf("get of a missing key: %v", err)
		}
		if n != 0 {
			t.Fatalf("%d keys found in an empty range", n)
		}
	}
	if st := c.it.Stats().InternalStats; st.PointCount > 1000 {
		t.Fatalf("300 reads of an empty range stepped over %d entries (the deleted keys after it: %d)", st.PointCount, dead)
	}
	// The bounds do not hide what is in range.
	var got []string
	must(t, c.scan([]byte("z"), nil, false, func(k, v []byte) (bool, error) { got = append(got, string(k)); return true, nil }))
	if len(got) != 1 || got[0] != "zz" {
		t.Fatalf("scan from z = %q, want [zz]", got)
	}
}
