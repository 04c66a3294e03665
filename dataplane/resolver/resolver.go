// Package resolver finds account JWTs for a node in operator mode: from a
// URL (nats-server's URL resolver protocol, which the control plane
// serves), from memory (preloaded from the config), and always from a
// local directory that keeps every JWT the node has seen, so a restarted
// node serves its tenants while the URL is unreachable.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nkeys"
)

// ErrNotFound is returned for an account no source knows. Callers test for
// it with errors.Is; the server's ErrUnknownAccount wraps the same cases.
var ErrNotFound = errors.New("account jwt not found")

// ErrFull is returned by Store when the resolver holds its limit of JWTs.
var ErrFull = errors.New("resolver store is full")

// Resolver looks account JWTs up: first the URL (when set), then what it
// has stored. Stored JWTs are what a claim update pushed or what the URL
// answered last.
//
// Invariant: a JWT is trusted only after the server verifies it against
// the operator; the resolver stores whatever it is given, and a forged
// file fails that check like a forged download.
type Resolver struct {
	url    string // base URL; the account key is appended; empty for none
	dir    string // local store; empty keeps JWTs in memory only
	limit  int    // most JWTs stored; 0 for no bound
	hard   bool   // Delete removes files rather than renaming them
	client *http.Client
	log    *slog.Logger

	mu  sync.Mutex
	mem map[string]string // guarded by mu
	// neg remembers, briefly, accounts the URL said it does not know:
	// anyone can sign a user JWT with a fresh account key, and a flood of
	// such CONNECTs must not become a flood of resolver requests.
	neg map[string]time.Time // guarded by mu
	// downUntil is when the URL, having failed, is asked again; until
	// then stored JWTs are served without waiting on it (guarded by mu).
	downUntil time.Time
}

// urlRetryAfter is how long a failed URL is left alone. A node starting
// with the control plane down loads its stored accounts at once instead
// of waiting out a timeout for each, and CONNECTs do not wait either.
const urlRetryAfter = 5 * time.Second

// ErrUnavailable is returned for an account with no stored JWT while the
// URL is failing.
var ErrUnavailable = errors.New("resolver url unavailable")

// negativeTTL is how long an unknown account is not asked for again;
// a pushed claim update for it ends that at once.
const negativeTTL = time.Second

// negativeMax bounds the unknown-account memory; it is cleared when full.
const negativeMax = 10000

// Options configure a Resolver.
type Options struct {
	// URL is the resolver base URL ("http://cp:8080/jwt/v1/accounts/");
	// empty for a memory resolver.
	URL string
	// Dir keeps every JWT seen; empty keeps them in memory only.
	Dir string
	// Preload are JWTs by account key (resolver_preload in the config).
	Preload map[string]string
	// Timeout bounds one URL fetch; 2 s when zero.
	Timeout time.Duration
	// Limit bounds how many JWTs are stored (a full directory resolver's
	// limit); a new account past it is refused. 0 for no bound.
	Limit int
	// HardDelete removes a deleted account's file; otherwise it is kept
	// renamed to <key>.jwt.deleted, as nats-server does.
	HardDelete bool
	Log        *slog.Logger
}

// New builds a resolver and prepares its directory.
func New(opts Options) (*Resolver, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	r := &Resolver{
		url:    opts.URL,
		dir:    opts.Dir,
		limit:  opts.Limit,
		hard:   opts.HardDelete,
		client: &http.Client{Timeout: opts.Timeout},
		log:    opts.Log,
		mem:    map[string]string{},
		neg:    map[string]time.Time{},
	}
	if r.dir != "" {
		if err := os.MkdirAll(r.dir, 0o700); err != nil {
			return nil, fmt.Errorf("resolver dir: %w", err)
		}
	}
	for k, v := range opts.Preload {
		if !nkeys.IsValidPublicAccountKey(k) {
			return nil, fmt.Errorf("resolver_preload: %q is not an account public key", k)
		}
		r.mem[k] = strings.TrimSpace(v)
	}
	return r, nil
}

