package records

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contrail/contrail/controlplane/state"
	"github.com/contrail/contrail/tenant"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newRepo(t *testing.T) *Repo {
	t.Helper()
	return New(state.NewMem())
}

func signUp(t *testing.T, r *Repo, email string) (*Person, *Org) {
	t.Helper()
	o := &Org{ID: NewID("org"), Name: "O " + email, CreatedAt: t0}
	p := &Person{ID: NewID("usr"), Email: email, PasswordHash: "h", OrgID: o.ID, CreatedAt: t0}
	if err := r.SignUp(p, o); err != nil {
		t.Fatal(err)
	}
	return p, o
}

func account(t *testing.T, r *Repo, orgID, pub string) *Account {
	t.Helper()
	a := &Account{ID: NewID("acc"), OrgID: orgID, Name: "a", PublicKey: pub, Cell: "c1",
		Limits: tenant.DefaultLimits(), CreatedAt: t0, JWT: "jwt1", Generation: 1}
	if err := r.CreateAccount(a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewID(t *testing.T) {
	a, b := NewID("acc"), NewID("acc")
	if a == b || !strings.HasPrefix(a, "acc_") || len(a) != len("acc_")+16 || strings.ToLower(a) != a {
		t.Fatalf("ids %q %q", a, b)
	}
}

func TestPeopleAndOrgs(t *testing.T) {
	r := newRepo(t)
	p, o := signUp(t, r, "Ann@Example.com")
	got, err := r.PersonByEmail("ann@example.COM")
	if err != nil || got.ID != p.ID || got.Email != "Ann@Example.com" || got.OrgID != o.ID {
		t.Fatalf("PersonByEmail = %+v, %v", got, err)
	}
	if org, err := r.Org(o.ID); err != nil || org.Name != o.Name {
		t.Fatalf("Org = %+v, %v", org, err)
	}
	dup := &Person{ID: NewID("usr"), Email: "ANN@example.com"}
	if err := r.SignUp(dup, &Org{ID: NewID("org")}); !errors.Is(err, ErrEmailTaken) {
		t.Fatalf("second sign-up with the same email (other case) = %v", err)
	}
	if _, err := r.Person(dup.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused sign-up stored its person: %v", err)
	}
	if _, err := r.PersonByEmail("nobody@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown email: %v", err)
	}
	if _, err := r.Org("org_missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown org: %v", err)
	}
}

