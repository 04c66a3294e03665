package jetstream

import (
	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// subjectsStep is how many subject index entries one step of a summary
// build reads while it holds the applier (a variable so that tests can
// take small steps).
var subjectsStep = 4 << 10

// subjectBuild is a build of a stream's per-subject summaries in
// progress: the subject index is read in steps of subjectsStep entries,
// each one proposal on the applier, so building the summaries of a large
// stream holds the applier (which every stream of its store shares) for
// one step at a time, not for the whole index. Between steps the apply
// path keeps m current for the part of the index already read.
//
// Invariant: m summarises exactly the index entries before next.
type subjectBuild struct {
	m    map[string]*subjectState
	next store.IndexCursor
}

// summariesForLocked returns the summaries a change to the index entry
// (subj, seq) must update: the stream's, the partial ones of a build in
// progress if the build has read past that entry, or nil.
func (s *stream) summariesForLocked(subj string, seq uint64) map[string]*subjectState {
	if s.mu.subjects != nil {
		return s.mu.subjects
	}
	if b := s.mu.build; b != nil && b.next.Before(subj, seq) {
		return b.m
	}
	return nil
}

// buildSubjectsLocked takes the summary build up to limit index entries
// further (limit 0: to the end) and installs the summaries once the whole
// index has been read; done reports that they are installed.
func (s *stream) buildSubjectsLocked(ap *applier, limit int) (done bool, err error) {
	if s.mu.subjects != nil {
		return true, nil
	}
	b := s.mu.build
	if b == nil {
		b = &subjectBuild{m: map[string]*subjectState{}}
		s.mu.build = b
	}
	if err := ap.visible(); err != nil {
		return false, err
	}
	next, more, err := ap.rd.SubjectStatesFrom(s.id, b.next, limit, func(st store.SubjectState) {
		if ss := b.m[st.Subject]; ss != nil {
			// The rest of a subject the last step stopped in.
			ss.msgs += st.Msgs
			ss.last = st.Last
			return
		}
		b.m[st.Subject] = &subjectState{msgs: st.Msgs, first: st.First, last: st.Last}
	})
	if err != nil {
		return false, api.NewStreamStoreFailedError(err)
	}
	if more {
		b.next = next
		return false, nil
	}
	s.mu.subjects, s.mu.build = b.m, nil
	return true, nil
}

// subjectsPurgedLocked resets the summaries after a purge emptied the
// stream's subject index: kept summaries become empty, and a build in
// progress starts over (it then finds nothing to read).
func (s *stream) subjectsPurgedLocked() {
	if s.mu.subjects != nil {
		s.mu.subjects = map[string]*subjectState{}
	}
	s.mu.build = nil
}

// subjectEndsLocked fixes a summary's first and last sequence after
// message seq left its subject with messages still on it: the last one
// first, since with one message left the first is the last.
func (s *stream) subjectEndsLocked(subj string, seq uint64, ss *subjectState, ap *applier) error {
	if ss.last == seq {
		// The newest message went (a delete): the one before it is the
		// last now, as Nats-Expected-Last-Subject-Sequence must see. (For
		// a build in progress, that one was read already: it is before
		// seq, which was.)
		if err := ap.visible(); err != nil {
			return err
		}
		prev, ok, err := ap.rd.PrevSubjectSeq(s.id, subj, seq)
		if err != nil {
			return api.NewStreamStoreFailedError(err)
		}
		if ok {
			ss.last = prev
		}
	}
	if ss.first == seq {
		return s.advanceSubjectFirstLocked(subj, ss, ap)
	}
	return nil
}