// Fetch returns the account's JWT: from the URL when it answers (and
// stores it), else the stored or preloaded one.
func (r *Resolver) Fetch(ctx context.Context, account string) (string, error) {
	if !nkeys.IsValidPublicAccountKey(account) {
		return "", fmt.Errorf("account %q: %w", account, ErrNotFound)
	}
	r.mu.Lock()
	until, unknown := r.neg[account]
	r.mu.Unlock()
	if unknown && time.Now().Before(until) {
		return "", fmt.Errorf("account %s: %w", account, ErrNotFound)
	}
	var urlErr error
	if r.url != "" {
		r.mu.Lock()
		down := time.Now().Before(r.downUntil)
		r.mu.Unlock()
		if down {
			urlErr = fmt.Errorf("account %s: %w", account, ErrUnavailable)
		} else if token, err := r.fetchURL(ctx, account); err == nil {
			if serr := r.Store(account, token); serr != nil {
				r.log.Warn("keeping account jwt locally failed", "account", account, "err", serr)
			}
			return token, nil
		} else {
			urlErr = err
			if !errors.Is(err, ErrNotFound) {
				r.mu.Lock()
				r.downUntil = time.Now().Add(urlRetryAfter)
				r.mu.Unlock()
				r.log.Warn("resolver url failed, serving the stored account jwt meanwhile",
					"account", account, "err", err, "retry_after", urlRetryAfter)
			}
		}
	}
	if token, ok := r.stored(account); ok {
		return token, nil
	}
	if urlErr == nil || errors.Is(urlErr, ErrNotFound) {
		r.mu.Lock()
		if len(r.neg) >= negativeMax {
			clear(r.neg)
		}
		r.neg[account] = time.Now().Add(negativeTTL)
		r.mu.Unlock()
	}
	if urlErr != nil {
		return "", urlErr
	}
	return "", fmt.Errorf("account %s: %w", account, ErrNotFound)
}

func (r *Resolver) fetchURL(ctx context.Context, account string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+account, nil)
	if err != nil {
		return "", fmt.Errorf("resolver url: %w", err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("resolver url: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("resolver url: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("account %s: %w", account, ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("resolver url: status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(body)), nil
}

func (r *Resolver) stored(account string) (string, bool) {
	r.mu.Lock()
	token, ok := r.mem[account]
	r.mu.Unlock()
	if ok {
		return token, true
	}
	if r.dir == "" {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(r.dir, account+".jwt"))
	if err != nil {
		return "", false
	}
	token = strings.TrimSpace(string(b))
	r.mu.Lock()
	r.mem[account] = token
	r.mu.Unlock()
	return token, true
}

// Store keeps token for account in memory and, durably, in the directory.
func (r *Resolver) Store(account, token string) error {
	if !nkeys.IsValidPublicAccountKey(account) {
		return fmt.Errorf("account %q: not an account public key", account)
	}
	token = strings.TrimSpace(token)
	if r.limit > 0 {
		if _, known := r.stored(account); !known && len(r.Stored()) >= r.limit {
			return fmt.Errorf("account %s: %w (limit %d)", account, ErrFull, r.limit)
		}
	}
	r.mu.Lock()
	delete(r.neg, account)
	same := r.mem[account] == token
	r.mem[account] = token
	r.mu.Unlock()
	if r.dir == "" || same {
		return nil
	}
	return writeFileAtomic(filepath.Join(r.dir, account+".jwt"), []byte(token+"\n"))
}

// Stored lists the accounts with a JWT on hand, for loading at start-up.
func (r *Resolver) Stored() []string {
	seen := map[string]bool{}
	r.mu.Lock()
	for k := range r.mem {
		seen[k] = true
	}
	r.mu.Unlock()
	if r.dir != "" {
		entries, _ := os.ReadDir(r.dir)
		for _, e := range entries {
			if k, ok := strings.CutSuffix(e.Name(), ".jwt"); ok && nkeys.IsValidPublicAccountKey(k) {
				seen[k] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	return out
}

// writeFileAtomic replaces path with data so a crash leaves the old file
// or the new one, never half of either.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("store %s: %w", filepath.Base(path), err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("store %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("store %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("store %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("store %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Delete forgets an account's JWT, in memory and on disk.
func (r *Resolver) Delete(account string) error {
	if !nkeys.IsValidPublicAccountKey(account) {
		return fmt.Errorf("account %q: not an account public key", account)
	}
	r.mu.Lock()
	delete(r.mem, account)
	r.mu.Unlock()
	if r.dir == "" {
		return nil
	}
	path := filepath.Join(r.dir, account+".jwt")
	var err error
	if r.hard {
		err = os.Remove(path)
	} else {
		err = os.Rename(path, path+".deleted")
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", account, err)
	}
	return nil
}
