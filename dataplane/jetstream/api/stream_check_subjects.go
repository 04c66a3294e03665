package api

import "github.com/contrail/contrail/dataplane/subject"

// checkSubjects defaults a plain stream's subjects to its name and checks
// a stream's own subjects: valid, distinct, not overlapping each other, and
// not capturing the server's API traffic unless the stream is no-ack.
func checkSubjects(c *StreamConfig, _ StreamEnv) *Error {
	if len(c.Subjects) == 0 {
		c.fillSubjects()
	} else {
		if c.Mirror != nil {
			return NewMirrorWithSubjectsError()
		}
		seen := make(map[string]bool, len(c.Subjects))
		// The first subject overlapping a later one is reported, with the
		// first such later one, as comparing every pair would find it; the
		// set finds whether there is one per token, not per subject (20,000
		// subjects took 10 s pairwise).
		set := subject.NewSet(validSubjects(c.Subjects))
		budget := filterCheckBudget
		for i, subj := range c.Subjects {
			if err := checkStreamSubject(c, subj, seen); err != nil {
				return err
			}
			overlaps, within := set.OverlapsOther(subj, &budget)
			if !within {
				return invalid("stream subjects are too complex to check")
			}
			if overlaps {
				for _, other := range c.Subjects[i+1:] {
					if subject.Overlaps(other, subj) {
						return invalid("subject %q overlaps with %q", subj, other)
					}
				}
			}
			seen[subj] = true
		}
	}
	if len(c.Subjects) == 0 && len(c.Sources) == 0 && c.Mirror == nil {
		return invalid("stream needs at least one configured subject or be a source/mirror")
	}
	return nil
}

func checkStreamSubject(c *StreamConfig, subj string, seen map[string]bool) *Error {
	if !validSubject(subj) {
		return invalid("invalid subject")
	}
	if seen[subj] {
		return invalid("duplicate subjects detected")
	}
	if subj == ">" {
		if !c.NoAck {
			return invalid("capturing all subjects requires no-ack to be true")
		}
		if c.Replicas != 1 {
			return invalid("capturing all subjects requires replicas of 1")
		}
	}
	if c.NoAck {
		return nil
	}
	// A stream that acks would answer the API's own requests and replies.
	for _, ns := range []string{"$JS.>", "$JSC.>", "$NRG.>"} {
		if subject.Overlaps(subj, ns) && !subject.SubsetOf(subj, "$JS.EVENT.>") {
			return invalid("subjects that overlap with jetstream api require no-ack to be true")
		}
	}
	if subject.Overlaps(subj, "$SYS.>") && !subject.SubsetOf(subj, "$SYS.ACCOUNT.>") {
		return invalid("subjects that overlap with system api require no-ack to be true")
	}
	return nil
}

// fillSubjects gives a stream with no subjects, no mirror and no sources
// the subject of its own name, as nats-server does.
func (c *StreamConfig) fillSubjects() {
	if len(c.Subjects) == 0 && c.Mirror == nil && len(c.Sources) == 0 && c.Name != "" {
		c.Subjects = []string{c.Name}
	}
}

func checkTransform(c *StreamConfig, _ StreamEnv) *Error {
	t := c.SubjectTransform
	if t == nil {
		return nil
	}
	if t.Source != "" && !validSubject(t.Source) {
		return NewStreamTransformInvalidSourceError(badSubject(t.Source))
	}
	if err := checkMapping(t.Source, t.Destination); err != nil {
		return NewStreamTransformInvalidDestinationError(err)
	}
	return nil
}

// checkRepublish checks that republished messages cannot flow back into
// the stream and that the mapping is usable.
func checkRepublish(c *StreamConfig, env StreamEnv) *Error {
	rp := c.RePublish
	if rp == nil {
		return nil
	}
	if env.Pedantic && rp.Source == "" {
		return pedantic("republish source can not be empty")
	}
	if env.Pedantic && c.implicitRepublish() {
		return pedantic("implicit republish based on subject transform")
	}
	c.fillRepublish()
	for _, subj := range c.Subjects {
		if subject.Overlaps(rp.Destination, subj) {
			return invalid("stream configuration for republish destination forms a cycle")
		}
	}
	if !validSubject(rp.Source) || checkMapping(rp.Source, rp.Destination) != nil {
		return invalid("stream configuration for republish with transform from '%s' to '%s' not valid",
			rp.Source, rp.Destination)
	}
	return nil
}

// implicitRepublish is the ">" to ">" rule on a stream whose single
// subject is transformed: it means "republish the transformed subject".
func (c *StreamConfig) implicitRepublish() bool {
	rp := c.RePublish
	src := rp.Source
	if src == "" {
		src = ">"
	}
	return rp.Destination == ">" && src == ">" && c.SubjectTransform != nil &&
		len(c.Subjects) == 1 && c.SubjectTransform.Source == c.Subjects[0]
}

func (c *StreamConfig) fillRepublish() {
	rp := c.RePublish
	if rp == nil {
		return
	}
	implicit := c.implicitRepublish()
	if rp.Source == "" {
		rp.Source = ">"
	}
	if implicit {
		rp.Source, rp.Destination = c.SubjectTransform.Destination, c.SubjectTransform.Destination
	}
}

// validSubjects are the valid ones of subjects (the others are refused
// at their own position).
func validSubjects(subjects []string) []string {
	out := make([]string, 0, len(subjects))
	for _, s := range subjects {
		if validSubject(s) {
			out = append(out, s)
		}
	}
	return out
}
