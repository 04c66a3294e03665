package store

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/contrail/contrail/dataplane/subject"
)

// model is the property test's reference: what each stream should hold.
type model struct {
	msgs    map[uint64]map[uint64]string // stream → seq → subject
	lastSeq map[uint64]uint64
}

func (m *model) stream(id uint64) map[uint64]string {
	if m.msgs[id] == nil {
		m.msgs[id] = map[uint64]string{}
	}
	return m.msgs[id]
}

var propSubjects = []string{"a", "a.b", "a.c", "b.c", "a.b.c", "x\x00y"}

// TestPropertyPebbleMatchesMemory drives both engines through the same
// seeded random walk of mutations (with Pebble reopens) and checks after
// every step batch that their full contents are byte-identical and that
// reads agree with a model.
func TestPropertyPebbleMatchesMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 7))
	ph, mh := openPebbleHarness(t), &harness{t: t, kind: "mem", s: NewMem()}
	defer ph.close()
	defer mh.close()
	md := &model{msgs: map[uint64]map[uint64]string{}, lastSeq: map[uint64]uint64{}}
	const ops = 2000
	for done := 0; done < ops; {
		if rng.IntN(40) == 0 {
			ph.reopen()
			continue
		}
		pb, mb := ph.s.NewBatch(), mh.s.NewBatch()
		for n := 1 + rng.IntN(12); n > 0; n-- {
			randomOp(rng, md, pb, mb)
			done++
			if rng.IntN(8) == 0 {
				// Reads through the batch see every write so far, in
				// the order made, however Pebble's batch holds them
				// back (pebbleBatch's runs).
				pr, mr := pb.Reader(), mb.Reader()
				checkSame(t, pr, mr)
				randomOp(rng, md, pb, mb)
				done++
				checkDedupSame(t, pr, mr)
			}
		}
		// Unsynced commits are read back at once, and a reopen (a clean
		// close) keeps them.
		must(t, pb.Commit(rng.IntN(2) == 0))
		must(t, mb.Commit(false))
		pb.Close()
		mb.Close()
		if done%100 < 4 {
			checkSame(t, ph.s, mh.s)
			checkModel(t, rng, md, ph.s)
		}
	}
	checkSame(t, ph.s, mh.s)
	checkModel(t, rng, md, ph.s)
	checkModel(t, rng, md, mh.s)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// randomOp applies one random mutation to both batches and the model.
func randomOp(rng *rand.Rand, md *model, bs ...*Batch) {
	stream := uint64(1 + rng.IntN(3))
	msgs := md.stream(stream)
	each := func(fn func(b *Batch)) {
		for _, b := range bs {
			fn(b)
		}
	}
	switch r := rng.IntN(100); {
	case r < 55: // publish
		md.lastSeq[stream]++
		m := &Message{Seq: md.lastSeq[stream], Subject: propSubjects[rng.IntN(len(propSubjects))],
			Data: []byte(fmt.Sprint(rng.Uint32())), Time: rng.Int64N(1e12), TTL: rng.Int64N(3) - 1}
		msgs[m.Seq] = m.Subject
		each(func(b *Batch) { b.PutMsg(stream, m) })
		if rng.IntN(3) == 0 {
			d := DedupEntry{ID: fmt.Sprint("id", rng.IntN(50)), Seq: m.Seq, Time: m.Time}
			each(func(b *Batch) { b.PutDedup(stream, d) })
		}
	case r < 70 && len(msgs) > 0: // delete one
		seqs := slices.Sorted(maps.Keys(msgs))
		seq := seqs[rng.IntN(len(seqs))]
		each(func(b *Batch) { b.DeleteMsg(stream, seq, msgs[seq]) })
		delete(msgs, seq)
	case r < 82: // purge a range, keeping the index exact
		first := uint64(rng.IntN(int(md.lastSeq[stream] + 2)))
		last := first + uint64(rng.IntN(10))
		subjects := map[string]bool{}
		for seq, subj := range msgs {
			if seq >= first && seq < last {
				subjects[subj] = true
				delete(msgs, seq)
			}
		}
		each(func(b *Batch) {
			b.PurgeRange(stream, first, last)
			for _, subj := range slices.Sorted(maps.Keys(subjects)) {
				b.UnindexRange(stream, subj, first, last)
			}
		})
	case r < 85:
		clear(msgs)
		each(func(b *Batch) { b.PurgeAll(stream) })
	case r < 88:
		clear(msgs)
		md.lastSeq[stream] = 0
		each(func(b *Batch) { b.DeleteStream(stream) })
	case r < 94:
		st := StreamState{LastSeq: md.lastSeq[stream], Msgs: uint64(len(msgs)), LastTime: rng.Int64()}
		each(func(b *Batch) {
			b.PutStream(StreamMeta{ID: stream, Name: fmt.Sprint("S", stream), Config: []byte("{}")})
			b.PutStreamState(stream, st)
		})
	default:
		name := fmt.Sprint("c", rng.IntN(3))
		state := []byte(fmt.Sprint(rng.Uint32()))
		del := rng.IntN(4) == 0
		each(func(b *Batch) {
			if del {
				b.DeleteConsumer(stream, name)
				return
			}
			b.PutConsumer(stream, name, []byte("{}"))
			b.PutConsumerState(stream, name, state)
		})
	}
}

