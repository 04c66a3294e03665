package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/tenant"
)

// Resolver finds account JWTs by account public key: the data plane's side
// of nats-server's account resolver protocol.
type Resolver interface {
	// Fetch returns the account's JWT, or an error wrapping
	// ErrUnknownAccount when there is none.
	Fetch(ctx context.Context, account string) (string, error)
	// Store keeps a JWT pushed as a claim update, so the node serves it
	// after a restart even if the resolver's source is down. It compares
	// and stores atomically: a JWT issued (iat) before the one it holds
	// for the account is refused with an error and the held one kept.
	Store(account, token string) error
	// Delete forgets a deleted account's JWT.
	Delete(account string) error
	// Stored lists the accounts whose JWTs it holds.
	Stored() []string
}

// OperatorMode is how a node serves many tenants: it trusts one operator,
// each tenant is an account whose JWT the resolver provides, and every
// client proves a user of that account at CONNECT.
type OperatorMode struct {
	Trust         *tenant.Trust
	Resolver      Resolver
	SystemAccount string
	// AllowDelete serves operator-signed $SYS.REQ.CLAIMS.DELETE requests
	// (a full directory resolver serves them only with allow_delete).
	AllowDelete bool
}

// AccountHooks learn of accounts as they are loaded, change and go:
// JetStream enables itself in each account with the limits of its JWT.
// Hooks run on the goroutine that changed the account and must not block
// for long.
type AccountHooks interface {
	// AccountReady is called when the account is loaded and after each
	// change of its claims; acc.Claims() holds the new claims.
	AccountReady(acc *Account)
	// AccountGone is called when the account's JWT is withdrawn
	// (expired or disabled).
	AccountGone(acc *Account)
}

// Sentinel errors callers branch on.
var (
	// ErrUnknownAccount: no JWT is known for the account.
	ErrUnknownAccount = errors.New("unknown account")
	// ErrAccountDisabled: the account's JWT expired or was withdrawn.
	ErrAccountDisabled = errors.New("account disabled")
	// errNoCredentials: CONNECT carried no JWT.
	errNoCredentials = errors.New("no credentials: operator mode needs a user JWT")
	// errConnLimit: the account is at its connection limit.
	errConnLimit = errors.New(errTextAccountConns)
)

// -ERR texts and close reasons of authentication, as nats-server uses them.
const (
	errTextAuthViolation = "Authorization Violation"
	errTextAuthTimeout   = "Authentication Timeout"
	errTextUserExpired   = "User Authentication Expired"
	errTextAccExpired    = "Account Authentication Expired"
	errTextRevoked       = "User Authentication Revoked"
	errTextAccountConns  = "maximum account active connections exceeded"
	errTextMaxSubs       = "maximum subscriptions exceeded"
	errTextMaxPayloadVio = "Maximum Payload Violation"

	reasonAuthViolation  = "Authentication Failure"
	reasonAuthTimeout    = "Authentication Timeout"
	reasonAuthExpired    = "Authentication Expired"
	reasonRevoked        = "Authentication Revoked"
	reasonAccountConns   = "Maximum Account Connections Exceeded"
	reasonMaxSubs        = "Maximum Subscriptions Exceeded"
	reasonAccountDeleted = "Account Deleted"
)

// authTimeout is how long a client has to CONNECT in operator mode.
const authTimeout = 2 * time.Second

// resolveTimeout bounds an account JWT fetch during CONNECT.
const resolveTimeout = 2 * time.Second

// accounts is the operator-mode account table.
type accounts struct {
	mu      sync.Mutex
	m       map[string]*Account  // guarded by mu
	loading map[string]*loadCall // guarded by mu
	links   serverLinks          // imports between accounts (links.go)
}

// loadCall is one in-flight account load that concurrent CONNECTs share.
type loadCall struct {
	done chan struct{}
	acc  *Account
	err  error
}

// SetOperatorMode switches the node to operator mode; call it before
// Serve. The system account, if named, exists from the start so its
// services answer as soon as its users connect.
func (s *Server) SetOperatorMode(m OperatorMode) error {
	if m.Trust == nil || m.Resolver == nil {
		return errors.New("operator mode: trust and resolver are required")
	}
	if m.SystemAccount != "" && !nkeys.IsValidPublicAccountKey(m.SystemAccount) {
		return fmt.Errorf("system account %q: not an account public key", m.SystemAccount)
	}
	if s.static != nil || s.accts.m != nil {
		return errors.New("operator mode: authorization users and accounts cannot be used with an operator")
	}
	s.op = &m
	s.authRequired = true
	s.accts.m = map[string]*Account{}
	s.accts.loading = map[string]*loadCall{}
	if m.SystemAccount != "" {
		s.sys = newAccount(s, m.SystemAccount)
		s.accts.m[m.SystemAccount] = s.sys
		if err := errors.Join(s.startClaimServices(), s.startDeleteService()); err != nil {
			return fmt.Errorf("system account: %w", err)
		}
	}
	return nil
}

