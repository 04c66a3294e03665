package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/tenant"
)

// Files `contrail dev` writes on first start.
const (
	DevCredsFile = "dev.creds"
	DevTokenFile = "dev.token"
)

// DevOrg is what EnsureDevOrg made or found.
type DevOrg struct {
	CredsPath string // a creds file for the dev account's first user
	TokenPath string // an API token of the dev organization
}

// EnsureDevOrg creates, on first start only, a "dev" organization with one
// account and one user, and writes the user's creds file and an API token
// for the organization into the data dir, so a local run is usable at
// once. Later starts find the files and change nothing.
func (cp *ControlPlane) EnsureDevOrg(ctx context.Context) (*DevOrg, error) {
	d := &DevOrg{
		CredsPath: filepath.Join(cp.opts.DataDir, DevCredsFile),
		TokenPath: filepath.Join(cp.opts.DataDir, DevTokenFile),
	}
	done, err := cp.Repo.Flag("dev-org")
	if err != nil || done {
		return d, err
	}
	if err := cp.createDevOrg(ctx, d); err != nil {
		return nil, err
	}
	return d, cp.Repo.SetFlag("dev-org")
}

func (cp *ControlPlane) createDevOrg(ctx context.Context, d *DevOrg) error {
	now := time.Now().UTC().Truncate(time.Second)
	o := &records.Org{ID: records.NewID("org"), Name: "dev", CreatedAt: now}
	// The dev person cannot log in (no password matches "!"); the API
	// token is how to act for the dev organization.
	p := &records.Person{ID: records.NewID("usr"), Email: "dev@contrail.localhost", PasswordHash: "!", OrgID: o.ID, CreatedAt: now}
	switch err := cp.Repo.SignUp(p, o); {
	case errors.Is(err, records.ErrEmailTaken):
		// A first start that stopped part-way: carry on with what it made.
		if p, err = cp.Repo.PersonByEmail(p.Email); err != nil {
			return fmt.Errorf("dev organization: %w", err)
		}
		if o, err = cp.Repo.Org(p.OrgID); err != nil {
			return fmt.Errorf("dev organization: %w", err)
		}
	case err != nil:
		return fmt.Errorf("dev organization: %w", err)
	}
	a, err := cp.devAccount(o.ID, now)
	if err != nil {
		return err
	}
	// The cell may not be connected yet; the reconcile loop catches up,
	// and a node fetches the account from the resolver on first connect.
	if err := cp.Prov.Sync(ctx, o.ID, a.ID); err != nil {
		cp.log.Debug("dev account: first push deferred", "err", err)
	}
	_, creds, err := cp.Prov.CreateUser(a, provision.NewUser{Name: "dev"}, now)
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.CredsPath, creds, 0o600); err != nil {
		return fmt.Errorf("writing dev creds: %w", err)
	}
	token, _, err := cp.api.IssueToken(records.KindAPI, "dev", p, auth.MaxAPITTL)
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.TokenPath, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing dev token: %w", err)
	}
	cp.log.Info("created the dev organization", "account", a.ID, "public_key", a.PublicKey)
	return nil
}

// devAccount finds the dev organization's account, or creates it.
func (cp *ControlPlane) devAccount(orgID string, now time.Time) (*records.Account, error) {
	accts, err := cp.Repo.Accounts(orgID)
	if err != nil {
		return nil, fmt.Errorf("dev account: %w", err)
	}
	for i := range accts {
		if accts[i].Name == "dev" {
			return &accts[i], nil
		}
	}
	return cp.Prov.CreateAccount(provision.NewAccount{OrgID: orgID, Name: "dev", Cell: cp.opts.Cells[0].Name,
		Limits: tenant.DefaultLimits()}, now)
}
