package records

import (
	"fmt"
	"sort"

	"github.com/contrail/contrail/controlplane/state"
)

// An organization's members are indexed under member/<org>/<person>, so
// listing them reads only that organization's people.
//
// Invariant: every person has exactly one member key, written in the
// sign-up batch that stores the person.

func memberKey(orgID, personID string) string { return "member/" + orgID + "/" + personID }

// Members lists an organization's people, oldest first.
func (r *Repo) Members(orgID string) ([]Person, error) {
	kvs, err := r.st.Scan("member/"+orgID+"/", 0)
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", orgID, err)
	}
	out := make([]Person, 0, len(kvs))
	for _, kv := range kvs {
		p, err := r.Person(string(kv.Value))
		if err != nil {
			return nil, fmt.Errorf("member %s of %s: %w", kv.Value, orgID, err)
		}
		out = append(out, *p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// IndexMembers builds the member index of people stored before it
// existed. It runs once (a flag records it) and is a no-op on a store
// that started with it.
func (r *Repo) IndexMembers() error {
	const flag = "member-index"
	if done, err := r.Flag(flag); err != nil || done {
		return err
	}
	people, err := scan[Person](r, "person/")
	if err != nil {
		return err
	}
	b := new(state.Batch)
	for _, p := range people {
		b.Put(memberKey(p.OrgID, p.ID), []byte(p.ID))
	}
	b.Put("flag/"+flag, []byte{1})
	if err := r.st.Apply(b); err != nil {
		return fmt.Errorf("indexing members: %w", err)
	}
	return nil
}