// SetAccountHooks registers what is told of account changes; call it
// before Serve.
func (s *Server) SetAccountHooks(h AccountHooks) {
	s.hooks = h
	if s.isStatic() {
		// Static accounts were installed in New: tell h of them now.
		for _, a := range s.Accounts() {
			h.AccountReady(a)
		}
	}
}

// HasAccounts reports whether accounts are installed by claims (operator
// mode, or the accounts block) and so are told to AccountHooks, rather
// than the single global account of open mode.
func (s *Server) HasAccounts() bool { return s.accts.m != nil }

// InOperatorMode reports whether clients must authenticate as account users.
func (s *Server) InOperatorMode() bool { return s.op != nil }

// SystemAccount is the system account, or nil.
func (s *Server) SystemAccount() *Account { return s.sys }

// Accounts lists the accounts the node has loaded (the global account in
// open mode).
func (s *Server) Accounts() []*Account {
	if s.accts.m == nil {
		return []*Account{s.global}
	}
	s.accts.mu.Lock()
	defer s.accts.mu.Unlock()
	out := make([]*Account, 0, len(s.accts.m))
	for _, a := range s.accts.m {
		out = append(out, a)
	}
	return out
}

// LookupAccount returns the named account, loading its JWT through the
// resolver the first time. In open mode only "$G" exists.
func (s *Server) LookupAccount(ctx context.Context, name string) (*Account, error) {
	if s.accts.m == nil {
		if name == s.global.name {
			return s.global, nil
		}
		return nil, fmt.Errorf("account %q: %w", name, ErrUnknownAccount)
	}
	s.accts.mu.Lock()
	if a := s.accts.m[name]; a != nil && a.claims.Load() != nil {
		s.accts.mu.Unlock()
		return a, nil
	}
	if s.op == nil { // static accounts: all there from the start
		s.accts.mu.Unlock()
		return nil, fmt.Errorf("account %q: %w", name, ErrUnknownAccount)
	}
	if call := s.accts.loading[name]; call != nil {
		s.accts.mu.Unlock()
		select {
		case <-call.done:
			return call.acc, call.err
		case <-ctx.Done():
			return nil, fmt.Errorf("account %q: %w", name, ctx.Err())
		}
	}
	call := &loadCall{done: make(chan struct{})}
	s.accts.loading[name] = call
	s.accts.mu.Unlock()

	call.acc, call.err = s.loadAccount(ctx, name)
	s.accts.mu.Lock()
	delete(s.accts.loading, name)
	s.accts.mu.Unlock()
	close(call.done)
	return call.acc, call.err
}

func (s *Server) loadAccount(ctx context.Context, name string) (*Account, error) {
	if !nkeys.IsValidPublicAccountKey(name) {
		return nil, fmt.Errorf("account %q: %w", name, ErrUnknownAccount)
	}
	token, err := s.op.Resolver.Fetch(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", name, err)
	}
	ac, err := s.op.Trust.VerifyAccount(token, name, time.Now())
	if err != nil {
		return nil, err
	}
	s.accts.mu.Lock()
	a := s.accts.m[name]
	if a == nil {
		a = newAccount(s, name)
		s.accts.m[name] = a
	}
	s.accts.mu.Unlock()
	if s.cluster != nil {
		s.cluster.accountLoaded(a)
	}
	s.installClaims(a, ac)
	s.startSelfServices(a)
	s.log.Info("account loaded", "account", name, "name", ac.Name)
	return a, nil
}

