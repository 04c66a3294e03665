package records

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/contrail/contrail/controlplane/state"
)

// countingStore counts the keys every Scan returns, by prefix.
type countingStore struct {
	state.Store
	mu   sync.Mutex
	read map[string]int // guarded by mu
}

func (c *countingStore) Scan(prefix string, limit int) ([]state.KV, error) {
	kvs, err := c.Store.Scan(prefix, limit)
	c.mu.Lock()
	c.read[prefix] += len(kvs)
	c.mu.Unlock()
	return kvs, err
}

func (c *countingStore) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.read
	c.read = map[string]int{}
	return r
}

// stores runs f against a repo over each state implementation.
func stores(t *testing.T, f func(t *testing.T, r *Repo, st *countingStore)) {
	for name, open := range map[string]func() state.Store{
		"mem": func() state.Store { return state.NewMem() },
		"pebble": func() state.Store {
			s, err := state.OpenPebble("db", vfs.NewMem(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := &countingStore{Store: open(), read: map[string]int{}}
			defer st.Close()
			f(t, New(st), st)
		})
	}
}

// TestTokensListOnlyTheirPerson: listing a person's API tokens reads
// those and nothing else, however many tokens other people (or the same
// person's sessions) have.
func TestTokensListOnlyTheirPerson(t *testing.T) {
	stores(t, func(t *testing.T, r *Repo, st *countingStore) {
		ann, _ := signUp(t, r, "ann@example.com")
		bob, _ := signUp(t, r, "bob@example.com")
		for i := range 200 {
			for _, p := range []*Person{ann, bob} {
				if err := r.PutToken(&Token{ID: NewID("tok"), Kind: KindSession, Name: "session", PersonID: p.ID,
					OrgID: p.OrgID, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}, t0); err != nil {
					t.Fatal(err)
				}
			}
			if i < 3 {
				if err := r.PutToken(&Token{ID: NewID("tok"), Kind: KindAPI, Name: fmt.Sprint("ci", i), PersonID: ann.ID,
					OrgID: ann.OrgID, CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}, t0); err != nil {
					t.Fatal(err)
				}
			}
		}
		st.reset()
		list, err := r.Tokens(ann.ID, KindAPI)
		if err != nil || len(list) != 3 {
			t.Fatalf("ann's API tokens: %d, %v", len(list), err)
		}
		total := 0
		for _, n := range st.reset() {
			total += n
		}
		if total != 3 {
			t.Fatalf("listing 3 tokens read %d keys", total)
		}
	})
}

// TestTokensPruned: expired tokens are removed, a few with every new
// token and all of them by PruneTokens, each with its index entries;
// valid tokens stay, and pruning reads no further than the first one
// still valid.
func TestTokensPruned(t *testing.T) {
	stores(t, func(t *testing.T, r *Repo, st *countingStore) {
		ann, _ := signUp(t, r, "ann@example.com")
		put := func(now time.Time, kind string, ttl time.Duration) *Token {
			tok := &Token{ID: NewID("tok"), Kind: kind, Name: "t", PersonID: ann.ID, OrgID: ann.OrgID,
				CreatedAt: now, ExpiresAt: now.Add(ttl)}
			if err := r.PutToken(tok, now); err != nil {
				t.Fatal(err)
			}
			return tok
		}
		keep := put(t0, KindAPI, 30*24*time.Hour)
		for range 100 {
			put(t0, KindSession, time.Hour)
		}
		count := func(prefix string) int {
			kvs, err := st.Store.Scan(prefix, 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(kvs)
		}
		if n := count("token/"); n != 101 {
			t.Fatalf("%d tokens before expiry", n)
		}
		// Two hours on, each login sweeps pruneOnWrite expired sessions.
		now := t0.Add(2 * time.Hour)
		put(now, KindSession, time.Hour)
		if n := count("token/"); n != 101+1-pruneOnWrite {
			t.Fatalf("after one write %d tokens, want %d", n, 101+1-pruneOnWrite)
		}
		st.reset()
		n, err := r.PruneTokens(now, 0)
		if err != nil || n != 100-pruneOnWrite {
			t.Fatalf("PruneTokens = %d, %v; want %d", n, err, 100-pruneOnWrite)
		}
		if n, err := r.PruneTokens(now, 0); err != nil || n != 0 {
			t.Fatalf("PruneTokens again = %d, %v", n, err)
		}
		for _, prefix := range []string{"token/", "tokenof/", "tokenexp/"} {
			if n := count(prefix); n != 2 {
				t.Fatalf("%d keys under %s after pruning, want 2 (the API token and the new session)", n, prefix)
			}
		}
		if _, err := r.Token(keep.ID); err != nil {
			t.Fatalf("a valid token was pruned: %v", err)
		}
		// The limit bounds what one call reads.
		for range 10 {
			put(now, KindSession, time.Minute)
		}
		st.reset()
		if n, err := r.PruneTokens(now.Add(time.Hour), 4); err != nil || n != 4 {
			t.Fatalf("PruneTokens limit 4 = %d, %v", n, err)
		}
		if read := st.reset()["tokenexp/"]; read != 4 {
			t.Fatalf("pruning 4 read %d expiry keys", read)
		}
	})
}

// TestIndexTokens: tokens stored before the indexes existed get them.
func TestIndexTokens(t *testing.T) {
	st := state.NewMem()
	r := New(st)
	ann, _ := signUp(t, r, "ann@example.com")
	old := &Token{ID: NewID("tok"), Kind: KindAPI, Name: "old", PersonID: ann.ID, OrgID: ann.OrgID, CreatedAt: t0,
		ExpiresAt: t0.Add(time.Hour)}
	b := new(state.Batch)
	if err := putJSON(b, tokenKey(old.ID), old); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.IndexTokens(); err != nil {
			t.Fatal(err)
		}
	}
	if list, _ := r.Tokens(ann.ID, KindAPI); len(list) != 1 || list[0].ID != old.ID {
		t.Fatalf("after indexing: %+v", list)
	}
	if n, _ := r.PruneTokens(t0.Add(2*time.Hour), 0); n != 1 {
		t.Fatalf("the old token was not pruned: %d", n)
	}
	kvs, _ := st.Scan("token", 0)
	for _, kv := range kvs {
		if !strings.HasPrefix(kv.Key, "flag/") {
			t.Fatalf("left behind: %s", kv.Key)
		}
	}
}
