package api

import (
	"strings"

	"github.com/contrail/contrail/dataplane/subject"
)

// Size limits nats-server enforces on configurations; a client that fits
// in them there must fit here, and one that does not must get the same error.
const (
	// MaxNameLen bounds stream and durable consumer names: names become
	// subject tokens and, in nats-server, directory names.
	MaxNameLen = 255
	// MaxDescriptionLen bounds stream and consumer descriptions.
	MaxDescriptionLen = 4 * 1024
	// MaxMetadataLen bounds the summed lengths of metadata keys and values.
	MaxMetadataLen = 128 * 1024
	// MaxReplicas is the largest num_replicas a stream may ask for.
	MaxReplicas = 5
)

// ValidName reports whether name may name a stream or consumer: not empty,
// and free of whitespace, the subject characters '.', '*', '>' and the
// path separators '/' and '\'. Names are embedded in API subjects, so any
// of those would change which subject a request lands on.
func ValidName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n\f.*>/\\")
}

// HasPathSeparator reports whether name holds '/' or '\', which the API
// handlers reject with their own err_codes (10128 for streams, 10127 for
// consumers) before any other name check.
func HasPathSeparator(name string) bool {
	return strings.ContainsAny(name, `\/`)
}

// metadataLen is the size nats-server charges metadata against MaxMetadataLen.
func metadataLen(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// validSubject is the nats-server test for stream subjects, filters and
// deliver subjects: wildcards allowed as whole tokens.
func validSubject(s string) bool { return subject.ValidFilterString(s) }