// UpdateAccountClaims verifies a pushed account JWT and, if the account is
// loaded, applies it at once: new limits, revoked users cut off. The JWT
// is stored either way so the node serves it after a restart. It returns
// the account's public key. want, when not empty, is the account the
// update was addressed to: a JWT about another account is refused.
//
// A JWT issued before the one in use or stored is refused. Concurrent
// pushes of one account cannot leave the older JWT behind: the resolver
// compares and stores under one lock (see Resolver.Store), and
// installClaims compares and installs under another, so the newest wins
// on disk and in memory whatever order the pushes run in.
func (s *Server) UpdateAccountClaims(token, want string) (string, error) {
	if s.op == nil {
		return "", errors.New("not in operator mode")
	}
	ac, err := s.op.Trust.VerifyAccount(token, want, time.Now())
	if err != nil {
		return "", err
	}
	name := ac.Subject
	s.accts.mu.Lock()
	a := s.accts.m[name]
	s.accts.mu.Unlock()
	// An early answer for the common stale case; the resolver's
	// compare-and-store is what makes it hold under concurrency.
	if a != nil {
		if old := a.claims.Load(); old != nil && old.IssuedAt > ac.IssuedAt {
			return name, fmt.Errorf("account %s: jwt issued at %d is older than the one in use (%d)", name, ac.IssuedAt, old.IssuedAt)
		}
	}
	if err := s.op.Resolver.Store(name, token); err != nil {
		return name, fmt.Errorf("account %s: storing jwt: %w", name, err)
	}
	if a != nil {
		s.installClaims(a, ac)
		s.log.Info("account claims updated", "account", name)
	}
	return name, nil
}

// installClaims makes ac the account's claims and enforces them on the
// clients already connected.
//
// Installs of one account are serialized, and claims issued before the
// ones in use are ignored: a slow resolver fetch racing a pushed update
// cannot roll an account back to older limits or revocations.
func (s *Server) installClaims(a *Account, ac *jwt.AccountClaims) {
	a.installMu.Lock()
	defer a.installMu.Unlock()
	if cur := a.claims.Load(); cur != nil && cur.IssuedAt > ac.IssuedAt {
		s.log.Info("ignoring account claims older than those in use", "account", a.name,
			"issued", ac.IssuedAt, "in_use", cur.IssuedAt)
		return
	}
	a.claims.Store(ac)
	a.limits.Store(&accountLimits{conns: ac.Limits.Conn, subs: ac.Limits.Subs, payload: ac.Limits.Payload, data: ac.Limits.Data})

	a.cmu.Lock()
	a.cmu.disabled = false
	if a.cmu.expiry != nil {
		a.cmu.expiry.Stop()
		a.cmu.expiry = nil
	}
	if ac.Expires > 0 {
		a.cmu.expiry = time.AfterFunc(time.Until(time.Unix(ac.Expires, 0)), func() { s.expireAccount(a, ac) })
	}
	clients := a.clientsLocked()
	a.cmu.Unlock()

	// Revocations and a lowered connection limit apply to live clients.
	for _, c := range clients {
		if uc := c.userClaims(); uc != nil && tenant.Revoked(ac, uc) {
			c.logger().Info("user revoked, closing", "user", uc.Subject, "account", a.name)
			c.sendErr(errTextRevoked)
			c.close(reasonRevoked, true)
		}
	}
	if max := ac.Limits.Conn; max >= 0 {
		a.trimConnections(int(max))
	}
	s.linkClaims(a) // exports and imports follow the new claims
	if s.hooks != nil {
		s.hooks.AccountReady(a)
	}
}

// expireAccount cuts off every user of an account whose JWT expired,
// unless the claims were replaced meanwhile.
func (s *Server) expireAccount(a *Account, ac *jwt.AccountClaims) {
	if a.claims.Load() != ac {
		return
	}
	n := s.withdrawAccount(a, errTextAccExpired, reasonAuthExpired)
	s.log.Info("account jwt expired, its users disconnected", "account", a.name, "clients", n)
}

// withdrawAccount takes an expired or deleted account out of service: no
// new clients, every connected one closed with errText, nothing crossing
// to or from it, JetStream stopped in it. It returns how many clients
// were closed.
func (s *Server) withdrawAccount(a *Account, errText, reason string) int {
	a.cmu.Lock()
	a.cmu.disabled = true
	if a.cmu.expiry != nil {
		a.cmu.expiry.Stop()
	}
	a.cmu.Unlock()
	n := a.DisconnectAll(errText, reason)
	s.unlinkAccount(a) // nothing crosses to or from it any more
	if s.hooks != nil {
		s.hooks.AccountGone(a)
	}
	return n
}

func (a *Account) clientsLocked() []*client {
	out := make([]*client, 0, len(a.cmu.clients))
	for c := range a.cmu.clients {
		out = append(out, c)
	}
	return out
}

