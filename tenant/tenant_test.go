package tenant

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// world is an operator with one account, issued through this package.
type world struct {
	op      *Operator
	trust   *Trust
	accPub  string
	accSeed []byte
	accJWT  string
}

func newWorld(t testing.TB, lim Limits) *world {
	t.Helper()
	op, seed, err := NewOperator("test")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := LoadOperator("test", seed); err != nil || again.PublicKey() != op.PublicKey() {
		t.Fatalf("reloading the operator from its seed: %v", err)
	}
	trust, err := NewTrust([]byte(op.JWT()))
	if err != nil {
		t.Fatal(err)
	}
	pub, aseed, err := NewAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	token, err := op.IssueAccount(AccountSpec{PublicKey: pub, Name: "A", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return &world{op: op, trust: trust, accPub: pub, accSeed: aseed, accJWT: token}
}

// connectAs runs what a node runs at CONNECT for the creds.
func (w *world) connectAs(t testing.TB, creds []byte, now time.Time) error {
	t.Helper()
	token, kp, err := ParseCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	ac, err := w.trust.VerifyAccount(w.accJWT, w.accPub, now)
	if err != nil {
		return err
	}
	uc, acct, err := DecodeUser(token)
	if err != nil {
		return err
	}
	if acct != w.accPub {
		t.Fatalf("user claims account %s, want %s", acct, w.accPub)
	}
	nonce := []byte("nonce")
	sig, _ := kp.Sign(nonce)
	return CheckUser(ac, uc, nonce, base64.RawURLEncoding.EncodeToString(sig), now)
}

func TestIssueAndVerify(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxConnections = 7
	w := newWorld(t, lim)
	u, err := IssueUser(w.accSeed, UserSpec{Name: "alice", Permissions: Permissions{
		Publish: Permission{Allow: []string{"orders.>"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.connectAs(t, u.Creds, time.Now()); err != nil {
		t.Fatalf("a freshly issued user does not verify: %v", err)
	}
	ac, _ := w.trust.VerifyAccount(w.accJWT, w.accPub, time.Now())
	if got := LimitsOf(ac); got != lim {
		t.Fatalf("limits round trip: got %+v, want %+v", got, lim)
	}

	// Revoked: a revocation at or after the JWT's issue time voids it.
	token, err := w.op.IssueAccount(AccountSpec{PublicKey: w.accPub, Name: "A", Limits: lim,
		Revocations: map[string]time.Time{u.PublicKey: time.Now().Add(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	w.accJWT = token
	if err := w.connectAs(t, u.Creds, time.Now()); !errors.Is(err, ErrRevoked) {
		t.Fatalf("revoked user: %v, want ErrRevoked", err)
	}

	// Expired.
	v, _ := IssueUser(w.accSeed, UserSpec{Name: "brief", Expires: time.Now().Add(time.Minute)})
	if err := w.connectAs(t, v.Creds, time.Now().Add(2*time.Minute)); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired user: %v, want ErrExpired", err)
	}
}

func TestUntrustedAccount(t *testing.T) {
	w := newWorld(t, DefaultLimits())
	other := newWorld(t, DefaultLimits())
	if _, err := w.trust.VerifyAccount(other.accJWT, "", time.Now()); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("account of another operator: %v, want ErrUntrusted", err)
	}
	if _, err := w.trust.VerifyAccount(w.accJWT, other.accPub, time.Now()); !errors.Is(err, ErrInvalidClaim) {
		t.Fatalf("account JWT served for another key: %v, want ErrInvalidClaim", err)
	}
	if _, err := NewTrust([]byte(w.accJWT)); err == nil {
		t.Fatal("an account JWT was accepted as an operator")
	}
}

func TestBadNonceSignature(t *testing.T) {
	w := newWorld(t, DefaultLimits())
	u, _ := IssueUser(w.accSeed, UserSpec{Name: "u"})
	token, _, _ := ParseCreds(u.Creds)
	uc, _, _ := DecodeUser(token)
	ac, _ := w.trust.VerifyAccount(w.accJWT, w.accPub, time.Now())
	other, _ := nkeys.CreateUser()
	sig, _ := other.Sign([]byte("nonce"))
	for _, s := range []string{base64.RawURLEncoding.EncodeToString(sig), "", "!!", "AAAA"} {
		if err := CheckUser(ac, uc, []byte("nonce"), s, time.Now()); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("sig %q: %v, want ErrBadSignature", s, err)
		}
	}
}

// TestScopedSigningKey: a user issued by a scoped signing key gets the
// scope's template, with its functions filled in, whatever the user JWT
// says.
func TestScopedSigningKey(t *testing.T) {
	op, _, _ := NewOperator("op")
	trust, _ := NewTrust([]byte(op.JWT()))
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	skp, _ := nkeys.CreateAccount()
	spub, _ := skp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "shop"
	scope := jwt.NewUserScope()
	scope.Key = spub
	scope.Template.Pub.Allow.Add("{{account-name()}}.{{name()}}.>", "tag.{{tag(team)}}.>", "gone.{{tag(missing)}}")
	ac.SigningKeys.AddScopedSigner(scope)
	acJWT, err := ac.Encode(opKeyPair(t, op))
	if err != nil {
		t.Fatal(err)
	}
	acc, err := trust.VerifyAccount(acJWT, apub, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "bob"
	uc.IssuerAccount = apub
	uc.Tags.Add("team:red")
	uc.SetScoped(true)
	token, err := uc.Encode(skp)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := DecodeUser(token)
	if err != nil {
		t.Fatal(err)
	}
	nonce := []byte("n")
	sig, _ := ukp.Sign(nonce)
	if err := CheckUser(acc, got, nonce, base64.StdEncoding.EncodeToString(sig), time.Now()); err != nil {
		t.Fatal(err)
	}
	want := "shop.bob.> tag.red.>"
	if s := strings.Join(got.Pub.Allow, " "); s != want {
		t.Fatalf("template expanded to %q, want %q", s, want)
	}

	// A scoped key may not issue a user that carries its own permissions.
	uc2 := jwt.NewUserClaims(upub)
	uc2.IssuerAccount = apub
	uc2.Pub.Allow.Add(">")
	token2, _ := uc2.Encode(skp)
	got2, _, _ := DecodeUser(token2)
	if err := CheckUser(acc, got2, nonce, base64.StdEncoding.EncodeToString(sig), time.Now()); !errors.Is(err, ErrInvalidClaim) {
		t.Fatalf("scoped user with its own permissions: %v, want ErrInvalidClaim", err)
	}
}

// opKeyPair digs the operator's key out for tests that sign claims this
// package does not issue.
func opKeyPair(t testing.TB, op *Operator) nkeys.KeyPair {
	t.Helper()
	return op.kp
}

func TestLimitsValidate(t *testing.T) {
	good := DefaultLimits()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	off := good
	off.JetStream.MaxMemory, off.JetStream.MaxStorage = 0, 0
	if err := off.Validate(); err != nil {
		t.Fatalf("JetStream off: %v", err)
	}
	for field, edit := range map[string]func(*Limits){
		"limits.max_connections":           func(l *Limits) { l.MaxConnections = 0 },
		"limits.max_payload":               func(l *Limits) { l.MaxPayload = -2 },
		"limits.jetstream.max_storage":     func(l *Limits) { l.JetStream.MaxStorage = -5 },
		"limits.jetstream.max_streams":     func(l *Limits) { l.JetStream.MaxStreams = 0 },
		"limits.jetstream.max_ack_pending": func(l *Limits) { l.JetStream.MaxAckPending = -3 },
	} {
		l := DefaultLimits()
		edit(&l)
		err := l.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("%s: got %v", field, err)
		}
	}
}
