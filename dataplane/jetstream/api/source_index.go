package api

import (
	"crypto/sha256"
	"strings"
	"time"
)

// StreamIdentity is a stream's identity as nats-server derives it from its
// creation time: a stream deleted and made again has another.
func StreamIdentity(created time.Time) string {
	return shortHash(created.UTC().Format(time.RFC3339Nano))
}

// IndexName is what names a source within its stream, as nats-server
// composes it: the origin's name (with a hash of the external API prefix
// and of the durable consumer's name, when given), the filter subjects and
// the transform destinations, space separated. The stream's progress per
// source is kept under it, and the Nats-Stream-Source header is built from
// it.
func (s *StreamSource) IndexName() string {
	name := s.Name
	if s.External != nil {
		name += ":" + shortHash(s.External.APIPrefix)
	}
	if s.Consumer != nil {
		name += ":C=" + shortHash(s.Consumer.Name)
	}
	orFWC := func(v string) string {
		if v == "" {
			return ">"
		}
		return v
	}
	src, dst := orFWC(s.FilterSubject), ">"
	if len(s.SubjectTransforms) > 0 {
		var srcs, dsts []string
		for _, tr := range s.SubjectTransforms {
			srcs = append(srcs, orFWC(tr.Source))
			dsts = append(dsts, orFWC(tr.Destination))
		}
		src, dst = strings.Join(srcs, "\f"), strings.Join(dsts, "\f")
	}
	return name + " " + src + " " + dst
}

// shortHash is the 8-character hash nats-server puts in index names and
// identities: the first bytes of the SHA-256, each as a base-62 digit.
func shortHash(v string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(v))
	var out [8]byte
	for i := range out {
		out[i] = digits[int(sum[i]%62)]
	}
	return string(out[:])
}