// trimConnections closes the newest connections beyond max, as
// nats-server does when an account's limit is lowered.
func (a *Account) trimConnections(max int) {
	a.cmu.Lock()
	clients := a.clientsLocked()
	a.cmu.Unlock()
	if len(clients) <= max {
		return
	}
	sortClientsByCID(clients)
	for _, c := range clients[max:] {
		c.sendErr(errTextAccountConns)
		c.close(reasonAccountConns, true)
	}
}

// addClient admits an authenticated client to the account, within its
// connection limit.
func (a *Account) addClient(c *client) error {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	if a.cmu.disabled {
		return ErrAccountDisabled
	}
	if max := a.limits.Load().conns; max >= 0 && int64(len(a.cmu.clients)) >= max {
		return errConnLimit
	}
	a.cmu.clients[c] = struct{}{}
	a.cmu.total++
	return nil
}

// removeClient forgets a closed client and keeps its counters.
func (a *Account) removeClient(c *client) {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	if _, ok := a.cmu.clients[c]; !ok {
		return
	}
	delete(a.cmu.clients, c)
	a.cmu.closed.InMsgs += c.inMsgs.Load()
	a.cmu.closed.OutMsgs += c.outMsgs.Load()
	a.cmu.closed.InBytes += c.inBytes.Load()
	a.cmu.closed.OutBytes += c.outBytes.Load()
}

// NumConnections is the number of clients connected to the account.
func (a *Account) NumConnections() int {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	return len(a.cmu.clients)
}

// TotalConnections is the number of connections ever made to the account.
func (a *Account) TotalConnections() uint64 {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	return a.cmu.total
}

// NumSubscriptions is the number of client subscriptions in the account.
func (a *Account) NumSubscriptions() int { return a.clientSubs() }

// Totals sums the message counters of the account's connections, open and
// closed.
func (a *Account) Totals() ConnTotals {
	a.cmu.Lock()
	t := a.cmu.closed
	clients := a.clientsLocked()
	a.cmu.Unlock()
	for _, c := range clients {
		t.InMsgs += c.inMsgs.Load()
		t.OutMsgs += c.outMsgs.Load()
		t.InBytes += c.inBytes.Load()
		t.OutBytes += c.outBytes.Load()
	}
	return t
}

// DisconnectAll closes every connection of the account with reason.
func (a *Account) DisconnectAll(errText, reason string) int {
	a.cmu.Lock()
	clients := a.clientsLocked()
	a.cmu.Unlock()
	for _, c := range clients {
		c.sendErr(errText)
		c.close(reason, true)
	}
	return len(clients)
}

// newNonce is the per-connection challenge a user signs at CONNECT.
func newNonce() []byte {
	var b [11]byte
	rand.Read(b[:])
	out := make([]byte, base64.RawURLEncoding.EncodedLen(len(b)))
	base64.RawURLEncoding.Encode(out, b[:])
	return out
}

// authenticate proves the CONNECT's user against its account and binds the
// client to it. The error is for the server log only; the client is told
// "Authorization Violation".
func (c *client) authenticate(opts *connectOpts) error {
	s := c.srv
	if s.op == nil {
		return c.authenticateStatic(opts)
	}
	if opts.JWT == "" {
		return errNoCredentials
	}
	uc, accName, err := tenant.DecodeUser(opts.JWT)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	acc, err := s.LookupAccount(ctx, accName)
	if err != nil {
		return err
	}
	ac := acc.claims.Load()
	if ac == nil {
		return fmt.Errorf("account %s: %w", accName, ErrUnknownAccount)
	}
	now := time.Now()
	if err := tenant.CheckUser(ac, uc, c.nonce, opts.Sig, now); err != nil {
		return err
	}
	if types := uc.AllowedConnectionTypes; len(types) > 0 && !types.Contains(jwt.ConnectionTypeStandard) {
		return fmt.Errorf("user %s: connection type STANDARD not allowed", uc.Subject)
	}
	if err := allowedSource(uc.Limits.Src, c.host); err != nil {
		return fmt.Errorf("user %s: %w", uc.Subject, err)
	}
	until, err := allowedTime(uc.Limits.Times, uc.Limits.Locale, now)
	if err != nil {
		return fmt.Errorf("user %s: %w", uc.Subject, err)
	}
	lim := acc.limits.Load()
	c.mpay = minLimit(minLimit(uc.Limits.Payload, lim.payload), int64(s.opts.MaxPayload))
	c.msubs = minLimit(uc.Limits.Subs, lim.subs)
	c.mpend.Store(minLimit(minLimit(uc.Limits.Data, lim.data), s.opts.MaxPending))
	c.perms = newPermissions(uc.Permissions)
	c.mu.Lock()
	c.mu.user = uc
	c.mu.account = acc.name
	c.mu.Unlock()
	if err := c.join(acc); err != nil {
		return err
	}
	// Claims installed while this CONNECT was checked did not see this
	// client: check their revocations now that installClaims will.
	if cur := acc.claims.Load(); cur != ac && tenant.Revoked(cur, uc) {
		acc.removeClient(c)
		return fmt.Errorf("user %s: %w", uc.Subject, tenant.ErrRevoked)
	}
	// A user whose JWT expires, or whose allowed hours end, is cut off then.
	end := time.Time{}
	if uc.Expires > 0 {
		end = time.Unix(uc.Expires, 0)
	}
	if !until.IsZero() && (end.IsZero() || until.Before(end)) {
		end = until
	}
	if !end.IsZero() {
		t := time.AfterFunc(time.Until(end), func() {
			c.sendErr(errTextUserExpired)
			c.close(reasonAuthExpired, true)
		})
		c.mu.Lock()
		c.mu.expiry = t
		c.mu.Unlock()
		if c.closed.Load() {
			t.Stop() // close ran before the timer was set
		}
	}
	return nil
}

