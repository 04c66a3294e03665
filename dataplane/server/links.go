package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/subject"
)

// Links are the imports in force between accounts. They are derived
// state: whenever an account's claims are installed (loaded or updated),
// the node recomputes the imports of that account and of every account
// importing from it, against the claims in use at that moment, and adds
// or removes forwarding subscriptions to match (imports.go). An import
// naming an account the node has not loaded starts a bounded background
// load; the import comes into force when that account's claims are
// installed, which relinks its importers.
//
// Invariant: once a relink of an account returns, its installed links are
// exactly the imports its claims declare that the exporters' current
// claims admit (and whose exporters are loaded). Relinks run one at a time
// (serverLinks.mu), never do I/O, and never wait for an account load, so
// a cycle of accounts importing from each other cannot loop or deadlock.

// maxImportLoads bounds the account loads imports start at once; an
// import that finds no room is retried at the importer's next relink.
const maxImportLoads = 16

// serverLinks serializes relinking and tracks the loads imports started.
type serverLinks struct {
	mu      sync.Mutex
	loading map[string]bool // accounts being loaded for an import; guarded by mu
}

// accountLinks is one account's side of the links.
type accountLinks struct {
	// installed holds the account's imports in force, by plan key;
	// guarded by Server.accts.links.mu.
	installed map[string]installedLink
	// expiry relinks the account when the first activation token that
	// admits one of its imports expires; guarded by Server.accts.links.mu.
	expiry *time.Timer

	respMu sync.Mutex                // serializes creating resp
	resp   atomic.Pointer[respTable] // response routes into this account's services; nil until needed
}

// installedLink is an import in force.
type installedLink interface {
	// uninstall removes the link's subscription; messages stop crossing.
	uninstall()
	// source is the exporting account.
	source() *Account
}

func (l *streamLink) uninstall()       { l.sub.unsubscribe() }
func (l *streamLink) source() *Account { return l.exporter }

func (l *serviceLink) uninstall()       { l.sub.unsubscribe() }
func (l *serviceLink) source() *Account { return l.exporter }

// plan is one import as the claims want it in force.
type plan struct {
	key      string
	kind     jwt.ExportType
	exporter *Account
	// Stream: from is the imported filter in the exporter, to the local
	// subject template. Service: from is the local subject template, to
	// the exported subject.
	from, to string
	respType string
	ttl      time.Duration
	expires  time.Time // when the admitting activation expires; zero: never
}

// linkClaims brings the links of a and of every account importing from a
// in line with the claims now installed. installClaims calls it.
func (s *Server) linkClaims(a *Account) {
	if s.accts.m == nil {
		return
	}
	reg := &s.accts.links
	reg.mu.Lock()
	defer reg.mu.Unlock()
	now := time.Now()
	s.relinkLocked(a, now)
	for _, b := range s.Accounts() {
		if b != a && b.importsFromLocked(a.name) {
			s.relinkLocked(b, now)
		}
	}
}

// relink recomputes one account's links (an activation token expired).
func (s *Server) relink(a *Account) {
	reg := &s.accts.links
	reg.mu.Lock()
	defer reg.mu.Unlock()
	s.relinkLocked(a, time.Now())
}

// importsFromLocked reports whether the account's claims import from the
// named account or one of its links comes from it.
func (a *Account) importsFromLocked(name string) bool {
	if ac := a.claims.Load(); ac != nil {
		for _, imp := range ac.Imports {
			if imp != nil && imp.Account == name {
				return true
			}
		}
	}
	for _, l := range a.links.installed {
		if l.source().name == name {
			return true
		}
	}
	return false
}

