package server

import (
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/config"
)

// loadStaticAccounts makes an account of each block of the accounts
// section, beside the global account, with claims that say what the block
// says. Every account's claims are stored before any is installed, so
// installing one finds the accounts its imports name already there.
func (s *Server) loadStaticAccounts(opts *config.Options) error {
	s.accts.m = map[string]*Account{s.global.name: s.global}
	s.accts.loading = map[string]*loadCall{}
	claims := map[*Account]*jwt.AccountClaims{s.global: jwt.NewAccountClaims(s.global.name)}
	order := []*Account{s.global}
	for _, ac := range opts.Accounts {
		a := s.global
		if ac.Name != config.GlobalAccount {
			a = newAccount(s, ac.Name)
			s.accts.m[ac.Name] = a
			order = append(order, a)
		}
		c, only := staticClaims(ac)
		claims[a] = c
		a.exportOnly = only
	}
	if globalOnly(opts) {
		// As in nats-server: with no account beside the global and the
		// system account, JetStream serves the global one.
		claims[s.global].Limits.JetStreamLimits = jsClaims(config.UnlimitedJetStream())
	}
	for _, a := range order {
		a.claims.Store(claims[a])
	}
	for _, a := range order {
		s.installClaims(a, claims[a])
	}
	if name := opts.SystemAccount; name != "" {
		if s.sys = s.accts.m[name]; s.sys == nil {
			return fmt.Errorf("system_account %q: not an account of the accounts block", name)
		}
	}
	return nil
}

// staticClaims are the account claims an accounts-block account stands
// for, with the accounts each restricted export admits.
func staticClaims(ac *config.Account) (*jwt.AccountClaims, map[*jwt.Export]map[string]bool) {
	c := jwt.NewAccountClaims(ac.Name)
	c.Name = ac.Name
	c.Limits.Conn, c.Limits.Subs, c.Limits.Payload = ac.Limits.MaxConnections, ac.Limits.MaxSubscriptions, ac.Limits.MaxPayload
	if js := ac.JetStream; js != nil {
		c.Limits.JetStreamLimits = jsClaims(js)
	}
	var only map[*jwt.Export]map[string]bool
	for _, e := range ac.Exports {
		x := &jwt.Export{Type: jwt.Stream, Subject: jwt.Subject(e.Stream), AccountTokenPosition: uint(max(e.AccountTokenPosition, 0))}
		if e.Service != "" {
			x.Type, x.Subject = jwt.Service, jwt.Subject(e.Service)
			x.ResponseType = jwt.ResponseTypeSingleton
			if e.ResponseType != "" {
				x.ResponseType = jwt.ResponseType(e.ResponseType)
			}
		}
		c.Exports = append(c.Exports, x)
		if len(e.Accounts) > 0 {
			if only == nil {
				only = map[*jwt.Export]map[string]bool{}
			}
			only[x] = map[string]bool{}
			for _, name := range e.Accounts {
				only[x][name] = true
			}
		}
	}
	for _, im := range ac.Imports {
		x := &jwt.Import{}
		if src := im.Stream; src != nil {
			x.Type, x.Account, x.Subject = jwt.Stream, src.Account, jwt.Subject(src.Subject)
			x.LocalSubject = jwt.RenamingSubject(im.To)
			if im.Prefix != "" {
				x.LocalSubject = jwt.RenamingSubject(strings.TrimSuffix(im.Prefix, ".") + "." + src.Subject)
			}
		} else {
			src := im.Service
			x.Type, x.Account, x.Subject = jwt.Service, src.Account, jwt.Subject(src.Subject)
			x.LocalSubject = jwt.RenamingSubject(im.To)
		}
		c.Imports = append(c.Imports, x)
	}
	return c, only
}

// admitsStatic applies an accounts-block export's accounts list, which
// JWT exports do not have: only the listed accounts may import it.
func (a *Account) admitsStatic(e *jwt.Export, importer string) error {
	if only := a.exportOnly[e]; only != nil && !only[importer] {
		return fmt.Errorf("%s %q of account %s: %w", e.Type, e.Subject, a.name, errNotAuthorized)
	}
	return nil
}

// isStatic reports whether the accounts come from the config file.
func (s *Server) isStatic() bool { return s.op == nil && s.accts.m != nil }

// jsClaims are an accounts-block account's JetStream limits as an
// account JWT states them.
func jsClaims(js *config.AccountJetStream) jwt.JetStreamLimits {
	return jwt.JetStreamLimits{
		MemoryStorage: js.MaxMemory, DiskStorage: js.MaxStore,
		Streams: js.MaxStreams, Consumer: js.MaxConsumers, MaxAckPending: js.MaxAckPending,
		MemoryMaxStreamBytes: js.MemoryMaxStreamBytes, DiskMaxStreamBytes: js.StoreMaxStreamBytes,
		MaxBytesRequired: js.MaxBytesRequired,
	}
}

// globalOnly reports whether the accounts block defines no account but
// the system account (and does not configure the global one).
func globalOnly(opts *config.Options) bool {
	for _, ac := range opts.Accounts {
		if ac.Name != opts.SystemAccount {
			return false
		}
	}
	return true
}