// errClosedDuringAuth: the connection closed (auth timeout, shutdown)
// while its CONNECT was checked.
var errClosedDuringAuth = errors.New("connection closed during authentication")

// join admits an authenticated client to acc. close may run at any moment
// (the auth timeout fires while a slow resolver answers, the server shuts
// down); whichever of join and close comes second takes the client out
// of the account again, so a closed client never stays counted there.
func (c *client) join(acc *Account) error {
	if err := acc.addClient(c); err != nil {
		return err
	}
	c.acc = acc
	c.authed.Store(true) // close reads it after marking the client closed
	if c.closed.Load() {
		acc.removeClient(c)
		return errClosedDuringAuth
	}
	return nil
}

// userClaims is the authenticated user's claims (nil in open mode).
func (c *client) userClaims() *jwt.UserClaims {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.user
}

// minLimit combines two limits where -1 (or 0 for unset) means unlimited.
func minLimit(a, b int64) int64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// allowedSource checks the client address against the user's CIDR list.
func allowedSource(src jwt.CIDRList, host string) error {
	if len(src) == 0 {
		return nil
	}
	ip := net.ParseIP(host)
	for _, cidr := range src {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			if other := net.ParseIP(cidr); other != nil && other.Equal(ip) {
				return nil
			}
			continue
		}
		if ip != nil && n.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("source address %s not allowed", host)
}

// allowedTime checks now against the user's time-of-day ranges (in the
// user's locale) and returns when the current range ends.
func allowedTime(ranges []jwt.TimeRange, locale string, now time.Time) (time.Time, error) {
	if len(ranges) == 0 {
		return time.Time{}, nil
	}
	loc := time.Local
	if locale != "" {
		l, err := time.LoadLocation(locale)
		if err != nil {
			return time.Time{}, fmt.Errorf("times_location %q: %w", locale, err)
		}
		loc = l
	}
	now = now.In(loc)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	for _, r := range ranges {
		start, err1 := time.ParseInLocation("15:04:05", r.Start, loc)
		end, err2 := time.ParseInLocation("15:04:05", r.End, loc)
		if err1 != nil || err2 != nil {
			continue
		}
		s := day.Add(time.Duration(start.Hour())*time.Hour + time.Duration(start.Minute())*time.Minute + time.Duration(start.Second())*time.Second)
		e := day.Add(time.Duration(end.Hour())*time.Hour + time.Duration(end.Minute())*time.Minute + time.Duration(end.Second())*time.Second)
		if !e.After(s) { // a range over midnight
			if !now.Before(s) {
				return e.Add(24 * time.Hour), nil
			}
			if now.Before(e) {
				return e, nil
			}
			continue
		}
		if !now.Before(s) && now.Before(e) {
			return e, nil
		}
	}
	return time.Time{}, errors.New("outside the allowed connect times")
}

func sortClientsByCID(list []*client) {
	sort.Slice(list, func(i, j int) bool { return list[i].cid < list[j].cid })
}
