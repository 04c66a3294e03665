package records

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/controlplane/state"
)

// Tokens are kept three times over, in one batch: by id (authentication
// looks every request's token up), under their person and kind (listing
// reads only that person's tokens of that kind), and under their expiry
// time (pruning reads only the expired ones, oldest first).
//
// Invariant: the three keys of a token are written and deleted together.

// pruneOnWrite is how many expired tokens each new token sweeps away:
// more than one, so tokens expire at least as fast as logins make them.
const pruneOnWrite = 8

func tokenKey(id string) string                { return "token/" + id }
func tokenOfPrefix(person, kind string) string { return "tokenof/" + person + "/" + kind + "/" }
func tokenOfKey(t *Token) string               { return tokenOfPrefix(t.PersonID, t.Kind) + t.ID }

// tokenExpKey sorts by expiry: the seconds are zero-padded to a fixed
// width (times before 1970 sort first, as 0).
func tokenExpKey(t *Token) string {
	return fmt.Sprintf("tokenexp/%020d/%s", max(t.ExpiresAt.Unix(), 0), t.ID)
}

func putToken(b *state.Batch, t *Token) error {
	if err := putJSON(b, tokenKey(t.ID), t); err != nil {
		return err
	}
	if err := putJSON(b, tokenOfKey(t), t); err != nil {
		return err
	}
	b.Put(tokenExpKey(t), []byte(t.PersonID+"/"+t.Kind))
	return nil
}

func deleteToken(b *state.Batch, t *Token) {
	b.Delete(tokenKey(t.ID)).Delete(tokenOfKey(t)).Delete(tokenExpKey(t))
}

// PutToken stores a token record and, in the same batch, removes a few
// tokens that expired by now.
func (r *Repo) PutToken(t *Token, now time.Time) error {
	b := new(state.Batch)
	if err := putToken(b, t); err != nil {
		return err
	}
	if _, err := r.expired(b, now, pruneOnWrite); err != nil {
		return err
	}
	if err := r.st.Apply(b); err != nil {
		return fmt.Errorf("storing token: %w", err)
	}
	return nil
}

// PruneTokens removes the tokens expired by now, at most limit of them
// (all if limit <= 0), and returns how many it removed.
func (r *Repo) PruneTokens(now time.Time, limit int) (int, error) {
	b := new(state.Batch)
	n, err := r.expired(b, now, limit)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := r.st.Apply(b); err != nil {
		return 0, fmt.Errorf("pruning tokens: %w", err)
	}
	return n, nil
}

// expired adds the deletes of up to limit tokens expired by now to b and
// returns how many. It reads the expiry index from its start, so it
// reads nothing past the first token still valid (or the limit).
func (r *Repo) expired(b *state.Batch, now time.Time, limit int) (int, error) {
	kvs, err := r.st.Scan("tokenexp/", limit)
	if err != nil {
		return 0, fmt.Errorf("expired tokens: %w", err)
	}
	n := 0
	for _, kv := range kvs {
		ts, id, ok := strings.Cut(strings.TrimPrefix(kv.Key, "tokenexp/"), "/")
		secs, err := strconv.ParseInt(ts, 10, 64)
		if !ok || err != nil {
			return n, fmt.Errorf("token expiry key %q: malformed", kv.Key)
		}
		if secs > now.Unix() {
			break
		}
		person, kind, _ := strings.Cut(string(kv.Value), "/")
		b.Delete(kv.Key).Delete(tokenKey(id)).Delete(tokenOfPrefix(person, kind) + id)
		n++
	}
	return n, nil
}

// Token finds a token by id.
func (r *Repo) Token(id string) (*Token, error) {
	var t Token
	if err := r.get(tokenKey(id), &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tokens lists a person's tokens of one kind, reading only those.
func (r *Repo) Tokens(personID, kind string) ([]Token, error) {
	return scan[Token](r, tokenOfPrefix(personID, kind))
}

// DeleteToken removes a person's token; another person's is ErrNotFound.
func (r *Repo) DeleteToken(personID, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.Token(id)
	if err != nil {
		return err
	}
	if t.PersonID != personID {
		return ErrNotFound
	}
	b := new(state.Batch)
	deleteToken(b, t)
	return r.st.Apply(b)
}

// IndexTokens builds the person and expiry indexes of tokens stored
// before they existed. It runs once (a flag records it) and is a no-op on
// a store that started with them.
func (r *Repo) IndexTokens() error {
	const flag = "token-indexes"
	if done, err := r.Flag(flag); err != nil || done {
		return err
	}
	all, err := scan[Token](r, "token/")
	if err != nil {
		return err
	}
	b := new(state.Batch)
	for i := range all {
		if err := putToken(b, &all[i]); err != nil {
			return err
		}
	}
	b.Put("flag/"+flag, []byte{1})
	if err := r.st.Apply(b); err != nil {
		return fmt.Errorf("indexing tokens: %w", err)
	}
	return nil
}
