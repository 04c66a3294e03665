package server

import (
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/tenant"
)

// Static auth is the open mode with users: the authorization and
// accounts blocks of the config file name who may connect, with a
// password (plain or bcrypt), an nkey, a token, or a TLS certificate
// mapped to a user name. Each user belongs to an account: a static
// account of the accounts block, or the global account. Static accounts
// run on the same account machinery as operator-mode JWT accounts: each
// gets account claims built from its block (exports, imports, JetStream
// limits), installed once at start, so links, limits and JetStream hooks
// behave exactly as for a JWT.

// staticAuth is the users of the config file; built in New and
// read-only after.
type staticAuth struct {
	users map[string]*staticUser // by user name
	nkeys map[string]*staticUser // by public nkey
	// single is authorization { user, password }; token is
	// authorization { token }, whose clients are the global account's.
	single  *staticUser
	token   string
	tokenAs *staticUser
	// noAuth is whom a client giving no credentials connects as.
	noAuth *staticUser
	// mapCerts: the client certificate names the user (verify_and_map).
	mapCerts bool
	timeout  time.Duration
}

// staticUser is one configured user.
type staticUser struct {
	name     string // user name or nkey
	password string // plain text, or a bcrypt hash when hashed
	hashed   bool
	acc      *Account
	perms    jwt.Permissions
	// noStandard: allowed_connection_types leaves out STANDARD, the only
	// kind of connection Contrail serves, so the user never gets in.
	noStandard bool
}

var (
	// errBadPassword: the user exists and the password does not match.
	errBadPassword = errors.New("wrong password")
	// errUnknownUser: CONNECT named no configured user, nkey or token.
	errUnknownUser = errors.New("unknown user")
	// errUnknownNkey: CONNECT named an nkey the config lacks.
	errUnknownNkey = errors.New("unknown nkey user")
	// errNoUser: CONNECT gave no credentials and there is no no_auth_user.
	errNoUser = errors.New("no credentials and no no_auth_user")
)

// loadStaticAuth builds the static accounts and users of opts. Static
// accounts replace the single global account: every account, the global
// one included, is kept in the account table and gets claims.
func (s *Server) loadStaticAuth(opts *config.Options) error {
	if len(opts.Accounts) > 0 {
		if err := s.loadStaticAccounts(opts); err != nil {
			return err
		}
	}
	if !opts.StaticAuth() {
		return nil
	}
	st := &staticAuth{users: map[string]*staticUser{}, nkeys: map[string]*staticUser{}, timeout: authTimeout}
	if opts.TLS != nil {
		st.mapCerts = opts.TLS.VerifyAndMap
	}
	var globalDefault *config.Permissions
	if a := opts.Authorization; a != nil {
		globalDefault = a.DefaultPermissions
		if a.Timeout > 0 {
			st.timeout = a.Timeout
		}
		if a.User != "" {
			st.single = newStaticUser(config.User{Name: a.User, Password: a.Password}, s.global, globalDefault)
		}
		if a.Token != "" {
			st.token = a.Token
			st.tokenAs = newStaticUser(config.User{Password: a.Token}, s.global, globalDefault)
		}
		for _, u := range a.Users {
			st.add(newStaticUser(u, s.global, globalDefault), u.Nkey != "")
		}
	}
	for _, ac := range opts.Accounts {
		acc := s.accts.m[ac.Name]
		if ac.Name == config.GlobalAccount {
			acc = s.global
		}
		for _, u := range ac.Users {
			st.add(newStaticUser(u, acc, ac.DefaultPermissions), u.Nkey != "")
		}
	}
	if name := opts.NoAuthUser; name != "" {
		if st.noAuth = st.users[name]; st.noAuth == nil {
			st.noAuth = st.nkeys[name]
		}
		if st.noAuth == nil && st.single != nil && st.single.name == name {
			st.noAuth = st.single
		}
		if st.noAuth == nil {
			return fmt.Errorf("no_auth_user %q: no such user", name)
		}
	}
	s.static = st
	s.authRequired = true
	return nil
}

func (st *staticAuth) add(u *staticUser, nkey bool) {
	if nkey {
		st.nkeys[u.name] = u
	} else {
		st.users[u.name] = u
	}
}

func newStaticUser(u config.User, acc *Account, def *config.Permissions) *staticUser {
	p := u.Permissions
	if p == nil {
		p = def
	}
	su := &staticUser{name: u.ID(), password: u.Password, hashed: isBcrypt(u.Password), acc: acc, perms: jwtPermissions(p)}
	if len(u.ConnectionTypes) > 0 {
		su.noStandard = !slices.ContainsFunc(u.ConnectionTypes, func(t string) bool { return strings.EqualFold(t, jwt.ConnectionTypeStandard) })
	}
	return su
}

// isBcrypt tells a bcrypt hash from a plain password, as nats-server
// does: by its "$2" prefix.
func isBcrypt(pw string) bool { return strings.HasPrefix(pw, "$2") }

