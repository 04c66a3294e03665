package jetstream

import (
	"fmt"
	"testing"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// TestSentinelOutcomes: the two outcomes a publish is not answered for
// (or answered with no responders) are found by identity through
// wrapping, an equal-coded error is an answer, and a success (nil, every
// acknowledged publish) costs no allocation to check.
func TestSentinelOutcomes(t *testing.T) {
	wrap := func(e error) error { return fmt.Errorf("partition 3: %w", e) }
	for _, c := range []struct {
		err               error
		unknown, notAdded bool
	}{
		{nil, false, false},
		{errFateUnknown, true, false},
		{wrap(errFateUnknown), true, false},
		{errNotAppended, false, true},
		{wrap(errNotAppended), false, true},
		// Same codes, another error: a real 10008 is an answer.
		{&api.Error{Code: 503, ErrCode: api.CodeClusterNotAvailable}, false, false},
		{fmt.Errorf("disk: %w", fmt.Errorf("io")), false, false},
	} {
		if got := isFateUnknown(c.err); got != c.unknown {
			t.Errorf("isFateUnknown(%v) = %v", c.err, got)
		}
		if got := isNotAppended(c.err); got != c.notAdded {
			t.Errorf("isNotAppended(%v) = %v", c.err, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { isFateUnknown(nil); isNotAppended(nil) }); n != 0 {
		t.Errorf("checking a success allocates %v times", n)
	}
}
