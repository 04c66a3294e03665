package provision

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
	"github.com/contrail/contrail/tenant"
)

// fakePusher is a cell transport that records every push. Down makes
// pushes fail as an unreachable cell does; during, if set, runs inside a
// push (to change the account meanwhile).
type fakePusher struct {
	mu     sync.Mutex
	down   bool
	pushes []push
	during func()
}

type push struct{ cell, pub, jwt string }

func (f *fakePusher) Push(_ context.Context, cell, pub, token string) error {
	f.mu.Lock()
	down, during := f.down, f.during
	f.during = nil
	f.mu.Unlock()
	if during != nil {
		during()
	}
	if down {
		return ErrCellUnavailable
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes = append(f.pushes, push{cell, pub, token})
	return nil
}

func (f *fakePusher) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakePusher) got() []push {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]push(nil), f.pushes...)
}

type world struct {
	repo   *records.Repo
	keys   *Keys
	prov   *Provisioner
	pusher *fakePusher
}

func newWorld(t *testing.T) *world {
	t.Helper()
	repo := records.New(state.NewMem())
	keys, err := LoadKeys(repo)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePusher{}
	return &world{repo: repo, keys: keys, pusher: f,
		prov: New(keys, repo, f, slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func (w *world) account(t *testing.T, limits tenant.Limits) *records.Account {
	t.Helper()
	a, err := w.prov.CreateAccount(NewAccount{OrgID: "org_a", Name: "orders", Cell: "c1", Limits: limits}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (w *world) record(t *testing.T, a *records.Account) *records.Account {
	t.Helper()
	r, err := w.repo.AccountRecord(a.OrgID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// claims checks token is an account JWT the operator signed and decodes it.
func (w *world) claims(t *testing.T, token, pub string) *jwt.AccountClaims {
	t.Helper()
	trust, err := tenant.NewTrust([]byte(w.keys.Operator.JWT()))
	if err != nil {
		t.Fatal(err)
	}
	ac, err := trust.VerifyAccount(token, pub, time.Now())
	if err != nil {
		t.Fatalf("account jwt: %v", err)
	}
	return ac
}

func TestLoadKeysStable(t *testing.T) {
	w := newWorld(t)
	again, err := LoadKeys(w.repo)
	if err != nil {
		t.Fatal(err)
	}
	if again.Operator.PublicKey() != w.keys.Operator.PublicKey() || again.SystemPub != w.keys.SystemPub {
		t.Fatal("keys changed on a second load from the same store")
	}
	trust, err := tenant.NewTrust([]byte(w.keys.Operator.JWT()))
	if err != nil {
		t.Fatal(err)
	}
	if trust.SystemAccount() != w.keys.SystemPub {
		t.Fatalf("operator names system account %q, want %q", trust.SystemAccount(), w.keys.SystemPub)
	}
	w.claims(t, w.keys.SystemJWT, w.keys.SystemPub)
}

func TestSignAccountLimitsAndRevocations(t *testing.T) {
	w := newWorld(t)
	limits := tenant.DefaultLimits()
	limits.MaxConnections = 7
	limits.JetStream.MaxStreams = 2
	limits.JetStream.MaxConsumers = 9
	a := w.account(t, limits)
	ac := w.claims(t, a.JWT, a.PublicKey)
	if got := tenant.LimitsOf(ac); got != limits {
		t.Fatalf("limits in the jwt = %+v, want %+v", got, limits)
	}
	if ac.Name != "orders" || ac.Issuer != w.keys.Operator.PublicKey() {
		t.Fatalf("name %q issuer %q", ac.Name, ac.Issuer)
	}
	if len(ac.Revocations) != 0 {
		t.Fatalf("new account has revocations %v", ac.Revocations)
	}

	const user = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
	revokedAt := t0.Add(time.Hour)
	b, err := w.repo.UpdateAccount(a.OrgID, a.ID, false, func(a *records.Account) error {
		a.Revocations = map[string]int64{user: revokedAt.Unix()}
		return w.prov.Change(a)
	})
	if err != nil {
		t.Fatal(err)
	}
	ac = w.claims(t, b.JWT, a.PublicKey)
	if at, ok := ac.Revocations[user]; !ok || at != revokedAt.Unix() {
		t.Fatalf("revocations = %v, want %s at %d", ac.Revocations, user, revokedAt.Unix())
	}
	if !ac.IsClaimRevoked(&jwt.UserClaims{ClaimsData: jwt.ClaimsData{Subject: user, IssuedAt: revokedAt.Unix() - 1}}) {
		t.Fatal("a user JWT issued before the revocation is not revoked")
	}
	if b.Generation != a.Generation+1 {
		t.Fatalf("generation %d after a change from %d", b.Generation, a.Generation)
	}
}

func TestSignDeletedAccountLocksEveryoneOut(t *testing.T) {
	w := newWorld(t)
	a := w.account(t, tenant.DefaultLimits())
	a.Deleted = true
	token, err := w.keys.SignAccount(a, t0)
	if err != nil {
		t.Fatal(err)
	}
	ac := w.claims(t, token, a.PublicKey)
	if ac.Limits.Conn != 0 {
		t.Fatalf("deleted account allows %d connections, want 0", ac.Limits.Conn)
	}
	if at, ok := ac.Revocations["*"]; !ok || at != t0.Unix() {
		t.Fatalf("revocations = %v, want every user (*) at %d", ac.Revocations, t0.Unix())
	}
}

func TestCreateAccountAndUser(t *testing.T) {
	w := newWorld(t)
	a := w.account(t, tenant.DefaultLimits())
	if a.Generation != 1 || a.Pushed != 0 || a.CreatedAt != t0 || a.Cell != "c1" || len(a.Seed) == 0 {
		t.Fatalf("new account = %+v", a)
	}
	if r := w.record(t, a); r.JWT != a.JWT || r.PublicKey != a.PublicKey {
		t.Fatal("the stored account differs from the one returned")
	}
	if got, err := w.repo.AccountByKey(a.PublicKey); err != nil || got.ID != a.ID {
		t.Fatalf("AccountByKey = %v, %v", got, err)
	}
	if len(w.pusher.got()) != 0 {
		t.Fatal("CreateAccount pushed; pushing is Sync's job")
	}

	exp := t0.Add(24 * time.Hour)
	perms := &tenant.Permissions{Publish: tenant.Permission{Allow: []string{"orders.>"}}}
	u, creds, err := w.prov.CreateUser(a, NewUser{Name: "alice", Permissions: perms, ExpiresAt: &exp}, t0)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := tenant.ParseCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	uc, acct, err := tenant.DecodeUser(token)
	if err != nil {
		t.Fatal(err)
	}
	if acct != a.PublicKey || uc.Subject != u.PublicKey || uc.Name != "alice" || uc.Expires != exp.Unix() {
		t.Fatalf("user jwt: account %s subject %s name %q expires %d", acct, uc.Subject, uc.Name, uc.Expires)
	}
	if len(uc.Pub.Allow) != 1 || uc.Pub.Allow[0] != "orders.>" {
		t.Fatalf("user jwt publish allow = %v", uc.Pub.Allow)
	}
	users, err := w.repo.Users(a.ID)
	if err != nil || len(users) != 1 || users[0].PublicKey != u.PublicKey || users[0].ExpiresAt == nil {
		t.Fatalf("stored users = %+v, %v", users, err)
	}
}

func TestSyncAndReconcileBookkeeping(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.account(t, tenant.DefaultLimits())

	w.pusher.setDown(true)
	if err := w.prov.Sync(ctx, a.OrgID, a.ID); !errors.Is(err, ErrCellUnavailable) {
		t.Fatalf("Sync with the cell down = %v, want ErrCellUnavailable", err)
	}
	if r := w.record(t, a); r.Pushed != 0 {
		t.Fatalf("pushed = %d after a failed push", r.Pushed)
	}
	if behind := w.prov.Reconcile(ctx); behind != 1 {
		t.Fatalf("Reconcile with the cell down: %d behind, want 1", behind)
	}
	if w.prov.stats.failed.Load() != 2 || w.prov.stats.behind.Load() != 1 {
		t.Fatalf("failed %d behind %d, want 2 and 1", w.prov.stats.failed.Load(), w.prov.stats.behind.Load())
	}

	// The cell comes back: one push of the latest JWT, then nothing.
	w.pusher.setDown(false)
	if behind := w.prov.Reconcile(ctx); behind != 0 {
		t.Fatalf("Reconcile with the cell up: %d behind", behind)
	}
	r := w.record(t, a)
	if r.Pushed != r.Generation {
		t.Fatalf("pushed %d, generation %d", r.Pushed, r.Generation)
	}
	pushes := w.pusher.got()
	if len(pushes) != 1 || pushes[0] != (push{"c1", a.PublicKey, r.JWT}) {
		t.Fatalf("pushes = %+v", pushes)
	}
	for range 3 {
		w.prov.Reconcile(ctx)
		if err := w.prov.Sync(ctx, a.OrgID, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(w.pusher.got()); n != 1 {
		t.Fatalf("%d pushes after reconciling an account in sync, want 1", n)
	}
	if w.prov.stats.pushed.Load() != 1 || w.prov.stats.behind.Load() != 0 || w.prov.stats.passes.Load() != 5 {
		t.Fatalf("stats: pushed %d behind %d passes %d", w.prov.stats.pushed.Load(), w.prov.stats.behind.Load(),
			w.prov.stats.passes.Load())
	}

	// A change is pushed once more, with the new JWT.
	b, err := w.repo.UpdateAccount(a.OrgID, a.ID, false, func(a *records.Account) error {
		a.Limits.JetStream.MaxStreams = 5
		return w.prov.Change(a)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.prov.Sync(ctx, a.OrgID, a.ID); err != nil {
		t.Fatal(err)
	}
	pushes = w.pusher.got()
	if len(pushes) != 2 || pushes[1].jwt != b.JWT || w.record(t, a).Pushed != b.Generation {
		t.Fatalf("after a change: %d pushes, pushed %d of generation %d", len(pushes), w.record(t, a).Pushed, b.Generation)
	}
}

// A change made while a push is in flight is not marked pushed: the
// next pass sends it.
func TestSyncChangeDuringPush(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.account(t, tenant.DefaultLimits())
	var changed *records.Account
	w.pusher.during = func() {
		var err error
		changed, err = w.repo.UpdateAccount(a.OrgID, a.ID, false, func(a *records.Account) error {
			a.Limits.MaxConnections = 3
			return w.prov.Change(a)
		})
		if err != nil {
			t.Error(err)
		}
	}
	if err := w.prov.Sync(ctx, a.OrgID, a.ID); err != nil {
		t.Fatal(err)
	}
	r := w.record(t, a)
	if r.Pushed != a.Generation || r.Generation != changed.Generation || r.Pushed >= r.Generation {
		t.Fatalf("pushed %d generation %d: the change made during the push must stay behind", r.Pushed, r.Generation)
	}
	if behind := w.prov.Reconcile(ctx); behind != 0 {
		t.Fatalf("%d behind", behind)
	}
	pushes := w.pusher.got()
	if len(pushes) != 2 || pushes[1].jwt != changed.JWT || w.record(t, a).Pushed != changed.Generation {
		t.Fatalf("pushes %d; the last must be the changed JWT", len(pushes))
	}
}

func TestSyncPurgesDeletedAccountOnceAcknowledged(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.account(t, tenant.DefaultLimits())
	if _, _, err := w.prov.CreateUser(a, NewUser{Name: "u"}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.repo.UpdateAccount(a.OrgID, a.ID, false, func(a *records.Account) error {
		a.Deleted = true
		return w.prov.Change(a)
	}); err != nil {
		t.Fatal(err)
	}
	w.pusher.setDown(true)
	if behind := w.prov.Reconcile(ctx); behind != 1 {
		t.Fatalf("%d behind, want the deleted account", behind)
	}
	if _, err := w.repo.AccountByKey(a.PublicKey); err != nil {
		t.Fatalf("a deleted account was purged before its cell had the disabling JWT: %v", err)
	}
	w.pusher.setDown(false)
	if behind := w.prov.Reconcile(ctx); behind != 0 {
		t.Fatalf("%d behind", behind)
	}
	pushes := w.pusher.got()
	if len(pushes) != 1 || w.claims(t, pushes[0].jwt, a.PublicKey).Limits.Conn != 0 {
		t.Fatalf("pushes = %d, want the disabling JWT once", len(pushes))
	}
	if _, err := w.repo.AccountRecord(a.OrgID, a.ID); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("record after purge: %v", err)
	}
	if _, err := w.repo.AccountByKey(a.PublicKey); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("key index after purge: %v", err)
	}
	if users, _ := w.repo.Users(a.ID); len(users) != 0 {
		t.Fatalf("users after purge: %+v", users)
	}
	if err := w.prov.Sync(ctx, a.OrgID, a.ID); err != nil {
		t.Fatalf("Sync of a purged account: %v", err)
	}
}

func TestSyncWithoutPusher(t *testing.T) {
	w := newWorld(t)
	w.prov.SetPusher(nil)
	a := w.account(t, tenant.DefaultLimits())
	if err := w.prov.Sync(context.Background(), a.OrgID, a.ID); !errors.Is(err, ErrCellUnavailable) {
		t.Fatalf("Sync without cells = %v", err)
	}
}

// Run reconciles at once, then on Kick without waiting for the interval.
func TestRunReconcilesOnKick(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.prov.Run(ctx, time.Hour)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitUntil(t, "the first pass", func() bool { return w.prov.stats.passes.Load() >= 1 })
	a := w.account(t, tenant.DefaultLimits())
	w.prov.Kick()
	// The pusher sees the push before the pass records it: wait for the
	// record, then check the push happened once.
	waitUntil(t, "the kicked pass to push", func() bool { r := w.record(t, a); return r.Pushed == r.Generation })
	if n := len(w.pusher.got()); n != 1 {
		t.Fatalf("%d pushes, want 1", n)
	}
}

// waitUntil polls cond with a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
