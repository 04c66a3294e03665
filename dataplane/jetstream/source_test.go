package jetstream

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// applySourced runs one sourced message through the stream's apply path.
func applySourced(t *testing.T, s *stream, subj string, src sourcedMsg) result {
	t.Helper()
	return s.ap.apply(&proposal{s: s, kind: propMsg, acct: s.mu.owner, subject: subj, data: []byte("x"), src: &src})
}

func TestSourcedApplyProgress(t *testing.T) {
	fs := vfs.NewMem()
	e, acc, closeAll := openEngine(t, fs)
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s"}})
	s := e.account("A").lookup("S")
	key := (&api.StreamSource{Name: "O"}).IndexName()
	steps := []struct {
		oseq  uint64
		ident string
		dup   bool
	}{
		{1, "id1", false},
		{3, "id1", false},
		{3, "id1", true},  // delivered again after a new consumer
		{2, "id1", true},  // below the progress
		{1, "id2", false}, // the origin was made again
		{2, "id2", false},
	}
	for i, st := range steps {
		r := applySourced(t, s, "s", sourcedMsg{key: key, ident: st.ident, oseq: st.oseq})
		if r.err != nil || r.dup != st.dup {
			t.Fatalf("step %d: %+v", i, r)
		}
	}
	if st := s.snapshotState(); st.Msgs != 4 || st.LastSeq != 4 {
		t.Fatalf("state %+v", st)
	}
	closeAll()

	// The progress is the stream's applied state: it comes back with it.
	e, _, _ = openEngine(t, fs)
	s = e.account("A").lookup("S")
	s.mu.Lock()
	got := s.mu.progress[key]
	s.mu.Unlock()
	if got != (sourceProgress{seq: 2, ident: "id2"}) {
		t.Fatalf("recovered progress %+v", got)
	}
	if r := applySourced(t, s, "s", sourcedMsg{key: key, ident: "id2", oseq: 2}); !r.dup {
		t.Fatalf("taken again after restart: %+v", r)
	}
}

func TestMirrorApplyKeepsOriginSequences(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	// A stream made with a mirror starts its sourcer; this one's origin
	// does not exist, so only the messages applied here reach it.
	createStream(t, acc, api.StreamConfig{Name: "M", Mirror: &api.StreamSource{Name: "NONE"}})
	s := e.account("A").lookup("M")
	key := (&api.StreamSource{Name: "NONE"}).IndexName()
	for _, oseq := range []uint64{5, 6, 9} {
		if r := applySourced(t, s, "o", sourcedMsg{key: key, oseq: oseq, ts: int64(oseq) * 1e9, mirror: true}); r.err != nil || r.seq != oseq {
			t.Fatalf("oseq %d: %+v", oseq, r)
		}
	}
	if r := applySourced(t, s, "o", sourcedMsg{key: key, oseq: 7, mirror: true}); !r.dup {
		t.Fatalf("a sequence below the last: %+v", r)
	}
	st := s.snapshotState()
	if st.FirstSeq != 5 || st.LastSeq != 9 || st.Msgs != 3 || st.Deleted != 2 || st.FirstTime != 5e9 {
		t.Fatalf("state %+v", st)
	}
}

func TestParseAckReply(t *testing.T) {
	c, d, s, ts, p, ok := parseAckReply("$JS.ACK.O.cons.1.42.7.1700000000000000000.3")
	if !ok || c != "cons" || d != 7 || s != 42 || ts != 1700000000000000000 || p != 3 {
		t.Fatalf("v1: %q %d %d %d %d %v", c, d, s, ts, p, ok)
	}
	c, d, s, _, p, ok = parseAckReply("$JS.ACK.dom.acchash.O.cons.1.42.7.1700000000000000000.3.rnd")
	if !ok || c != "cons" || d != 7 || s != 42 || p != 3 {
		t.Fatalf("v2: %q %d %d %d %v", c, d, s, p, ok)
	}
	for _, bad := range []string{"", "$JS.ACK.O.c.1.x.7.1.3", "foo.bar", "$JS.ACK.O.c.1.2"} {
		if _, _, _, _, _, ok := parseAckReply(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSourceBackoff: failed consumer creates are retried every 2 s at
// first, then ever more slowly up to 2 minutes (with up to a tenth more,
// at random).
func TestSourceBackoff(t *testing.T) {
	for _, tc := range []struct {
		fails int
		base  time.Duration
	}{{0, 2 * time.Second}, {1, 2 * time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{4, 8 * time.Second}, {7, 64 * time.Second}, {8, 2 * time.Minute}, {1000, 2 * time.Minute}} {
		for range 20 {
			got := sourceBackoff(tc.fails)
			hi := tc.base
			if tc.fails > 2 {
				hi += tc.base / 10
			}
			if got < tc.base || got > hi {
				t.Fatalf("sourceBackoff(%d) = %v, want %v..%v", tc.fails, got, tc.base, hi)
			}
		}
	}
}
