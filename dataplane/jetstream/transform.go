package jetstream

import (
	"strconv"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/subject"
)

// transforms are a stream config's compiled subject mappings.
type transforms struct {
	input     *subject.Transform // subject_transform: applied before storing
	republish *subject.Transform // republish: stored subject → destination
}

// compileTransforms builds the mappings of cfg. The API checked the
// syntax; a mapping that still fails to compile is reported as invalid.
func compileTransforms(cfg *api.StreamConfig) (transforms, *api.Error) {
	var t transforms
	var err error
	if st := cfg.SubjectTransform; st != nil && st.Destination != "" {
		if t.input, err = subject.NewTransform(st.Source, st.Destination); err != nil {
			return t, api.NewStreamTransformInvalidDestinationError(err)
		}
	}
	if rp := cfg.RePublish; rp != nil && rp.Destination != "" {
		if t.republish, err = subject.NewTransform(rp.Source, rp.Destination); err != nil {
			return t, api.NewStreamInvalidConfigError(err)
		}
	}
	return t, nil
}

// republish sends a stored message on to the republish destination, with
// the headers that say where it is stored (ADR: republish).
func (s *stream) republish(p *proposal, seq uint64) {
	s.mu.Lock()
	tr, cfg := s.mu.tr.republish, s.mu.cfg
	s.mu.Unlock()
	if tr == nil {
		return
	}
	dest, ok := tr.Apply(p.subject)
	if !ok || !subject.ValidLiteralString(dest) {
		return
	}
	hdr := addHeader(p.hdr, api.HeaderStream, cfg.Name)
	hdr = addHeader(hdr, api.HeaderSubject, p.subject)
	hdr = addHeader(hdr, api.HeaderSequence, strconv.FormatUint(seq, 10))
	hdr = addHeader(hdr, api.HeaderLastSequence, strconv.FormatUint(seq-1, 10))
	data := p.data
	if cfg.RePublish.HeadersOnly {
		hdr = addHeader(hdr, api.HeaderMsgSize, strconv.Itoa(len(p.data)))
		data = nil
	}
	p.acct.acc.Publish(dest, "", hdr, data)
}
