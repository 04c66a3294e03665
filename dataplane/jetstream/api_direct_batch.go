package jetstream

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
	"github.com/contrail/contrail/dataplane/subject"
)

// Batched direct gets (ADR-31): a run of messages from a sequence or time
// ("batch", optionally on next_by_subj), or the newest message of every
// subject matching multi_last, optionally as of up_to_seq / up_to_time.
// Each message carries the direct get headers plus Nats-Num-Pending (what
// is left after it) and Nats-Last-Sequence (the message sent before it,
// 0 for the first); the run ends with a 204 EOB status, as nats-server
// sends them.

// directMaxBytes is what one batched get sends at most when the request
// sets no max_bytes: nats-server's default max_pending for a client.
const directMaxBytes = 64 << 20

// directMaxResults bounds the subjects a multi_last get may match, as
// nats-server bounds it; more is refused with 413.
const directMaxResults = 1024

// Status replies of batched direct gets.
var (
	directNoResults   = []byte("NATS/1.0 404 No Results\r\n\r\n")
	directTooMany     = []byte("NATS/1.0 413 Too Many Results\r\n\r\n")
	errTooManyResults = errors.New("too many matching results for request")
)

func directEOB(pending, last uint64, upTo ...uint64) []byte {
	kv := []string{api.HeaderNumPending, strconv.FormatUint(pending, 10), api.HeaderLastSequence, strconv.FormatUint(last, 10)}
	for _, u := range upTo {
		kv = append(kv, api.HeaderUpToSequence, strconv.FormatUint(u, 10))
	}
	return appendHeaderBlock(nil, "204 EOB", kv...)
}

// batchHeader is a batched reply's header block.
func batchHeader(m *store.Message, stream string, pending, last uint64) []byte {
	return directHeader(m, stream, api.HeaderNumPending, strconv.FormatUint(pending, 10),
		api.HeaderLastSequence, strconv.FormatUint(last, 10))
}

// directBatch answers a batched get: up to req.Batch messages from
// req.Seq (or the first at req.StartTime) on req.NextFor (or any
// subject), until max_bytes is sent, then EOB.
func (s *stream) directBatch(a *jsAccount, req *api.MsgGetRequest, reply string) {
	name := s.name()
	if req.NextFor != "" && !subject.ValidFilterString(req.NextFor) {
		a.acc.Publish(reply, "", directNotFound, nil)
		return
	}
	seq := req.Seq
	if req.StartTime != nil {
		var err error
		if seq, err = s.firstAtOrAfter(unixNanos(*req.StartTime)); err != nil {
			a.acc.Publish(reply, "", directBadRequest, nil)
			return
		}
	}
	var filters []string
	if req.NextFor != "" {
		filters = []string{req.NextFor}
	}
	validThrough := s.snapshotState().LastSeq
	pending, err := s.countFrom(filters, seq)
	if err != nil {
		a.acc.Publish(reply, "", directBadRequest, nil)
		return
	}
	limit := req.MaxBytes
	if limit <= 0 {
		limit = directMaxBytes
	}
	var last uint64
	sent := 0
	for i := 0; i < req.Batch; i++ {
		m, err := s.ap.st.NextMsg(s.id, max(seq, 1), req.NextFor)
		if err == nil {
			err = s.hydrate(context.Background(), &m)
		}
		if err != nil {
			if req.Batch > 1 && i > 0 {
				break // what was found is followed by EOB
			}
			a.acc.Publish(reply, "", directNotFound, nil)
			return
		}
		seq = m.Seq + 1
		var hdr []byte
		if !req.NoHeaders {
			// Only a run with headers counts its pending down (the
			// count in the EOB of a no_hdr run is as of its start), as
			// on nats-server.
			if pending > 0 {
				pending--
			}
			hdr = batchHeader(&m, name, pending, last)
		}
		a.acc.Publish(reply, "", hdr, m.Data)
		last = m.Seq
		if sent += len(m.Subject) + len(m.Header) + len(m.Data); sent >= limit {
			break
		}
	}
	if s.snapshotState().LastSeq > validThrough {
		// Messages came in meanwhile: count again from where the run ended.
		if pending, err = s.countFrom(filters, seq); err != nil {
			return
		}
	}
	a.acc.Publish(reply, "", directEOB(pending, last), nil)
}

