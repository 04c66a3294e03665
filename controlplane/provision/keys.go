// Package provision turns the control plane's records into what data-plane
// cells trust: it owns the operator and system account keys, signs account
// JWTs carrying each account's limits and revocations, pushes them to the
// account's cell over NATS as the system user, retries pushes that failed
// until every cell has converged, and asks cells for an account's usage.
package provision

import (
	"fmt"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/tenant"
)

// OperatorName is the name in the operator JWT.
const OperatorName = "contrail"

// Keys are the control plane's identity towards the data plane. The
// seeds never leave the store (and are never logged).
type Keys struct {
	Operator *tenant.Operator
	// SystemPub is the system account: data-plane nodes are started with
	// it, and the control plane's own user lives in it.
	SystemPub  string
	systemSeed []byte
	// SystemJWT is the system account's JWT, which the resolver serves.
	SystemJWT string
	// systemUser is this process's user in the system account.
	systemUser *tenant.IssuedUser
}

// LoadKeys reads the operator and system account seeds from the store,
// creating them on first start, and signs the JWTs a node needs.
func LoadKeys(repo *records.Repo) (*Keys, error) {
	opSeed, err := repo.Secret("operator", func() ([]byte, error) {
		_, seed, err := tenant.NewOperator(OperatorName)
		return seed, err
	})
	if err != nil {
		return nil, err
	}
	op, err := tenant.LoadOperator(OperatorName, opSeed)
	if err != nil {
		return nil, err
	}
	sysSeed, err := repo.Secret("system-account", func() ([]byte, error) {
		_, seed, err := tenant.NewAccountKey()
		return seed, err
	})
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed(sysSeed)
	if err != nil {
		return nil, fmt.Errorf("system account seed: %w", err)
	}
	sysPub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("system account seed: %w", err)
	}
	if err := op.SetSystemAccount(sysPub); err != nil {
		return nil, err
	}
	// Keep the operator JWT signed on first start: re-signing stamps a new
	// issue time, and the operator.jwt nodes were given would change with
	// every restart for nothing.
	opJWT, err := repo.Secret("operator-jwt", func() ([]byte, error) { return []byte(op.JWT()), nil })
	if err != nil {
		return nil, err
	}
	if err := op.Adopt(string(opJWT)); err != nil {
		return nil, fmt.Errorf("stored operator jwt: %w", err)
	}
	sysJWT, err := op.IssueAccount(tenant.AccountSpec{
		PublicKey: sysPub, Name: "SYS",
		Limits: tenant.Limits{MaxConnections: tenant.Unlimited, MaxPayload: tenant.Unlimited},
	})
	if err != nil {
		return nil, fmt.Errorf("system account jwt: %w", err)
	}
	user, err := tenant.IssueUser(sysSeed, tenant.UserSpec{Name: "contrail-controlplane"})
	if err != nil {
		return nil, fmt.Errorf("system user: %w", err)
	}
	return &Keys{Operator: op, SystemPub: sysPub, systemSeed: sysSeed, SystemJWT: sysJWT, systemUser: user}, nil
}

// disabledLimits are the limits of a deleted account: no connections.
var disabledLimits = tenant.Limits{MaxConnections: 0, MaxPayload: tenant.Unlimited}

// SignAccount signs a's JWT as of now: its limits and revocations, or,
// for a deleted account, one that refuses every connection and revokes
// every user so connected clients are cut off.
func (k *Keys) SignAccount(a *records.Account, now time.Time) (string, error) {
	spec := tenant.AccountSpec{PublicKey: a.PublicKey, Name: a.Name, Limits: a.Limits,
		Revocations: map[string]time.Time{}}
	for pub, at := range a.Revocations {
		spec.Revocations[pub] = time.Unix(at, 0)
	}
	if a.Deleted {
		spec.Limits = disabledLimits
		spec.Revocations["*"] = now
	}
	return k.Operator.IssueAccount(spec)
}
