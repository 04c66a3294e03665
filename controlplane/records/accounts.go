package records

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contrail/contrail/controlplane/state"
)

func acctKey(orgID, id string) string { return "acct/" + orgID + "/" + id }

// Accounts lists an organization's accounts, deleted ones left out.
func (r *Repo) Accounts(orgID string) ([]Account, error) {
	all, err := scan[Account](r, "acct/"+orgID+"/")
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, a := range all {
		if !a.Deleted {
			out = append(out, a)
		}
	}
	return out, nil
}

// AllAccounts lists every account record, deleted ones included (the
// reconcile loop still has to push those).
func (r *Repo) AllAccounts() ([]Account, error) { return scan[Account](r, "acct/") }

// Account finds an organization's account; a deleted one or another
// organization's is ErrNotFound.
func (r *Repo) Account(orgID, id string) (*Account, error) {
	var a Account
	if err := r.get(acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	if a.Deleted {
		return nil, ErrNotFound
	}
	return &a, nil
}

// AccountByKey finds an account (deleted or not) by its public key.
func (r *Repo) AccountByKey(pub string) (*Account, error) {
	ref, err := r.st.Get("acctkey/" + pub)
	if errors.Is(err, state.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	orgID, id, _ := strings.Cut(string(ref), "/")
	var a Account
	if err := r.get(acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// CreateAccount stores a new account.
func (r *Repo) CreateAccount(a *Account) error {
	b := new(state.Batch)
	if err := putJSON(b, acctKey(a.OrgID, a.ID), a); err != nil {
		return err
	}
	b.Put("acctkey/"+a.PublicKey, []byte(a.OrgID+"/"+a.ID))
	if err := r.st.Apply(b); err != nil {
		return fmt.Errorf("creating account: %w", err)
	}
	return nil
}

// UpdateAccount reads the account, lets change modify it, and writes it
// back, all under the repo lock so concurrent changes do not lose each
// other's writes. change returning an error leaves the record as it was.
// Deleted accounts can be updated only with includeDeleted.
func (r *Repo) UpdateAccount(orgID, id string, includeDeleted bool, change func(*Account) error) (*Account, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var a Account
	if err := r.get(acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	if a.Deleted && !includeDeleted {
		return nil, ErrNotFound
	}
	if err := change(&a); err != nil {
		return nil, err
	}
	b := new(state.Batch)
	if err := putJSON(b, acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	if err := r.st.Apply(b); err != nil {
		return nil, fmt.Errorf("updating account: %w", err)
	}
	return &a, nil
}

// UpdateAccountAndDeleteUser applies change to the account and removes a
// user record in the same batch, so a revocation and the user's removal
// happen together.
func (r *Repo) UpdateAccountAndDeleteUser(orgID, id, userID string, change func(*Account, *NatsUser) error) (*Account, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var a Account
	if err := r.get(acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	if a.Deleted {
		return nil, ErrNotFound
	}
	var u NatsUser
	if err := r.get(userKey(id, userID), &u); err != nil {
		return nil, err
	}
	if err := change(&a, &u); err != nil {
		return nil, err
	}
	b := new(state.Batch)
	if err := putJSON(b, acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	b.Delete(userKey(id, userID))
	if err := r.st.Apply(b); err != nil {
		return nil, fmt.Errorf("deleting user: %w", err)
	}
	return &a, nil
}

// PurgeAccount removes a deleted account, its key index and its users,
// once its cell has the disabling JWT, and leaves a Tombstone in their
// place (in the same batch). It does nothing if the account changed
// since generation gen.
func (r *Repo) PurgeAccount(orgID, id string, gen uint64, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var a Account
	if err := r.get(acctKey(orgID, id), &a); err != nil {
		return err
	}
	if !a.Deleted || a.Generation != gen {
		return nil
	}
	b := new(state.Batch).Delete(acctKey(orgID, id)).Delete("acctkey/" + a.PublicKey)
	users, err := r.st.Scan("natsuser/"+id+"/", 0)
	if err != nil {
		return err
	}
	for _, u := range users {
		b.Delete(u.Key)
	}
	ts := &Tombstone{PublicKey: a.PublicKey, AccountID: a.ID, OrgID: a.OrgID, Cell: a.Cell, JWT: a.JWT,
		DeletedAt: now.UTC()}
	if err := putJSON(b, tombKey(a.Cell, a.PublicKey), ts); err != nil {
		return err
	}
	return r.st.Apply(b)
}

// Tombstone is what stays of a deleted account once its cell
// acknowledged the delete: enough to answer the resolver 404 and to push
// the disabling JWT again to a cell that lost it (a power cut after the
// acknowledgement). Tombstones are kept for good; they are small.
type Tombstone struct {
	PublicKey string    `json:"public_key"`
	AccountID string    `json:"account_id"`
	OrgID     string    `json:"org_id"`
	Cell      string    `json:"cell"`
	JWT       string    `json:"jwt"` // the disabling JWT
	DeletedAt time.Time `json:"deleted_at"`
}

func tombKey(cell, pub string) string { return "tomb/" + cell + "/" + pub }

// Tombstones lists the deleted accounts of a cell.
func (r *Repo) Tombstones(cell string) ([]Tombstone, error) {
	return scan[Tombstone](r, "tomb/"+cell+"/")
}

func userKey(accountID, id string) string { return "natsuser/" + accountID + "/" + id }

// PutUser stores a NATS user.
func (r *Repo) PutUser(u *NatsUser) error {
	b := new(state.Batch)
	if err := putJSON(b, userKey(u.AccountID, u.ID), u); err != nil {
		return err
	}
	return r.st.Apply(b)
}

// Users lists an account's users. The caller checks the account belongs
// to the organization first.
func (r *Repo) Users(accountID string) ([]NatsUser, error) {
	return scan[NatsUser](r, "natsuser/"+accountID+"/")
}

// AccountRecord finds an account record even if it is marked deleted
// (provisioning still has to push it).
func (r *Repo) AccountRecord(orgID, id string) (*Account, error) {
	var a Account
	if err := r.get(acctKey(orgID, id), &a); err != nil {
		return nil, err
	}
	return &a, nil
}
