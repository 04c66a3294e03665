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

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/jetstream"
	jsapi "github.com/contrail/contrail/dataplane/jetstream/api"
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
	ropts, allowDelete, err := resolverOptions(opts, dataDir)
	if err != nil {
		return nil, err
	}
	ropts.Log = log.With("component", "resolver")
	res, err := resolver.New(ropts)
	if err != nil {
		return nil, err
	}
	sys := opts.SystemAccount
	if sys == "" {
		sys = trust.SystemAccount()
	}
	mode := server.OperatorMode{Trust: trust, Resolver: res, SystemAccount: sys, AllowDelete: allowDelete}
	if err := srv.SetOperatorMode(mode); err != nil {
		return nil, err
	}
	url := ropts.URL
	log.Info("operator mode", "operator", trust.OperatorKey(), "name", trust.Operator().Name,
		"system_account", sys, "resolver", url)
	return res, nil
}

// resolverOptions reads the resolver the config asks for. A full
// directory resolver keeps JWTs in its dir and learns them from claim
// updates alone, deleting only with allow_delete; a URL or memory
// resolver keeps what it sees under <data-dir>/accounts and serves
// operator-signed deletes.
func resolverOptions(opts *config.Options, dataDir string) (ro resolver.Options, allowDelete bool, err error) {
	ro.Preload = opts.ResolverPreload
	if d := opts.DirResolver; d != nil {
		if opts.Resolver != "" {
			return ro, false, fmt.Errorf("resolver %q and a resolver block: give one", opts.Resolver)
		}
		ro.Dir, ro.Limit, ro.HardDelete, ro.Timeout = d.Dir, int(d.Limit), d.HardDelete, d.Timeout
		return ro, d.AllowDelete, nil
	}
	if ro.URL, err = resolverURL(opts.Resolver); err != nil {
		return ro, false, err
	}
	ro.Dir = filepath.Join(dataDir, "accounts")
	return ro, true, nil
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

// accountHooks keeps each account's JetStream in step with its JWT: the
// API answers in every account (10039 where the JWT grants no JetStream),
// and the limits follow each claim update.
type accountHooks struct {
	js  *jetstream.Engine
	log *slog.Logger
	// spread, on a cluster, has the other nodes load each account this
	// one registers; nil on a single node.
	spread *accountSpread

	mu         sync.Mutex
	registered map[string]bool // guarded by mu
}

// AccountReady registers the account with JetStream, or updates its
// limits.
func (h *accountHooks) AccountReady(acc *server.Account) {
	ac := acc.Claims()
	if ac == nil {
		return
	}
	lim := accountJSLimits(ac)
	h.mu.Lock()
	if h.registered == nil {
		h.registered = map[string]bool{}
	}
	var err error
	fresh := false
	if h.registered[acc.Name()] {
		err = h.js.UpdateAccount(acc.Name(), lim)
	} else if err = h.js.RegisterAccount(acc, lim); err == nil {
		h.registered[acc.Name()] = true
		fresh = true
	}
	h.mu.Unlock()
	if err != nil {
		h.log.Error("jetstream limits for account", "account", acc.Name(), "err", err)
	}
	if fresh && h.spread != nil {
		// Registered here first, then spread: a peer asking back finds
		// it registered and answers at once.
		h.spread.spread(acc.Name())
	}
}

// isRegistered reports whether the account is registered with JetStream.
func (h *accountHooks) isRegistered(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registered[name]
}

// AccountGone stops JetStream in a deleted or expired account; its data
// stays, and the account comes back if its JWT does.
func (h *accountHooks) AccountGone(acc *server.Account) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.registered[acc.Name()] {
		h.js.RemoveAccount(acc.Name())
		delete(h.registered, acc.Name())
	}
}

// accountJSLimits reads an account JWT's JetStream limits: tiered when the JWT
// has tiers, else one untiered set. The values pass through as the JWT
// has them (0 in the per-stream and ack limits means none), so account
// info reports what the operator wrote.
func accountJSLimits(ac *jwt.AccountClaims) *jetstream.AccountLimits {
	conv := func(l jwt.JetStreamLimits) jsapi.AccountLimits {
		return jsapi.AccountLimits{
			MaxMemory: l.MemoryStorage, MaxStore: l.DiskStorage,
			MaxStreams: int(l.Streams), MaxConsumers: int(l.Consumer), MaxAckPending: int(l.MaxAckPending),
			MemoryMaxStreamBytes: l.MemoryMaxStreamBytes, StoreMaxStreamBytes: l.DiskMaxStreamBytes,
			MaxBytesRequired: l.MaxBytesRequired,
		}
	}
	lim := &jetstream.AccountLimits{Tiers: map[string]jsapi.AccountLimits{}}
	if tiers := ac.Limits.JetStreamTieredLimits; len(tiers) > 0 {
		for name, l := range tiers {
			lim.Tiers[name] = conv(l)
		}
		return lim
	}
	lim.Tiers[""] = conv(ac.Limits.JetStreamLimits)
	return lim
}
