package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/tenant"
)

// errUnknownNkey: CONNECT named an nkey the authorization block lacks.
var errUnknownNkey = errors.New("unknown nkey user")

// loadNkeyUsers compiles the open-mode authorization block's users.
func (s *Server) loadNkeyUsers(a *config.Authorization) error {
	if a == nil || len(a.Users) == 0 {
		return nil
	}
	s.nkeyUsers = make(map[string]jwt.Permissions, len(a.Users))
	for _, u := range a.Users {
		var p jwt.Permissions
		if cp := u.Permissions; cp != nil {
			p.Pub.Allow, p.Pub.Deny = cp.Publish.Allow, cp.Publish.Deny
			p.Sub.Allow, p.Sub.Deny = cp.Subscribe.Allow, cp.Subscribe.Deny
			if r := cp.AllowResponses; r != nil {
				p.Resp = &jwt.ResponsePermission{MaxMsgs: r.MaxMsgs}
				if r.Expires != "" {
					d, err := time.ParseDuration(r.Expires)
					if err != nil {
						return fmt.Errorf("authorization: user %s: allow_responses expires: %w", u.Nkey, err)
					}
					p.Resp.Expires = d
				}
			}
		}
		s.nkeyUsers[u.Nkey] = p
	}
	s.authRequired = true
	return nil
}

// authenticateNkey proves a bare nkey user of the global account: the
// CONNECT's sig must be the nkey's signature of this connection's nonce.
func (c *client) authenticateNkey(opts *connectOpts) error {
	perms, ok := c.srv.nkeyUsers[opts.Nkey]
	if !ok || opts.Nkey == "" {
		return fmt.Errorf("nkey %q: %w", opts.Nkey, errUnknownNkey)
	}
	if err := tenant.VerifyNonce(opts.Nkey, c.nonce, opts.Sig); err != nil {
		return fmt.Errorf("nkey %s: %w", opts.Nkey, err)
	}
	c.perms = newPermissions(perms)
	c.mpay = int64(c.srv.opts.MaxPayload)
	uc := jwt.NewUserClaims(opts.Nkey) // so monitoring and events name the user
	c.mu.Lock()
	c.mu.user = uc
	c.mu.Unlock()
	return c.join(c.srv.global)
}