// relinkLocked installs the imports a's claims want and the exporters
// admit, and removes the others. A disabled account has none in force.
func (s *Server) relinkLocked(a *Account, now time.Time) {
	var plans []*plan
	want := map[string]*plan{}
	var soonest time.Time
	if ac := a.claims.Load(); ac != nil && !a.isDisabled() {
		for _, imp := range ac.Imports {
			p, pending, err := s.planImport(a, imp, now)
			switch {
			case err != nil:
				s.log.Warn("import refused", "account", a.name, "err", err)
			case pending != "":
				s.loadForImportLocked(pending)
			case want[p.key] == nil:
				want[p.key] = p
				plans = append(plans, p)
				if !p.expires.IsZero() && (soonest.IsZero() || p.expires.Before(soonest)) {
					soonest = p.expires
				}
			}
		}
	}
	for k, l := range a.links.installed {
		// An exporter deleted and loaded again is a new *Account: links
		// to the old one are replaced.
		if p := want[k]; p == nil || l.source() != p.exporter {
			l.uninstall()
			delete(a.links.installed, k)
			s.log.Info("import withdrawn", "account", a.name, "import", k)
		}
	}
	for _, p := range plans {
		if a.links.installed[p.key] != nil {
			continue
		}
		l, err := s.installLocked(a, p)
		if err != nil {
			s.log.Warn("import refused", "account", a.name, "import", p.key, "err", err)
			continue
		}
		if a.links.installed == nil {
			a.links.installed = map[string]installedLink{}
		}
		a.links.installed[p.key] = l
		s.log.Info("import in force", "account", a.name, "import", p.key)
	}
	if a.links.expiry != nil {
		a.links.expiry.Stop()
		a.links.expiry = nil
	}
	if !soonest.IsZero() {
		a.links.expiry = time.AfterFunc(soonest.Sub(now), func() { s.relink(a) })
	}
}

// unlinkAccount takes an account out of every link when it goes (its JWT
// expired, or it was deleted): its imports are removed, and so are the
// imports of others from it.
func (s *Server) unlinkAccount(a *Account) {
	if s.accts.m == nil {
		return
	}
	reg := &s.accts.links
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for k, l := range a.links.installed {
		l.uninstall()
		delete(a.links.installed, k)
	}
	if a.links.expiry != nil {
		a.links.expiry.Stop()
		a.links.expiry = nil
	}
	for _, b := range s.Accounts() {
		if b != a && b.importsFromLocked(a.name) {
			s.relinkLocked(b, time.Now())
		}
	}
}

// isDisabled reports whether the account's JWT expired or was withdrawn.
func (a *Account) isDisabled() bool {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	return a.cmu.disabled
}

// planImport reads one import of a's claims. It returns the plan when the
// exporter is loaded and admits the import, the exporter's name when it
// must be loaded first, or why the import is refused.
func (s *Server) planImport(a *Account, imp *jwt.Import, now time.Time) (p *plan, pending string, err error) {
	switch {
	case imp == nil:
		return nil, "", fmt.Errorf("empty import")
	case imp.Account == a.name:
		return nil, "", fmt.Errorf("%s %q: an account cannot import from itself", imp.Type, imp.Subject)
	case imp.Type != jwt.Stream && imp.Type != jwt.Service:
		return nil, "", fmt.Errorf("import %q: unknown type %v", imp.Subject, imp.Type)
	}
	exp, ok := s.loadedAccount(imp.Account)
	if !ok {
		return nil, imp.Account, nil
	}
	ec := exp.claims.Load()
	if exp.isDisabled() {
		return nil, "", fmt.Errorf("%s %q: exporting account %s: %w", imp.Type, imp.Subject, exp.name, ErrAccountDisabled)
	}

	p = &plan{kind: imp.Type, exporter: exp}
	var g grant
	if imp.Type == jwt.Stream {
		p.from, p.to = string(imp.Subject), string(imp.Subject)
		switch {
		case imp.LocalSubject != "":
			p.to = string(imp.LocalSubject)
		case imp.GetTo() != "":
			// The deprecated "to" of a stream import is a literal prefix.
			prefix := strings.TrimSuffix(imp.GetTo(), ".")
			if !subject.ValidLiteralString(prefix) {
				return nil, "", fmt.Errorf("stream %q: prefix %q is not a literal subject", imp.Subject, imp.GetTo())
			}
			p.to = prefix + "." + p.from
		}
		if !subject.ValidFilterString(p.from) {
			return nil, "", fmt.Errorf("stream %q: %w", p.from, subject.ErrInvalidSubject)
		}
		if g, err = authorizeImport(ec, a.name, imp, p.from, jwt.Stream, now); err != nil {
			return nil, "", err
		}
		if err = exp.admitsStatic(g.export, a.name); err != nil {
			return nil, "", err
		}
		if _, err := newStreamMap(p.from, p.to); err != nil {
			return nil, "", err
		}
	} else {
		p.from, p.to = string(imp.Subject), string(imp.Subject)
		switch {
		case imp.LocalSubject != "":
			p.from = string(imp.LocalSubject)
		case imp.GetTo() != "":
			// The deprecated "to" of a service import is the exported subject.
			p.to = imp.GetTo()
		}
		if !subject.ValidFilterString(p.to) {
			return nil, "", fmt.Errorf("service %q: %w", p.to, subject.ErrInvalidSubject)
		}
		if g, err = authorizeImport(ec, a.name, imp, p.to, jwt.Service, now); err != nil {
			return nil, "", err
		}
		if err = exp.admitsStatic(g.export, a.name); err != nil {
			return nil, "", err
		}
		if _, _, err := newServiceMap(p.from, p.to); err != nil {
			return nil, "", err
		}
		p.respType = string(g.export.ResponseType)
		p.ttl = respTTL(g.export)
	}
	p.expires = g.expires
	p.key = fmt.Sprintf("%s %s %q→%q", p.kind, exp.name, p.from, p.to)
	if p.kind == jwt.Service {
		p.key += fmt.Sprintf(" %s/%v", p.respType, p.ttl)
	}
	return p, "", nil
}