// jwtPermissions turns a config permissions block into the JWT form the
// permission checks compile. An allow_responses expiry was validated as
// a duration when the file was read (config.Validate).
func jwtPermissions(cp *config.Permissions) jwt.Permissions {
	var p jwt.Permissions
	if cp == nil {
		return p
	}
	p.Pub.Allow, p.Pub.Deny = cp.Publish.Allow, cp.Publish.Deny
	p.Sub.Allow, p.Sub.Deny = cp.Subscribe.Allow, cp.Subscribe.Deny
	if r := cp.AllowResponses; r != nil {
		p.Resp = &jwt.ResponsePermission{MaxMsgs: r.MaxMsgs}
		if r.Expires != "" {
			p.Resp.Expires, _ = time.ParseDuration(r.Expires)
		}
	}
	return p
}

// checkPassword compares in constant time (plain), or by bcrypt.
func (u *staticUser) checkPassword(pw string) error {
	if u.hashed {
		if bcrypt.CompareHashAndPassword([]byte(u.password), []byte(pw)) != nil {
			return fmt.Errorf("user %q: %w", u.name, errBadPassword)
		}
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(u.password), []byte(pw)) != 1 {
		return fmt.Errorf("user %q: %w", u.name, errBadPassword)
	}
	return nil
}

// authenticateStatic proves the CONNECT's credentials against the
// configured users, in nats-server's order: a mapped certificate, an
// nkey, a user and password, a token; a client giving none connects as
// no_auth_user.
func (c *client) authenticateStatic(opts *connectOpts) error {
	st := c.srv.static
	u, err := st.identify(c, opts)
	if err != nil {
		return err
	}
	if u.noStandard {
		return fmt.Errorf("user %q: connection type STANDARD not allowed", u.name)
	}
	c.perms = newPermissions(u.perms)
	c.mpay = int64(c.srv.opts.MaxPayload)
	if lim := u.acc.limits.Load(); lim != nil {
		c.mpay = minLimit(lim.payload, c.mpay)
		c.msubs = lim.subs
	}
	name := u.name
	if name == "" {
		name = "[token]"
	}
	uc := jwt.NewUserClaims(name) // so monitoring and events name the user
	c.mu.Lock()
	c.mu.user = uc
	c.mu.account = u.acc.name
	c.mu.Unlock()
	return c.join(u.acc)
}

func (st *staticAuth) identify(c *client, opts *connectOpts) (*staticUser, error) {
	if st.mapCerts {
		return st.certUser(c)
	}
	switch {
	case opts.Nkey != "":
		u := st.nkeys[opts.Nkey]
		if u == nil {
			return nil, fmt.Errorf("nkey %q: %w", opts.Nkey, errUnknownNkey)
		}
		if err := tenant.VerifyNonce(opts.Nkey, c.nonce, opts.Sig); err != nil {
			return nil, fmt.Errorf("nkey %s: %w", opts.Nkey, err)
		}
		return u, nil
	case opts.User != "":
		u := st.users[opts.User]
		if u == nil && st.single != nil && st.single.name == opts.User {
			u = st.single
		}
		if u == nil {
			return nil, fmt.Errorf("user %q: %w", opts.User, errUnknownUser)
		}
		return u, u.checkPassword(opts.Pass)
	case opts.Token != "":
		if st.tokenAs == nil {
			return nil, fmt.Errorf("token given: %w", errUnknownUser)
		}
		return st.tokenAs, st.tokenAs.checkPassword(opts.Token)
	case opts.JWT != "":
		return nil, errors.New("a user JWT was given, but users come from the config file")
	case st.noAuth != nil:
		return st.noAuth, nil
	}
	return nil, errNoUser
}

// certUser finds the user the client certificate names: an email or
// DNS name of its SANs, or its subject DN (in either RDN order), as
// nats-server's verify_and_map matches them.
func (st *staticAuth) certUser(c *client) (*staticUser, error) {
	c.mu.Lock()
	ts := c.mu.tlsState
	c.mu.Unlock()
	if ts == nil || len(ts.PeerCertificates) == 0 {
		return nil, errors.New("verify_and_map: no client certificate")
	}
	for _, id := range certIdentities(ts.PeerCertificates[0]) {
		if u := st.users[id]; u != nil {
			return u, nil
		}
	}
	return nil, fmt.Errorf("verify_and_map: certificate %q: %w", ts.PeerCertificates[0].Subject.String(), errUnknownUser)
}

// certIdentities are the names a certificate may map to, in the order
// they are tried.
func certIdentities(cert *x509.Certificate) []string {
	var ids []string
	ids = append(ids, cert.EmailAddresses...)
	ids = append(ids, cert.DNSNames...)
	for _, u := range cert.URIs {
		ids = append(ids, u.String())
	}
	dn := cert.Subject.String()
	ids = append(ids, dn)
	// The same DN with its RDNs in the opposite order (how openssl prints
	// it, and how many people write it in a config).
	parts := strings.Split(dn, ",")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	if rev := strings.Join(parts, ","); rev != dn {
		ids = append(ids, rev, strings.Join(parts, ", "))
	}
	return ids
}

// authWait is how long a client has to authenticate: the authorization
// block's timeout, else nats-server's default.
func (s *Server) authWait() time.Duration {
	if s.static != nil {
		return s.static.timeout
	}
	return authTimeout
}
