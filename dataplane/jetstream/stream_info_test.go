package jetstream

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// TestStreamInfoCounts: num_subjects, num_deleted and deleted details
// stay what a full scan of the stream finds through every kind of
// change after the first STREAM.INFO (publishes, deletes, purges by
// subject, with keep and up to a sequence, limits evicting, rollups).
func TestStreamInfoCounts(t *testing.T) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgs: 400, AllowRollup: true})
	e.mu.Lock()
	s := e.mu.accounts["A"].lookup("S")
	e.mu.Unlock()
	rng := rand.New(rand.NewPCG(1, 2))
	info := func(req string) api.StreamInfoResponse {
		t.Helper()
		var resp api.StreamInfoResponse
		acc.apiCall(t, "$JS.API.STREAM.INFO.S", rawJSON(req), &resp)
		if resp.Error != nil {
			t.Fatalf("info: %v", resp.Error)
		}
		return resp
	}
	check := func(step string) {
		t.Helper()
		subjects := map[string]bool{}
		var held []uint64
		err := s.ap.st.ScanMsgs(s.id, 0, ^uint64(0), func(m *store.Message) error {
			subjects[m.Subject] = true
			held = append(held, m.Seq)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := info(`{"deleted_details":true}`).StreamInfo.State
		var deleted []uint64
		if len(held) > 0 {
			for seq := got.FirstSeq; seq <= got.LastSeq; seq++ {
				if _, ok := slices.BinarySearch(held, seq); !ok {
					deleted = append(deleted, seq)
				}
			}
		}
		if got.NumSubjects != len(subjects) || got.Msgs != uint64(len(held)) ||
			got.NumDeleted != len(deleted) || !slices.Equal(got.Deleted, deleted) {
			t.Fatalf("%s: info says %d subjects, %d msgs, %d deleted %v; the store holds %d subjects, %d msgs, %d deleted %v",
				step, got.NumSubjects, got.Msgs, got.NumDeleted, got.Deleted, len(subjects), len(held), len(deleted), deleted)
		}
	}
	pub := func(n int) {
		for range n {
			publish(t, acc, fmt.Sprintf("s.%d.%d", rng.IntN(4), rng.IntN(40)), nil, []byte("x"))
		}
	}
	pub(300)
	check("first info")
	for round := range 6 {
		pub(150) // past max_msgs: evictions
		check(fmt.Sprintf("round %d publish", round))
		for range 20 {
			var ok api.SuccessResponse
			acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.S", api.MsgDeleteRequest{Seq: s.snapshotState().FirstSeq + uint64(rng.IntN(300))}, &ok)
		}
		check(fmt.Sprintf("round %d deletes", round))
		var pr api.StreamPurgeResponse
		switch round % 3 {
		case 0:
			acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{Subject: fmt.Sprintf("s.%d.>", round%4)}, &pr)
		case 1:
			acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{Subject: "s.1.*", Keep: 3}, &pr)
		case 2:
			acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{Sequence: s.snapshotState().FirstSeq + 50}, &pr)
		}
		if pr.Error != nil {
			t.Fatalf("purge: %v", pr.Error)
		}
		check(fmt.Sprintf("round %d purge", round))
		publish(t, acc, "s.2.roll", []byte("NATS/1.0\r\nNats-Rollup: sub\r\n\r\n"), []byte("r"))
		check(fmt.Sprintf("round %d rollup", round))
	}
	var pr api.StreamPurgeResponse
	acc.apiCall(t, "$JS.API.STREAM.PURGE.S", nil, &pr)
	check("purge all")
	pub(10)
	check("after purge all")

}

// rawJSON is a request body sent as is; "" sends none.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) {
	if r == "" {
		return []byte("{}"), nil
	}
	return []byte(r), nil
}

// TestSubjectsBuildInSteps: summaries built a few index entries per step,
// with publishes, deletes, purges and evictions landing between the
// steps, end up equal to what a scan of the stream finds, subject by
// subject (count, first and last sequence).
func TestSubjectsBuildInSteps(t *testing.T) {
	defer func(n int) { subjectsStep = n }(subjectsStep)
	subjectsStep = 7
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { buildInSteps(t, seed) })
	}
}

func buildInSteps(t *testing.T, seed uint64) {
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgs: 300})
	e.mu.Lock()
	s := e.mu.accounts["A"].lookup("S")
	e.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, 4))
	subj := func() string { return fmt.Sprintf("s.%02d", rng.IntN(30)) }
	for range 250 {
		publish(t, acc, subj(), nil, []byte("x"))
	}
	steps := 0
	for {
		s.mu.Lock()
		done := s.mu.subjects != nil
		s.mu.Unlock()
		if done {
			break
		}
		if r := s.ap.apply(&proposal{s: s, kind: propSubjects}); r.err != nil {
			t.Fatal(r.err)
		}
		steps++
		switch rng.IntN(6) {
		case 0, 1:
			for range 1 + rng.IntN(20) { // some past max_msgs: evictions
				publish(t, acc, subj(), nil, []byte("x"))
			}
		case 2:
			// Deletes near the end hit subjects' newest messages.
			var ok api.SuccessResponse
			st := s.snapshotState()
			for range 3 {
				acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.S", api.MsgDeleteRequest{Seq: st.LastSeq - uint64(rng.IntN(40))}, &ok)
				acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.S", api.MsgDeleteRequest{Seq: st.FirstSeq + uint64(rng.IntN(int(st.LastSeq-st.FirstSeq+1)))}, &ok)
			}
		case 3:
			var pr api.StreamPurgeResponse
			acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{Subject: subj()}, &pr)
		case 4:
			var pr api.StreamPurgeResponse
			acc.apiCall(t, "$JS.API.STREAM.PURGE.S", api.StreamPurgeRequest{Subject: subj(), Keep: 2}, &pr)
		}
		if steps > 10000 {
			t.Fatal("build never ends")
		}
	}
	if steps < 10 {
		t.Fatalf("built in %d steps: the test did not interleave", steps)
	}
	_, want := summariesOf(t, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	compareSubjects(t, "", s.mu.subjects, want)
	t.Logf("built in %d steps", steps)
}

// TestSubjectsBuildStopsInASubject: a step that ends inside a subject,
// then deletes of that subject's newest message read so far and of one
// not read yet: the summary ends with what the stream holds.
func TestSubjectsBuildStopsInASubject(t *testing.T) {
	defer func(n int) { subjectsStep = n }(subjectsStep)
	subjectsStep = 2
	e, acc, _ := openEngine(t, vfs.NewMem())
	createStream(t, acc, api.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	e.mu.Lock()
	s := e.mu.accounts["A"].lookup("S")
	e.mu.Unlock()
	for range 3 {
		publish(t, acc, "s.x", nil, []byte("x"))
	}
	if r := s.ap.apply(&proposal{s: s, kind: propSubjects}); r.err != nil { // reads seqs 1 and 2
		t.Fatal(r.err)
	}
	for _, seq := range []uint64{2, 3} {
		var ok api.SuccessResponse
		acc.apiCall(t, "$JS.API.STREAM.MSG.DELETE.S", api.MsgDeleteRequest{Seq: seq}, &ok)
		if !ok.Success {
			t.Fatalf("delete %d: %+v", seq, ok)
		}
	}
	for range 3 {
		if r := s.ap.apply(&proposal{s: s, kind: propSubjects}); r.err != nil {
			t.Fatal(r.err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := s.mu.subjects["s.x"]; got == nil || *got != (subjectState{msgs: 1, first: 1, last: 1}) {
		t.Fatalf("summary of s.x: %+v, want 1 message, first and last 1", got)
	}
}