func TestTokens(t *testing.T) {
	r := newRepo(t)
	ann, _ := signUp(t, r, "ann@example.com")
	bob, _ := signUp(t, r, "bob@example.com")
	put := func(p *Person, kind, name string) *Token {
		tok := &Token{ID: NewID("tok"), Kind: kind, Name: name, PersonID: p.ID, OrgID: p.OrgID, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		if err := r.PutToken(tok, t0); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ci := put(ann, KindAPI, "ci")
	put(ann, KindSession, "session")
	bobs := put(bob, KindAPI, "bob's")

	got, err := r.Token(ci.ID)
	if err != nil || *got != *ci {
		t.Fatalf("Token = %+v, %v", got, err)
	}
	list, err := r.Tokens(ann.ID, KindAPI)
	if err != nil || len(list) != 1 || list[0].ID != ci.ID {
		t.Fatalf("ann's API tokens = %+v, %v", list, err)
	}
	if err := r.DeleteToken(ann.ID, bobs.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting another person's token = %v, want ErrNotFound", err)
	}
	if _, err := r.Token(bobs.ID); err != nil {
		t.Fatalf("bob's token is gone after ann tried to delete it: %v", err)
	}
	if err := r.DeleteToken(ann.ID, ci.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Token(ci.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted token: %v", err)
	}
	if err := r.DeleteToken(ann.ID, ci.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
}

func TestAccountsAreScopedByOrg(t *testing.T) {
	r := newRepo(t)
	_, acme := signUp(t, r, "a@example.com")
	_, other := signUp(t, r, "b@example.com")
	a := account(t, r, acme.ID, "APUB1")
	b := account(t, r, other.ID, "APUB2")

	if got, err := r.Account(acme.ID, a.ID); err != nil || got.PublicKey != "APUB1" || got.Limits != tenant.DefaultLimits() {
		t.Fatalf("Account = %+v, %v", got, err)
	}
	if _, err := r.Account(other.ID, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another org's account = %v, want ErrNotFound", err)
	}
	if _, err := r.UpdateAccount(other.ID, a.ID, true, func(*Account) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("updating another org's account = %v", err)
	}
	if err := r.PurgeAccount(other.ID, a.ID, 1, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("purging another org's account = %v", err)
	}
	list, err := r.Accounts(acme.ID)
	if err != nil || len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("Accounts(acme) = %+v, %v", list, err)
	}
	all, err := r.AllAccounts()
	if err != nil || len(all) != 2 {
		t.Fatalf("AllAccounts = %d, %v", len(all), err)
	}
	if got, err := r.AccountByKey("APUB2"); err != nil || got.ID != b.ID {
		t.Fatalf("AccountByKey = %+v, %v", got, err)
	}
	if _, err := r.AccountByKey("APUB9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestUpdateAccount(t *testing.T) {
	r := newRepo(t)
	a := account(t, r, "org_a", "APUB1")
	got, err := r.UpdateAccount("org_a", a.ID, false, func(a *Account) error {
		a.Name, a.Generation = "renamed", 2
		return nil
	})
	if err != nil || got.Name != "renamed" {
		t.Fatalf("UpdateAccount = %+v, %v", got, err)
	}
	boom := errors.New("boom")
	if _, err := r.UpdateAccount("org_a", a.ID, false, func(a *Account) error {
		a.Name = "half"
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("a failing change = %v", err)
	}
	if cur, _ := r.Account("org_a", a.ID); cur.Name != "renamed" || cur.Generation != 2 {
		t.Fatalf("a failing change was written: %+v", cur)
	}

	// A deleted account is hidden from the API's reads but not from
	// provisioning's.
	if _, err := r.UpdateAccount("org_a", a.ID, false, func(a *Account) error { a.Deleted = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Account("org_a", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted account = %v", err)
	}
	if list, _ := r.Accounts("org_a"); len(list) != 0 {
		t.Fatalf("deleted account listed: %+v", list)
	}
	if _, err := r.UpdateAccount("org_a", a.ID, false, func(*Account) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("updating a deleted account without includeDeleted = %v", err)
	}
	if rec, err := r.AccountRecord("org_a", a.ID); err != nil || !rec.Deleted {
		t.Fatalf("AccountRecord = %+v, %v", rec, err)
	}
	if all, _ := r.AllAccounts(); len(all) != 1 {
		t.Fatal("AllAccounts must include deleted accounts")
	}
	if _, err := r.UpdateAccount("org_a", a.ID, true, func(a *Account) error { a.Pushed = 2; return nil }); err != nil {
		t.Fatalf("updating a deleted account with includeDeleted: %v", err)
	}
}

func TestUsersAndRevocation(t *testing.T) {
	r := newRepo(t)
	a := account(t, r, "org_a", "APUB1")
	b := account(t, r, "org_b", "APUB2")
	u := &NatsUser{ID: NewID("nu"), AccountID: a.ID, Name: "alice", PublicKey: "UPUB1", CreatedAt: t0}
	if err := r.PutUser(u); err != nil {
		t.Fatal(err)
	}
	if err := r.PutUser(&NatsUser{ID: NewID("nu"), AccountID: b.ID, Name: "bob", PublicKey: "UPUB2"}); err != nil {
		t.Fatal(err)
	}
	users, err := r.Users(a.ID)
	if err != nil || len(users) != 1 || users[0].Name != "alice" {
		t.Fatalf("Users = %+v, %v", users, err)
	}
	revoke := func(a *Account, u *NatsUser) error {
		a.Revocations = map[string]int64{u.PublicKey: 42}
		return nil
	}
	if _, err := r.UpdateAccountAndDeleteUser("org_b", a.ID, u.ID, revoke); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking through another org = %v", err)
	}
	if _, err := r.UpdateAccountAndDeleteUser("org_b", b.ID, u.ID, revoke); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking another account's user = %v", err)
	}
	got, err := r.UpdateAccountAndDeleteUser("org_a", a.ID, u.ID, revoke)
	if err != nil || got.Revocations["UPUB1"] != 42 {
		t.Fatalf("UpdateAccountAndDeleteUser = %+v, %v", got, err)
	}
	if users, _ := r.Users(a.ID); len(users) != 0 {
		t.Fatalf("revoked user still stored: %+v", users)
	}
	if cur, _ := r.Account("org_a", a.ID); cur.Revocations["UPUB1"] != 42 {
		t.Fatal("the revocation was not stored with the user's removal")
	}
}

func TestPurgeAccount(t *testing.T) {
	r := newRepo(t)
	a := account(t, r, "org_a", "APUB1")
	if err := r.PutUser(&NatsUser{ID: NewID("nu"), AccountID: a.ID, Name: "u", PublicKey: "UPUB"}); err != nil {
		t.Fatal(err)
	}
	if err := r.PurgeAccount("org_a", a.ID, 1, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Account("org_a", a.ID); err != nil {
		t.Fatal("PurgeAccount removed an account that is not deleted")
	}
	if _, err := r.UpdateAccount("org_a", a.ID, false, func(a *Account) error { a.Deleted, a.Generation = true, 2; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := r.PurgeAccount("org_a", a.ID, 1, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AccountRecord("org_a", a.ID); err != nil {
		t.Fatal("PurgeAccount with a stale generation removed the account")
	}
	if err := r.PurgeAccount("org_a", a.ID, 2, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AccountRecord("org_a", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after purge: %v", err)
	}
	if _, err := r.AccountByKey("APUB1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("key index after purge: %v", err)
	}
	if users, _ := r.Users(a.ID); len(users) != 0 {
		t.Fatalf("users after purge: %+v", users)
	}
	ts, err := r.Tombstones("c1")
	if err != nil || len(ts) != 1 || ts[0].PublicKey != "APUB1" || ts[0].JWT != a.JWT || ts[0].AccountID != a.ID {
		t.Fatalf("tombstones after purge: %+v, %v", ts, err)
	}
	if ts, _ := r.Tombstones("c2"); len(ts) != 0 {
		t.Fatalf("another cell's tombstones: %+v", ts)
	}
}

func TestSecretsAndFlags(t *testing.T) {
	r := newRepo(t)
	calls := 0
	create := func() ([]byte, error) { calls++; return []byte("seed"), nil }
	for range 2 {
		v, err := r.Secret("op", create)
		if err != nil || string(v) != "seed" {
			t.Fatalf("Secret = %q, %v", v, err)
		}
	}
	if calls != 1 {
		t.Fatalf("create called %d times, want once", calls)
	}
	boom := errors.New("boom")
	if _, err := r.Secret("other", func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failing create = %v", err)
	}
	if done, err := r.Flag("dev-org"); done || err != nil {
		t.Fatalf("Flag before SetFlag = %v, %v", done, err)
	}
	if err := r.SetFlag("dev-org"); err != nil {
		t.Fatal(err)
	}
	if done, err := r.Flag("dev-org"); !done || err != nil {
		t.Fatalf("Flag after SetFlag = %v, %v", done, err)
	}
}

// Every operation on a closed store fails rather than pretending.
func TestClosedStore(t *testing.T) {
	st := state.NewMem()
	r := New(st)
	st.Close()
	if _, err := r.Accounts("org"); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Accounts on a closed store = %v", err)
	}
	if err := r.PutUser(&NatsUser{ID: "nu_x", AccountID: "acc_x"}); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("PutUser on a closed store = %v", err)
	}
	if _, err := r.Account("org", "acc"); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Account on a closed store = %v", err)
	}
}
