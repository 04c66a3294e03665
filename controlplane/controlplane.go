// Package controlplane assembles the control plane: its store, keys,
// provisioning, cells and the HTTP API, served on one listener. The parts
// live in sub-packages (state, records, auth, provision, api); this one
// only wires them and writes the files a data-plane node is started with.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/contrail/contrail/controlplane/api"
	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
	"github.com/contrail/contrail/controlplane/usage"
	"github.com/contrail/contrail/openapi"
)

// Files the control plane writes into its data dir for data-plane nodes.
const (
	OperatorFile      = "operator.jwt"
	SystemAccountFile = "system_account.pub"
	storeDir          = "controlplane"
)

// Options configure a control plane.
type Options struct {
	// HTTPAddr is where the API and resolver listen (host:port).
	HTTPAddr string
	// DataDir holds the store and the files nodes need.
	DataDir string
	// Cells are the data-plane clusters; the first is where new accounts go.
	Cells []provision.Cell
	// ReconcileInterval is how often pushes that failed are retried.
	ReconcileInterval time.Duration
	// UsageInterval is how often each account's usage is sampled for
	// its charts; usage.DefaultInterval if 0. A day of samples is kept
	// at the default interval (usage.DefaultCapacity samples).
	UsageInterval time.Duration
	// TrustedProxies are CIDRs of reverse proxies whose X-Forwarded-For
	// gives the client address that logins and sign-ups are throttled
	// by. Empty: the connection's address, headers ignored.
	TrustedProxies []string
	Log            *slog.Logger
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	opts  Options
	log   *slog.Logger
	store state.Store
	Repo  *records.Repo
	Keys  *provision.Keys
	Prov  *provision.Provisioner
	cells *provision.Cells
	api   *api.Server
	usage *usage.Sampler
	ln    net.Listener
}

// Open opens the store (creating keys on first start), writes the
// operator JWT and system account key into the data dir, binds the HTTP
// listener and starts connecting to the cells. Serve then runs it.
func Open(opts Options) (cp *ControlPlane, err error) {
	if len(opts.Cells) == 0 {
		return nil, errors.New("control plane: no cells configured")
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = 2 * time.Second
	}
	log := opts.Log
	var proxies []*net.IPNet
	for _, cidr := range opts.TrustedProxies {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", cidr, err)
		}
		proxies = append(proxies, n)
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := state.OpenPebble(filepath.Join(opts.DataDir, storeDir), state.PrivateFS(), log)
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{opts: opts, log: log, store: st, Repo: records.New(st)}
	defer func() {
		if err != nil {
			cp.close()
		}
	}()
	if cp.Keys, err = provision.LoadKeys(cp.Repo); err != nil {
		return nil, err
	}
	if err := cp.Repo.IndexTokens(); err != nil {
		return nil, err
	}
	if err := cp.Repo.IndexMembers(); err != nil {
		return nil, err
	}
	if err := cp.writeNodeFiles(); err != nil {
		return nil, err
	}
	signingKey, err := cp.Repo.Secret("token-signing-key", auth.NewSigningKey)
	if err != nil {
		return nil, err
	}
	signer, err := auth.NewSigner(signingKey)
	if err != nil {
		return nil, err
	}
	cp.Prov = provision.New(cp.Keys, cp.Repo, nil, log.With("component", "provision"))
	if cp.ln, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
		return nil, fmt.Errorf("--http-addr: %w", err)
	}
	urls := map[string]string{}
	for _, c := range opts.Cells {
		urls[c.Name] = c.NatsURL
	}
	cp.cells, err = provision.Dial(opts.Cells, cp.Keys, cp.Prov.CellConnected, log.With("component", "cells"))
	if err != nil {
		return nil, err
	}
	cp.Prov.SetPusher(cp.cells)
	if opts.UsageInterval <= 0 {
		opts.UsageInterval = usage.DefaultInterval
		cp.opts.UsageInterval = opts.UsageInterval
	}
	cp.usage, err = usage.New(usage.Config{Store: st, Accounts: cp.Repo, Cells: cp.cells,
		Log: log.With("component", "usage")})
	if err != nil {
		return nil, err
	}
	cp.api = api.New(api.Config{
		Usage: cp.usage, UsageInterval: opts.UsageInterval,
		Repo: cp.Repo, Signer: signer, Prov: cp.Prov, Keys: cp.Keys, Cells: cp.cells, Streams: cp.cells,
		DefaultCell: opts.Cells[0].Name, NatsURLs: urls, Spec: openapi.Spec,
		TrustedProxies: proxies, Ready: cp.cells.Connected, Log: log.With("component", "api"), Collectors: cp.Prov.Collectors(),
	})
	return cp, nil
}

// writeNodeFiles writes the operator JWT and the system account's public
// key, which `contrail dataplane --operator … --system-account …` reads.
func (cp *ControlPlane) writeNodeFiles() error {
	for name, content := range map[string]string{
		OperatorFile:      cp.Keys.Operator.JWT() + "\n",
		SystemAccountFile: cp.Keys.SystemPub + "\n",
	} {
		if err := os.WriteFile(filepath.Join(cp.opts.DataDir, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// Addr is the address the HTTP listener is bound to.
func (cp *ControlPlane) Addr() string { return cp.ln.Addr().String() }

// OperatorPath is the operator JWT file in the data dir.
func (cp *ControlPlane) OperatorPath() string { return filepath.Join(cp.opts.DataDir, OperatorFile) }

// ResolverURL is the account resolver's base URL.
func (cp *ControlPlane) ResolverURL() string { return "http://" + cp.Addr() + "/jwt/v1/accounts/" }

// Serve runs the HTTP API and the reconcile loop until ctx ends, then
// shuts down gracefully and closes the store.
func (cp *ControlPlane) Serve(ctx context.Context) error {
	defer cp.close()
	srv := &http.Server{Handler: cp.api, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(cp.ln) }()
	rctx, stopReconcile := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cp.Prov.Run(rctx, cp.opts.ReconcileInterval)
	}()
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		cp.pruneTokens(rctx, tokenPruneInterval, time.Now)
	}()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		cp.usage.Run(rctx, cp.opts.UsageInterval)
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stopReconcile()
	<-done
	<-pruned
	<-sampled
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// tokenPruneInterval is how often expired tokens are swept. Each new
// token also sweeps a few, so this only matters when nobody logs in.
const tokenPruneInterval = time.Minute

// pruneTokens removes expired tokens every interval until ctx ends, in
// bounded batches so one sweep never holds a large write.
func (cp *ControlPlane) pruneTokens(ctx context.Context, interval time.Duration, now func() time.Time) {
	const batch = 1000
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := cp.Repo.PruneTokens(now(), batch)
			if err != nil {
				cp.log.Error("pruning expired tokens", "err", err)
			}
			if n > 0 {
				cp.log.Debug("pruned expired tokens", "count", n)
			}
			if err != nil || n < batch {
				break
			}
		}
	}
}

func (cp *ControlPlane) close() {
	if cp.cells != nil {
		cp.cells.Close()
	}
	if cp.ln != nil {
		cp.ln.Close()
	}
	if cp.store != nil {
		if err := cp.store.Close(); err != nil {
			cp.log.Error("closing store", "err", err)
		}
		cp.store = nil
	}
}

// WaitCells waits until the control plane is connected to every cell.
func (cp *ControlPlane) WaitCells(ctx context.Context) error { return cp.cells.WaitConnected(ctx) }
