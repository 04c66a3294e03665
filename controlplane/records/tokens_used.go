package records

import (
	"errors"
	"fmt"
	"time"

	"github.com/contrail/contrail/controlplane/state"
)

// UsedGranularity is how finely a token's last use is kept: a token is
// rewritten at most once per this interval, however many requests it
// makes, so authentication does not turn every read into a write.
const UsedGranularity = time.Minute

// NeedsTouch reports whether a token used at now should have its last
// use rewritten.
func (t *Token) NeedsTouch(now time.Time) bool {
	return t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= UsedGranularity
}

// TouchToken records that the token with id was used at now (truncated
// to the granularity). A token deleted meanwhile stays deleted.
func (r *Repo) TouchToken(id string, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.Token(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !t.NeedsTouch(now) {
		return nil
	}
	used := now.UTC().Truncate(UsedGranularity)
	t.LastUsedAt = &used
	b := new(state.Batch)
	if err := putToken(b, t); err != nil {
		return err
	}
	if err := r.st.Apply(b); err != nil {
		return fmt.Errorf("token %s last use: %w", id, err)
	}
	return nil
}