// checkDedupSame compares the two stores' point reads of every dedup id
// randomOp writes.
func checkDedupSame(t *testing.T, a, b *Store) {
	t.Helper()
	for stream := uint64(1); stream <= 3; stream++ {
		for i := range 50 {
			id := fmt.Sprint("id", i)
			da, errA := a.Dedup(stream, id)
			db, errB := b.Dedup(stream, id)
			if da != db || (errA == nil) != (errB == nil) {
				t.Fatalf("stream %d dedup %q: pebble %+v, %v; mem %+v, %v", stream, id, da, errA, db, errB)
			}
		}
	}
}

// checkSame compares the two stores' full raw contents.
func checkSame(t *testing.T, a, b *Store) {
	t.Helper()
	da, db := dump(t, a, nil, nil), dump(t, b, nil, nil)
	for i := range min(len(da), len(db)) {
		if !bytes.Equal(da[i].k, db[i].k) || !bytes.Equal(da[i].v, db[i].v) {
			t.Fatalf("record %d differs: pebble %s, mem %s", i, describeKey(da[i].k), describeKey(db[i].k))
		}
	}
	if len(da) != len(db) {
		t.Fatalf("pebble has %d records, mem %d", len(da), len(db))
	}
}

// checkModel compares a store's reads with the model.
func checkModel(t *testing.T, rng *rand.Rand, md *model, s *Store) {
	t.Helper()
	for stream, msgs := range md.msgs {
		var got []uint64
		must(t, s.ScanMsgs(stream, 0, math.MaxUint64, func(m *Message) error {
			if msgs[m.Seq] != m.Subject {
				t.Fatalf("stream %d seq %d: subject %q, model %q", stream, m.Seq, m.Subject, msgs[m.Seq])
			}
			got = append(got, m.Seq)
			return nil
		}))
		if want := slices.Sorted(maps.Keys(msgs)); !slices.Equal(got, want) {
			t.Fatalf("stream %d: seqs %v, model %v", stream, got, want)
		}
		var states []SubjectState
		must(t, s.SubjectStates(stream, "", func(st SubjectState) error { states = append(states, st); return nil }))
		if want := modelStates(msgs); !slices.Equal(states, want) {
			t.Fatalf("stream %d: subject states %v, model %v", stream, states, want)
		}
		for range 5 {
			filter := []string{"", ">", "a", "a.*", "*.c", "a.>", "a.b.c", "x\x00y"}[rng.IntN(8)]
			start := uint64(rng.IntN(int(md.lastSeq[stream] + 2)))
			m, err := s.NextMsg(stream, start, filter)
			want, ok := modelNext(msgs, start, filter)
			if ok != (err == nil) || ok && m.Seq != want {
				t.Fatalf("stream %d NextMsg(%d, %q) = %d, %v; model %d, %v", stream, start, filter, m.Seq, err, want, ok)
			}
		}
	}
}

func modelStates(msgs map[uint64]string) []SubjectState {
	by := map[string]*SubjectState{}
	for _, seq := range slices.Sorted(maps.Keys(msgs)) {
		subj := msgs[seq]
		if st := by[subj]; st != nil {
			st.Msgs, st.Last = st.Msgs+1, seq
		} else {
			by[subj] = &SubjectState{Subject: subj, Msgs: 1, First: seq, Last: seq}
		}
	}
	var out []SubjectState
	for _, subj := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[subj])
	}
	return out
}

func modelNext(msgs map[uint64]string, start uint64, filter string) (uint64, bool) {
	for _, seq := range slices.Sorted(maps.Keys(msgs)) {
		if seq >= start && (matchesAll(filter) || subject.Matches(filter, msgs[seq])) {
			return seq, true
		}
	}
	return 0, false
}
