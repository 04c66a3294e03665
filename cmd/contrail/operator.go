package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/jetstream"
	"github.com/contrail/contrail/dataplane/resolver"
	"github.com/contrail/contrail/dataplane/server"
	"github.com/contrail/contrail/tenant"
)

// enableOperatorMode makes the node trust the configured operator and
// find accounts through the resolver, keeping every account JWT it sees
// under <data-dir>/accounts.
func enableOperatorMode(srv *server.Server, opts *config.Options, dataDir string, log *slog.Logger) (*resolver.Resolver, error) {
	raw := []byte(strings.TrimSpace(opts.Operator))
	if !strings.HasPrefix(string(raw), "eyJ") {
		b, err := os.ReadFile(opts.Operator)
		if err != nil {
			return nil, fmt.Errorf("operator: %w", err)
		}
		raw = b
	}
	trust, err := tenant.NewTrust(raw)
	if err != nil {
		return nil, err
	}
	url, err := resolverURL(opts.Resolver)
	if err != nil {
		return nil, err
	}
	res, err := resolver.New(resolver.Options{
		URL: url, Dir: filepath.Join(dataDir, "accounts"), Preload: opts.ResolverPreload,
		Log: log.With("component", "resolver"),
	})
	if err != nil {
		return nil, err
	}
	sys := opts.SystemAccount
	if sys == "" {
		sys = trust.SystemAccount()
	}
	if err := srv.SetOperatorMode(server.OperatorMode{Trust: trust, Resolver: res, SystemAccount: sys}); err != nil {
		return nil, err
	}
	log.Info("operator mode", "operator", trust.OperatorKey(), "name", trust.Operator().Name,
		"system_account", sys, "resolver", url)
	return res, nil
}

// resolverURL reads nats-server's resolver forms: URL(<url>), MEMORY, or
// a bare URL as the --resolver flag takes it.
func resolverURL(spec string) (string, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "" || strings.EqualFold(spec, "MEMORY"):
		return "", nil
	case strings.HasPrefix(strings.ToUpper(spec), "URL(") && strings.HasSuffix(spec, ")"):
		spec = strings.TrimSpace(spec[4 : len(spec)-1])
	}
	if !strings.HasPrefix(spec, "http://") && !strings.HasPrefix(spec, "https://") {
		return "", fmt.Errorf("resolver %q: want an http(s) URL, URL(<url>) or MEMORY", spec)
	}
	return spec, nil
}

// loadStoredAccounts loads every account the node holds a JWT for, so
// their streams' timers and consumers run before their users return.
func loadStoredAccounts(srv *server.Server, res *resolver.Resolver, log *slog.Logger) {
	for _, key := range res.Stored() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := srv.LookupAccount(ctx, key); err != nil {
			log.Warn("stored account not loaded", "account", key, "err", err)
		}
		cancel()
	}
}

// accountHooks keeps each account's JetStream in step with its JWT.
type accountHooks struct {
	js  *jetstream.Engine
	log *slog.Logger

	mu      sync.Mutex
	enabled map[string]bool // guarded by mu
}

// AccountReady enables JetStream in an account whose JWT grants it.
func (h *accountHooks) AccountReady(acc *server.Account) {
	ac := acc.Claims()
	if ac == nil || !ac.Limits.IsJSEnabled() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.enabled == nil {
		h.enabled = map[string]bool{}
	}
	if h.enabled[acc.Name()] {
		return
	}
	if err := h.js.EnableAccount(acc); err != nil {
		h.log.Error("enabling jetstream for account", "account", acc.Name(), "err", err)
		return
	}
	h.enabled[acc.Name()] = true
}

// AccountGone is told of accounts whose JWT was withdrawn.
func (h *accountHooks) AccountGone(acc *server.Account) {}