// directMultiLast answers a multi_last get: the newest message at or
// below up_to_seq (or before up_to_time) of each subject matching the
// filters, in sequence order, from req.Seq on, up to req.Batch of them,
// then EOB with the sequence the answer is as of.
func (s *stream) directMultiLast(a *jsAccount, req *api.MsgGetRequest, reply string) {
	name := s.name()
	limit := req.MaxBytes
	if limit <= 0 {
		limit = directMaxBytes
	}
	st := s.snapshotState()
	upTo := req.UpToSeq
	if req.UpToTime != nil {
		at, err := s.firstAtOrAfter(unixNanos(*req.UpToTime))
		if err != nil {
			a.acc.Publish(reply, "", directBadRequest, nil)
			return
		}
		if at <= st.FirstSeq {
			a.acc.Publish(reply, "", directNoResults, nil)
			return
		}
		upTo = at - 1 // the last message stored before the time
	}
	if upTo == 0 {
		upTo = st.LastSeq
	}
	seqs, err := s.lastSeqsUpTo(req.MultiLastFor, upTo, directMaxResults)
	switch {
	case errors.Is(err, errTooManyResults):
		a.acc.Publish(reply, "", directTooMany, nil)
		return
	case err != nil:
		a.acc.Publish(reply, "", appendHeaderBlock(nil, "500 "+err.Error()), nil)
		return
	case len(seqs) == 0:
		a.acc.Publish(reply, "", directNoResults, nil)
		return
	}
	pending := uint64(len(seqs))
	var last uint64
	sentBytes, sent := 0, 0
	for _, seq := range seqs {
		if pending > 0 {
			pending--
		}
		if seq < req.Seq {
			continue
		}
		m, err := s.ap.st.LoadMsg(s.id, seq)
		if err == nil {
			err = s.hydrate(context.Background(), &m)
		}
		if err != nil {
			a.acc.Publish(reply, "", directNotFound, nil)
			return
		}
		// Always with headers: no_hdr does not apply to multi_last on
		// nats-server either.
		a.acc.Publish(reply, "", batchHeader(&m, name, pending, last), m.Data)
		last = m.Seq
		if sentBytes += len(m.Subject) + len(m.Header) + len(m.Data); sentBytes >= limit {
			break
		}
		if sent++; req.Batch > 0 && sent >= req.Batch {
			break
		}
	}
	a.acc.Publish(reply, "", directEOB(pending, last, upTo), nil)
}

// lastSeqsUpTo lists, ascending, the newest sequence at or below upTo of
// every subject matching one of filters; more than maxResults is
// errTooManyResults. Invalid filters match nothing.
func (s *stream) lastSeqsUpTo(filters []string, upTo uint64, maxResults int) ([]uint64, error) {
	seen := map[uint64]bool{}
	var out []uint64
	add := func(seq uint64) {
		if !seen[seq] {
			seen[seq] = true
			out = append(out, seq)
		}
	}
	for _, f := range filters {
		if !subject.ValidFilterString(f) {
			continue
		}
		var later []string // subjects whose newest message is past upTo
		err := s.ap.st.SubjectStates(s.id, f, func(ss store.SubjectState) error {
			switch {
			case ss.Last <= upTo:
				add(ss.Last)
			case ss.Msgs > 1 && ss.First <= upTo:
				later = append(later, ss.Subject)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, subj := range later {
			seq, ok, err := s.ap.st.PrevSubjectSeq(s.id, subj, upTo+1)
			if err != nil {
				return nil, err
			}
			if ok {
				add(seq)
			}
		}
		if len(out) > maxResults {
			return nil, errTooManyResults
		}
	}
	slices.Sort(out)
	return out, nil
}
