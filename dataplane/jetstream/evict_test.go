package jetstream

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// TestEvictionKeepsStateExact: capped streams (max_msgs, max_bytes,
// max_msgs_per_subject) written by a seeded random walk of publishes in
// runs of one subject and of many, deletes of the oldest, newest and
// middle messages (gaps the point reads of eviction must step over), and
// purges by subject. After every step the stream's state summary and its
// per-subject summaries equal what its messages say.
func TestEvictionKeepsStateExact(t *testing.T) {
	configs := []api.StreamConfig{
		{Name: "MSGS", Subjects: []string{"s.>"}, MaxMsgs: 40},
		{Name: "BYTES", Subjects: []string{"s.>"}, MaxBytes: 3000},
		{Name: "PER", Subjects: []string{"s.>"}, MaxMsgs: 60, MaxMsgsPer: 7},
		{Name: "MEM", Subjects: []string{"s.>"}, MaxMsgs: 40, Storage: api.MemoryStorage},
	}
	for _, cfg := range configs {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/seed%d", cfg.Name, seed), func(t *testing.T) { evictionWalk(t, cfg, seed) })
		}
	}
}

func evictionWalk(t *testing.T, cfg api.StreamConfig, seed uint64) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, cfg)
	e.mu.Lock()
	s := e.mu.accounts["A"].lookup(cfg.Name)
	e.mu.Unlock()
	if r := s.ap.apply(&proposal{s: s, kind: propSubjects}); r.err != nil {
		t.Fatal(r.err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	subj := func() string { return fmt.Sprintf("s.%d", rng.IntN(4)) }
	del := func(seq uint64) {
		var ok api.SuccessResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE."+cfg.Name, api.MsgDeleteRequest{Seq: seq}, &ok)
	}
	for step := range 300 {
		st := s.snapshotState()
		switch rng.IntN(8) {
		case 0, 1, 2: // a run on one subject: the stream's next is its subject's next
			one := subj()
			for range 1 + rng.IntN(30) {
				publish(t, acc, one, nil, make([]byte, rng.IntN(120)))
			}
		case 3, 4: // interleaved subjects
			for range 1 + rng.IntN(30) {
				publish(t, acc, subj(), nil, make([]byte, rng.IntN(120)))
			}
		case 5: // gaps right after the oldest, so eviction's point read misses
			if st.Msgs > 3 {
				del(st.FirstSeq + 1)
				del(st.FirstSeq + 2)
			}
		case 6:
			if st.Msgs > 0 {
				del(st.FirstSeq)
				del(st.LastSeq)
				del(st.FirstSeq + uint64(rng.IntN(int(st.LastSeq-st.FirstSeq+1))))
			}
		case 7:
			var pr api.StreamPurgeResponse
			acc.apiCall(t, "$JS.API.STREAM.PURGE."+cfg.Name, api.StreamPurgeRequest{Subject: subj(), Keep: uint64(rng.IntN(3))}, &pr)
		}
		checkStateExact(t, s, step)
		if t.Failed() {
			return
		}
	}
}

// checkStateExact compares s's state summary and per-subject summaries
// with its messages.
func checkStateExact(t *testing.T, s *stream, step int) {
	t.Helper()
	want, subjects := summariesOf(t, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.mu.state
	if want.Msgs == 0 {
		// An empty stream's first sequence is not a message's (0 when
		// new, past the last after a purge).
		want.FirstSeq = got.FirstSeq
	}
	if got.Msgs != want.Msgs || got.Bytes != want.Bytes || got.FirstSeq != want.FirstSeq || got.FirstTime != want.FirstTime {
		t.Errorf("step %d: state msgs %d bytes %d first %d@%d; the messages say msgs %d bytes %d first %d@%d",
			step, got.Msgs, got.Bytes, got.FirstSeq, got.FirstTime, want.Msgs, want.Bytes, want.FirstSeq, want.FirstTime)
	}
	compareSubjects(t, fmt.Sprintf("step %d: ", step), s.mu.subjects, subjects)
}

// summariesOf reads s's messages and returns the state summary and the
// per-subject summaries they make (LastSeq and LastTime aside).
func summariesOf(t *testing.T, s *stream) (store.StreamState, map[string]subjectState) {
	t.Helper()
	var st store.StreamState
	subjects := map[string]subjectState{}
	err := s.ap.st.ScanMsgs(s.id, 0, ^uint64(0), func(m *store.Message) error {
		if st.Msgs == 0 {
			st.FirstSeq, st.FirstTime = m.Seq, m.Time
		}
		st.Msgs++
		st.Bytes += storedSize(m)
		ss := subjects[m.Subject]
		if ss.msgs == 0 {
			ss.first = m.Seq
		}
		ss.msgs++
		ss.last = m.Seq
		subjects[m.Subject] = ss
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, subjects
}

// compareSubjects reports where a stream's per-subject summaries differ
// from what its messages make. Called with the stream's mu held.
func compareSubjects(t *testing.T, prefix string, got map[string]*subjectState, want map[string]subjectState) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s%d subjects summarised, the stream holds %d", prefix, len(got), len(want))
	}
	for subj, w := range want {
		if g := got[subj]; g == nil || *g != w {
			t.Errorf("%ssubject %s: summary %+v, the stream holds %+v", prefix, subj, g, w)
		}
	}
}
