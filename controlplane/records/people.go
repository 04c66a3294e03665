package records

import (
	"errors"
	"fmt"
	"strings"

	"github.com/contrail/contrail/controlplane/state"
)

// SignUp stores a new person and their organization, unless the email is
// taken (ErrEmailTaken). Emails compare case-insensitively.
func (r *Repo) SignUp(p *Person, o *Org) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ekey := "email/" + strings.ToLower(p.Email)
	if _, err := r.st.Get(ekey); err == nil {
		return ErrEmailTaken
	}
	b := new(state.Batch)
	b.Put(ekey, []byte(p.ID))
	b.Put(memberKey(o.ID, p.ID), []byte(p.ID))
	if err := putJSON(b, "person/"+p.ID, p); err != nil {
		return err
	}
	if err := putJSON(b, "org/"+o.ID, o); err != nil {
		return err
	}
	if err := r.st.Apply(b); err != nil {
		return fmt.Errorf("sign-up: %w", err)
	}
	return nil
}

// PersonByEmail finds a person by email.
func (r *Repo) PersonByEmail(email string) (*Person, error) {
	id, err := r.st.Get("email/" + strings.ToLower(email))
	if errors.Is(err, state.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("person by email: %w", err)
	}
	return r.Person(string(id))
}

// Person finds a person by id.
func (r *Repo) Person(id string) (*Person, error) {
	var p Person
	if err := r.get("person/"+id, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Org finds an organization by id.
func (r *Repo) Org(id string) (*Org, error) {
	var o Org
	if err := r.get("org/"+id, &o); err != nil {
		return nil, err
	}
	return &o, nil
}
