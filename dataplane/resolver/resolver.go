// Package resolver finds account JWTs for a node in operator mode: from a
// URL (nats-server's URL resolver protocol, which the control plane
// serves), from memory (preloaded from the config), and always from a
// local directory that keeps every JWT the node has seen, so a restarted
// node serves its tenants while the URL is unreachable.
//
// The URL is the authority: when it answers, its answer wins, and a 404
// from it means the account was deleted, so the stored JWT goes too.
// When it does not answer (refused, timeout, 5xx), stored JWTs are
// served. Stored JWTs only move forward: a JWT issued before the one
// stored is not kept (as nats-server's directory resolver does).
package resolver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// ErrNotFound is returned for an account no source knows. Callers test for
// it with errors.Is; the server's ErrUnknownAccount wraps the same cases.
var ErrNotFound = errors.New("account jwt not found")

// ErrFull is returned by Store when the resolver holds its limit of JWTs.
var ErrFull = errors.New("resolver store is full")

// ErrStale is returned by Store for a JWT issued before the one it
// already holds for the account; that one is kept.
var ErrStale = errors.New("account jwt is older than the one stored")

// maxJWT bounds what is read for one JWT, from the URL or a file.
const maxJWT = 1 << 20

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
	fs     vfs.FS // where dir is
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

	// writes serialize the changes of one account's JWT (a stripe per
	// hash of the key), so compare-and-store and delete are atomic on
	// disk and in memory. Held across file I/O, never together with mu
	// held first.
	writes [64]sync.Mutex
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
	// FS is the filesystem Dir is on; nil for the real one (files 0600,
	// directories 0700). Tests pass a crashable memory filesystem.
	FS  vfs.FS
	Log *slog.Logger
}

// New builds a resolver and prepares its directory.
func New(opts Options) (*Resolver, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.FS == nil {
		opts.FS = privateFS{vfs.Default}
	}
	r := &Resolver{
		url:    opts.URL,
		dir:    opts.Dir,
		fs:     opts.FS,
		limit:  opts.Limit,
		hard:   opts.HardDelete,
		client: &http.Client{Timeout: opts.Timeout},
		log:    opts.Log,
		mem:    map[string]string{},
		neg:    map[string]time.Time{},
	}
	if r.dir != "" {
		if err := r.fs.MkdirAll(r.dir, 0o700); err != nil {
			return nil, fmt.Errorf("resolver dir: %w", err)
		}
		// The directory's own entry must survive a power cut too.
		if err := syncDir(r.fs, r.fs.PathDir(r.dir)); err != nil {
			return nil, fmt.Errorf("resolver dir: %w", err)
		}
		// A crash can leave a temporary file behind; it holds nothing
		// that was acknowledged.
		names, err := r.fs.List(r.dir)
		if err != nil {
			return nil, fmt.Errorf("resolver dir: %w", err)
		}
		for _, n := range names {
			if strings.HasSuffix(n, tmpSuffix) {
				r.fs.Remove(r.fs.PathJoin(r.dir, n))
			}
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
			kept, serr := r.store(account, token)
			if serr != nil && !errors.Is(serr, ErrStale) {
				// Served all the same; only a restart with the URL down
				// misses it.
				r.log.Warn("keeping account jwt locally failed", "account", account, "err", serr)
				return strings.TrimSpace(token), nil
			}
			return kept, nil
		} else if errors.Is(err, ErrNotFound) {
			// The authority says there is no such account: one that was
			// deleted must not live on in the directory.
			if derr := r.Delete(account); derr != nil {
				r.log.Warn("forgetting an account the resolver url does not know failed", "account", account, "err", derr)
			}
			r.negative(account)
			return "", err
		} else {
			urlErr = err
			r.mu.Lock()
			r.downUntil = time.Now().Add(urlRetryAfter)
			r.mu.Unlock()
			r.log.Warn("resolver url failed, serving the stored account jwt meanwhile",
				"account", account, "err", err, "retry_after", urlRetryAfter)
		}
	}
	if token, ok := r.stored(account); ok {
		return token, nil
	}
	if urlErr != nil {
		return "", urlErr
	}
	r.negative(account)
	return "", fmt.Errorf("account %s: %w", account, ErrNotFound)
}

// negative remembers, briefly, that no source knows account.
func (r *Resolver) negative(account string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.neg) >= negativeMax {
		clear(r.neg)
	}
	r.neg[account] = time.Now().Add(negativeTTL)
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWT))
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
	b, err := readFile(r.fs, r.path(account))
	if err != nil {
		return "", false
	}
	token = strings.TrimSpace(string(b))
	r.mu.Lock()
	r.mem[account] = token
	r.mu.Unlock()
	return token, true
}

// tmpSuffix ends the names of files being written.
const tmpSuffix = ".tmp"

func (r *Resolver) path(account string) string { return r.fs.PathJoin(r.dir, account+".jwt") }

// writeLock is the lock that serializes changes to account's JWT.
func (r *Resolver) writeLock(account string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(account))
	return &r.writes[h.Sum32()%uint32(len(r.writes))]
}

// Store keeps token for account in memory and, durably, in the directory,
// unless the JWT already stored was issued later (ErrStale; that one is
// kept). JWTs are compared by their iat, read without verifying them:
// verifying is the server's job, and the stored one was verified when it
// came.
func (r *Resolver) Store(account, token string) error {
	_, err := r.store(account, token)
	return err
}

// store is Store returning the JWT that is kept.
func (r *Resolver) store(account, token string) (string, error) {
	if !nkeys.IsValidPublicAccountKey(account) {
		return "", fmt.Errorf("account %q: not an account public key", account)
	}
	token = strings.TrimSpace(token)
	l := r.writeLock(account)
	l.Lock()
	defer l.Unlock()
	old, known := r.stored(account)
	if known && old != token && issuedAt(old) > issuedAt(token) {
		return old, fmt.Errorf("account %s: %w", account, ErrStale)
	}
	if r.limit > 0 && !known && len(r.Stored()) >= r.limit {
		return "", fmt.Errorf("account %s: %w (limit %d)", account, ErrFull, r.limit)
	}
	if r.dir != "" && (!known || old != token) {
		if err := writeFileAtomic(r.fs, r.path(account), r.path(account)+tmpSuffix, []byte(token+"\n")); err != nil {
			return "", err
		}
	}
	r.mu.Lock()
	delete(r.neg, account)
	r.mem[account] = token
	r.mu.Unlock()
	return token, nil
}

// issuedAt is a JWT's iat, or 0 when it cannot be read.
func issuedAt(token string) int64 {
	c, err := jwt.DecodeGeneric(token)
	if err != nil {
		return 0
	}
	return c.IssuedAt
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
		names, _ := r.fs.List(r.dir)
		for _, n := range names {
			if k, ok := strings.CutSuffix(n, ".jwt"); ok && nkeys.IsValidPublicAccountKey(k) {
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

// Delete forgets an account's JWT, in memory and, durably, on disk.
func (r *Resolver) Delete(account string) error {
	if !nkeys.IsValidPublicAccountKey(account) {
		return fmt.Errorf("account %q: not an account public key", account)
	}
	l := r.writeLock(account)
	l.Lock()
	defer l.Unlock()
	r.mu.Lock()
	delete(r.mem, account)
	r.mu.Unlock()
	if r.dir == "" {
		return nil
	}
	path := r.path(account)
	var err error
	if r.hard {
		err = removeDurable(r.fs, path)
	} else if _, serr := r.fs.Stat(path); serr == nil {
		err = renameDurable(r.fs, path, path+".deleted")
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", account, err)
	}
	return nil
}
