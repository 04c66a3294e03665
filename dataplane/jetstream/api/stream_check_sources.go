package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/contrail/contrail/dataplane/subject"
)

// errBadSubject is the cause nats-server puts in its filter errors.
var errBadSubject = errors.New("invalid subject")

func badSubject(s string) error { return fmt.Errorf("%w %s", errBadSubject, s) }

// srcCtx collects what mirror and source checks learn for the later
// external-prefix checks.
type srcCtx struct {
	streamSubjects   []string
	deliveryPrefixes []string
	apiPrefixes      []string
}

func checkMirror(c *StreamConfig, env StreamEnv) *Error {
	m := c.Mirror
	if m == nil {
		return nil
	}
	switch {
	case c.FirstSeq > 0:
		return NewMirrorWithFirstSeqError()
	case len(c.Subjects) > 0:
		return NewMirrorWithSubjectsError()
	case len(c.Sources) > 0:
		return NewMirrorWithSourcesError()
	case c.AllowMsgCounter:
		return NewMirrorWithCountersError()
	case c.AllowAtomicPublish:
		return NewMirrorWithAtomicPublishError()
	case c.AllowBatchPublish:
		return NewMirrorWithBatchPublishError()
	case c.AllowMsgSchedules:
		return NewMirrorWithMsgSchedulesError()
	}
	if d := m.Consumer; d != nil && !durableSourceOK(m, d) {
		return NewMirrorConsumerConfigInvalidError()
	}
	if m.FilterSubject != "" && len(m.SubjectTransforms) != 0 {
		return NewMirrorMultipleFiltersNotAllowedError()
	}
	if c.SubjectDeleteMarkerTTL > 0 {
		// Markers would take sequence numbers and diverge from the origin.
		return invalid("subject delete markers forbidden on mirrors")
	}
	for i, tr := range m.SubjectTransforms {
		if tr.Source != "" && !validSubject(tr.Source) {
			return NewMirrorInvalidSubjectFilterError(badSubject(tr.Source))
		}
		if err := checkMapping(tr.Source, tr.Destination); err != nil {
			return NewMirrorInvalidTransformDestinationError(err)
		}
		for j, other := range m.SubjectTransforms {
			if i != j && subject.Overlaps(tr.Source, other.Source) {
				return NewMirrorOverlappingSubjectFiltersError()
			}
		}
	}
	if m.External != nil {
		return nil // prefixes are checked in checkSources
	}
	if !ValidName(m.Name) {
		return NewMirrorInvalidStreamNameError()
	}
	if origin, ok := env.lookup(m.Name); ok {
		if c.MaxMsgSize > 0 && origin.MaxMsgSize > 0 && c.MaxMsgSize < origin.MaxMsgSize {
			return NewMirrorMaxMessageSizeTooBigError()
		}
		if env.Pedantic && c.MirrorDirect != origin.AllowDirect {
			return pedantic("origin stream has direct get set, mirror has it disabled")
		}
		// A mirror serves direct gets exactly when its origin does.
		c.MirrorDirect = origin.AllowDirect
	}
	return nil
}

// durableSourceOK checks a mirror's or source's durable consumer: a valid
// name, a literal deliver subject, and no start point or filter of its own.
func durableSourceOK(s *StreamSource, d *StreamSourceDurable) bool {
	return ValidName(d.Name) && validSubject(d.DeliverSubject) && subject.IsLiteral(d.DeliverSubject) &&
		s.OptStartSeq == 0 && s.OptStartTime == nil && s.FilterSubject == ""
}

func checkSources(c *StreamConfig, env StreamEnv) *Error {
	if len(c.Sources) > 0 && c.AllowMsgSchedules {
		return NewSourceWithMsgSchedulesError()
	}
	var ctx srcCtx
	if m := c.Mirror; m != nil {
		ctx.add(m, env)
	}
	seen, durables := map[string]bool{}, map[string]bool{}
	for _, src := range c.Sources {
		if src == nil || !ValidName(src.Name) {
			return NewSourceInvalidStreamNameError()
		}
		if key := src.identity(); seen[key] {
			return NewSourceDuplicateDetectedError()
		} else {
			seen[key] = true
		}
		if src.FilterSubject != "" && len(src.SubjectTransforms) != 0 {
			return NewSourceMultipleFiltersNotAllowedError()
		}
		for _, tr := range src.SubjectTransforms {
			if tr.Source != "" && !validSubject(tr.Source) {
				return NewSourceInvalidSubjectFilterError(badSubject(tr.Source))
			}
			if err := checkMapping(tr.Source, tr.Destination); err != nil {
				return NewSourceInvalidTransformDestinationError(err)
			}
		}
		for i, tr := range src.SubjectTransforms {
			for j, other := range src.SubjectTransforms {
				if i != j && subject.SubsetOf(tr.Source, other.Source) {
					return NewSourceOverlappingSubjectFiltersError()
				}
			}
		}
		if d := src.Consumer; d != nil {
			if !durableSourceOK(src, d) {
				return NewSourceConsumerConfigInvalidError()
			}
			key := src.Name + "\x00" + externalAPI(src) + "\x00" + d.Name
			if durables[key] {
				return NewSourceConsumerDuplicateError()
			}
			durables[key] = true
		}
		if src.External == nil {
			if origin, ok := env.lookup(src.Name); ok &&
				c.MaxMsgSize > 0 && origin.MaxMsgSize > 0 && c.MaxMsgSize < origin.MaxMsgSize {
				return NewSourceMaxMessageSizeTooBigError()
			}
		}
		ctx.add(src, env)
	}
	return ctx.checkPrefixes()
}