// loadedAccount returns the named account if its claims are installed.
func (s *Server) loadedAccount(name string) (*Account, bool) {
	s.accts.mu.Lock()
	a := s.accts.m[name]
	s.accts.mu.Unlock()
	return a, a != nil && a.claims.Load() != nil
}

// installLocked puts a planned import in force.
func (s *Server) installLocked(a *Account, p *plan) (installedLink, error) {
	if p.kind == jwt.Stream {
		m, err := newStreamMap(p.from, p.to)
		if err != nil {
			return nil, err
		}
		l := &streamLink{importer: a, exporter: p.exporter, from: p.from, to: p.to, m: m}
		l.sub = &subscription{acc: p.exporter, subject: []byte(p.from), fwd: l}
		if err := p.exporter.insertSub(p.from, "", l.sub); err != nil {
			return nil, fmt.Errorf("stream %q: %w", p.from, err)
		}
		// A push consumer in the exporter waiting for interest in its
		// deliver subject learns the importer is listening.
		p.exporter.notifyInterest(p.from)
		return l, nil
	}
	filter, m, err := newServiceMap(p.from, p.to)
	if err != nil {
		return nil, err
	}
	if serviceLoops(a, p.exporter, p.to, 0) {
		return nil, fmt.Errorf("service %q from %s: %w", p.to, p.exporter.name, errImportFormsLoop)
	}
	l := &serviceLink{importer: a, exporter: p.exporter, local: filter, to: p.to, m: m, respType: p.respType, ttl: p.ttl}
	l.sub = &subscription{acc: a, subject: []byte(filter), fwd: l}
	if err := a.subs.Insert(filter, "", l.sub); err != nil {
		return nil, fmt.Errorf("service %q: %w", filter, err)
	}
	return l, nil
}

// serviceLoops reports whether requests to subj in account at would reach
// account home again through the service imports in force. Called with
// the registry lock held.
func serviceLoops(home, at *Account, subj string, depth int) bool {
	if depth >= maxLinkDepth {
		return true
	}
	for _, l := range at.links.installed {
		sl, ok := l.(*serviceLink)
		if !ok || !subject.Overlaps(sl.local, subj) {
			continue
		}
		if sl.exporter == home || serviceLoops(home, sl.exporter, sl.to, depth+1) {
			return true
		}
	}
	return false
}

// loadForImportLocked starts loading an account an import names, unless a
// load is already running or too many are.
func (s *Server) loadForImportLocked(name string) {
	reg := &s.accts.links
	if reg.loading[name] || len(reg.loading) >= maxImportLoads {
		return
	}
	if reg.loading == nil {
		reg.loading = map[string]bool{}
	}
	reg.loading[name] = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		_, err := s.LookupAccount(ctx, name)
		cancel()
		reg.mu.Lock()
		delete(reg.loading, name)
		reg.mu.Unlock()
		if err != nil {
			s.log.Warn("cannot load an account imported from", "account", name, "err", err)
		}
		// On success, installing its claims relinked its importers.
	}()
}
