// Package records holds the control plane's entities (people,
// organizations, tokens, accounts, NATS users) and keeps them in a
// state.Store as JSON under a fixed key layout. Accounts and users are
// keyed under their organization and account, so a lookup with the wrong
// owner finds nothing: isolation between organizations is a property of
// the keys, not of a check someone could forget.
//
// Key layout:
//
//	person/<id>                 Person
//	email/<lower-case email>    person id (unique index)
//	org/<id>                    Org
//	token/<id>                  Token
//	tokenof/<person>/<kind>/<id> Token (a person's tokens, by kind)
//	tokenexp/<unix>/<id>        "<person>/<kind>" (expiry order, for pruning)
//	member/<org id>/<person id> person id (an organization's members)
//	acct/<org id>/<account id>  Account
//	acctkey/<public key>        "<org id>/<account id>" (resolver index)
//	natsuser/<account id>/<id>  NatsUser
//	tomb/<cell>/<public key>    Tombstone (a deleted account)
//	secret/<name>               key material (see Secret)
//	flag/<name>                 one-time steps done (see Flag)
//
// Writes that check before they write (a unique email) are serialized by
// a mutex in Repo; reads take no lock.
package records

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/contrail/contrail/controlplane/state"
	"github.com/contrail/contrail/tenant"
)

// Errors callers branch on.
var (
	// ErrNotFound: no such record, or it belongs to someone else.
	ErrNotFound = errors.New("not found")
	// ErrEmailTaken: sign-up with an email that already has a person.
	ErrEmailTaken = errors.New("email already registered")
)

// Person is someone who signs in to the control plane.
type Person struct {
	ID           string    `json:"id"`
	Email        string    `json:"email"`
	PasswordHash string    `json:"password_hash"`
	OrgID        string    `json:"org_id"`
	CreatedAt    time.Time `json:"created_at"`
}

// Org is an organization: it owns accounts.
type Org struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Token kinds.
const (
	KindSession = "session"
	KindAPI     = "api"
)

// Token is a session or API token's record; the signed JWT is never
// stored, only its id, so deleting the record revokes the token.
type Token struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	PersonID  string    `json:"person_id"`
	OrgID     string    `json:"org_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// LastUsedAt is when the token last authenticated a request, to
	// the minute (see TouchToken); nil if never.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// Account is a NATS account. Seed is its secret key (it signs users).
// JWT is the latest signed account JWT; Generation counts changes and
// Pushed is the generation the cell last acknowledged.
//
// Invariant: Pushed <= Generation. The account is in sync with its cell
// when they are equal.
type Account struct {
	ID          string           `json:"id"`
	OrgID       string           `json:"org_id"`
	Name        string           `json:"name"`
	PublicKey   string           `json:"public_key"`
	Seed        []byte           `json:"seed"`
	Cell        string           `json:"cell"`
	Limits      tenant.Limits    `json:"limits"`
	Revocations map[string]int64 `json:"revocations,omitempty"` // user key → unix seconds
	CreatedAt   time.Time        `json:"created_at"`
	JWT         string           `json:"jwt"`
	Generation  uint64           `json:"generation"`
	Pushed      uint64           `json:"pushed"`
	// Deleted marks an account whose disabling JWT still has to reach
	// its cell; the record is removed once it has.
	Deleted bool `json:"deleted,omitempty"`
}

// NatsUser is a user of an account. Its seed is never stored.
type NatsUser struct {
	ID          string              `json:"id"`
	AccountID   string              `json:"account_id"`
	Name        string              `json:"name"`
	PublicKey   string              `json:"public_key"`
	Permissions *tenant.Permissions `json:"permissions,omitempty"`
	ExpiresAt   *time.Time          `json:"expires_at,omitempty"`
	CreatedAt   time.Time           `json:"created_at"`
}

// Repo reads and writes records.
type Repo struct {
	st state.Store
	mu sync.Mutex // serializes check-then-write sequences
}

// New returns a Repo over st.
func New(st state.Store) *Repo { return &Repo{st: st} }

// NewID returns a random id with a readable prefix ("acc_…").
func NewID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return prefix + "_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func (r *Repo) get(key string, v any) error {
	b, err := r.st.Get(key)
	if errors.Is(err, state.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	return nil
}

func putJSON(b *state.Batch, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	b.Put(key, data)
	return nil
}

func scan[T any](r *Repo, prefix string) ([]T, error) {
	kvs, err := r.st.Scan(prefix, 0)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(kvs))
	for _, kv := range kvs {
		var v T
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("record %s: %w", kv.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Secret returns the key material stored under name, creating it with
// create on first use. Used for the operator, system account and token
// signing keys.
func (r *Repo) Secret(name string, create func() ([]byte, error)) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := "secret/" + name
	v, err := r.st.Get(key)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	if v, err = create(); err != nil {
		return nil, fmt.Errorf("creating secret %s: %w", name, err)
	}
	if err := state.Put(r.st, key, v); err != nil {
		return nil, fmt.Errorf("storing secret %s: %w", name, err)
	}
	return v, nil
}

// Flag reports whether the named one-time step (say, creating the dev
// organization) has been done.
func (r *Repo) Flag(name string) (bool, error) {
	_, err := r.st.Get("flag/" + name)
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// SetFlag records that the named one-time step is done.
func (r *Repo) SetFlag(name string) error {
	return state.Put(r.st, "flag/"+name, []byte{1})
}
