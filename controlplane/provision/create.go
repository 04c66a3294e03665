package provision

import (
	"time"

	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/tenant"
)

// NewAccount is what a new account is made from. The caller has
// validated it.
type NewAccount struct {
	OrgID  string
	Name   string
	Cell   string
	Limits tenant.Limits
}

// CreateAccount makes an account: a fresh key pair, its JWT signed at
// generation 1, stored. It does not push; the caller calls Sync (or
// leaves it to the reconcile loop). The REST API and the dev bootstrap
// both create accounts through it.
func (p *Provisioner) CreateAccount(na NewAccount, now time.Time) (*records.Account, error) {
	pub, seed, err := tenant.NewAccountKey()
	if err != nil {
		return nil, err
	}
	a := &records.Account{ID: records.NewID("acc"), OrgID: na.OrgID, Name: na.Name, PublicKey: pub, Seed: seed,
		Cell: na.Cell, Limits: na.Limits, CreatedAt: now}
	if err := p.Change(a); err != nil {
		return nil, err
	}
	if err := p.repo.CreateAccount(a); err != nil {
		return nil, err
	}
	return a, nil
}

// NewUser is what a new NATS user is made from. The caller has validated
// it.
type NewUser struct {
	Name string
	// Permissions, if not nil, restrict the user; nil is no restriction.
	Permissions *tenant.Permissions
	// ExpiresAt, if not nil, is when the user's JWT stops working.
	ExpiresAt *time.Time
}

// CreateUser issues a user of account a, signed with the account's seed,
// and stores its record. The creds file returned (it holds the user's
// seed) is the only copy: it is never stored. Users need no push: the
// account JWT does not list them. The REST API and the dev bootstrap both
// create users through it.
func (p *Provisioner) CreateUser(a *records.Account, nu NewUser, now time.Time) (*records.NatsUser, []byte, error) {
	spec := tenant.UserSpec{Name: nu.Name}
	if nu.Permissions != nil {
		spec.Permissions = *nu.Permissions
	}
	if nu.ExpiresAt != nil {
		spec.Expires = *nu.ExpiresAt
	}
	issued, err := tenant.IssueUser(a.Seed, spec)
	if err != nil {
		return nil, nil, err
	}
	u := &records.NatsUser{ID: records.NewID("nu"), AccountID: a.ID, Name: nu.Name, PublicKey: issued.PublicKey,
		Permissions: nu.Permissions, ExpiresAt: nu.ExpiresAt, CreatedAt: now}
	if err := p.repo.PutUser(u); err != nil {
		return nil, nil, err
	}
	return u, issued.Creds, nil
}