func externalAPI(s *StreamSource) string {
	if s.External == nil {
		return ""
	}
	return s.External.APIPrefix
}

// identity is what makes two sources the same source: the stream, where it
// lives, the durable used, and the subjects taken and how they are mapped.
func (s *StreamSource) identity() string {
	parts := []string{s.Name, externalAPI(s)}
	if s.Consumer != nil {
		parts = append(parts, "C="+s.Consumer.Name)
	}
	orFWC := func(v string) string {
		if v == "" {
			return ">"
		}
		return v
	}
	if len(s.SubjectTransforms) == 0 {
		parts = append(parts, orFWC(s.FilterSubject), ">")
	} else {
		for _, tr := range s.SubjectTransforms {
			parts = append(parts, orFWC(tr.Source), orFWC(tr.Destination))
		}
	}
	return strings.Join(parts, "\x00")
}

func (ctx *srcCtx) add(s *StreamSource, env StreamEnv) {
	if s.External == nil {
		if origin, ok := env.lookup(s.Name); ok {
			ctx.streamSubjects = append(ctx.streamSubjects, origin.Subjects...)
		}
		return
	}
	if p := s.External.DeliverPrefix; p != "" {
		ctx.deliveryPrefixes = append(ctx.deliveryPrefixes, p)
	}
	if p := s.External.APIPrefix; p != "" {
		ctx.apiPrefixes = append(ctx.apiPrefixes, p)
	}
}

// checkPrefixes keeps external prefixes from capturing our own traffic.
func (ctx *srcCtx) checkPrefixes() *Error {
	for _, pfx := range ctx.deliveryPrefixes {
		if !subject.ValidLiteralString(pfx) {
			return NewExternalDeliverPrefixInvalidError(pfx)
		}
		for _, sub := range ctx.streamSubjects {
			if subject.Overlaps(sub, pfx+"."+sub) {
				return NewExternalDeliverPrefixOverlapsError(pfx, sub)
			}
		}
	}
	for _, pfx := range ctx.apiPrefixes {
		if !subject.ValidLiteralString(pfx) {
			return invalid("stream external api prefix %q must be a valid subject without wildcards", pfx)
		}
		if subject.Overlaps(pfx, "$JS.API") {
			return NewExternalAPIPrefixOverlapsError(pfx, "$JS.API")
		}
	}
	return nil
}

// maxCycleVisits bounds the cycle walk over stored configs.
const maxCycleVisits = 10_000

// checkCycles refuses a stream that would, through its sources and mirror,
// end up sourcing its own messages.
func checkCycles(c *StreamConfig, env StreamEnv) *Error {
	toVisit := []*StreamConfig{c}
	visited := map[string]bool{}
	for n := 0; len(toVisit) > 0 && n < maxCycleVisits; n++ {
		cfg := toVisit[0]
		toVisit = toVisit[1:]
		visited[cfg.Name] = true
		for _, src := range cfg.Sources {
			if src == nil || src.External != nil {
				continue
			}
			if visited[src.Name] {
				if overlapsAny(cfg.Subjects, src.FilterSubject) {
					return invalid("detected cycle")
				}
			} else if next, ok := env.lookup(src.Name); ok {
				toVisit = append(toVisit, next)
			}
		}
		if m := cfg.Mirror; m != nil && m.External == nil {
			if visited[m.Name] {
				return invalid("detected cycle")
			}
			if next, ok := env.lookup(m.Name); ok {
				toVisit = append(toVisit, next)
			}
		}
	}
	return nil
}

func overlapsAny(subjects []string, filter string) bool {
	if filter == "" {
		return true
	}
	for _, s := range subjects {
		if subject.Overlaps(s, filter) {
			return true
		}
	}
	return false
}
