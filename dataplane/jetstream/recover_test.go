package jetstream

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/store"
)

// BenchmarkRecover measures a restart's recovery of an account's streams,
// each with one message: what stands between a restart and a healthy node.
func BenchmarkRecover(b *testing.B) {
	for _, n := range []int{1_000, 20_000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			fs := vfs.NewMem()
			e, _, closeAll := openEngine(b, fs)
			a := accountOf(b, e, "A")
			createMany(b, a, 0, n)
			for i := range n {
				s := a.lookup(manyStreamsName(i))
				p := &proposal{s: s, acct: a, kind: propMsg, subject: fmt.Sprintf("s.%d", i), data: []byte("one message")}
				if r := s.ap.apply(p); r.err != nil {
					b.Fatal(r.err)
				}
			}
			closeAll()
			for b.Loop() {
				st, err := store.Open(store.Options{Dir: "js", FS: fs})
				if err != nil {
					b.Fatal(err)
				}
				mem := store.NewMem()
				e, err := New(Options{Store: st, Memory: mem, Log: quietLog()})
				if err != nil {
					b.Fatal(err)
				}
				e.Close()
				st.Close()
				mem.Close()
			}
		})
	}
}
