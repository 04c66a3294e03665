package tenant

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Operator is the root of trust: it signs account JWTs, and data-plane
// nodes trust exactly the accounts it signed.
type Operator struct {
	kp     nkeys.KeyPair
	pub    string
	claims *jwt.OperatorClaims
	token  string
}

// NewOperator creates an operator with a fresh key. The seed it returns is
// the operator's secret: whoever holds it can sign accounts.
func NewOperator(name string) (*Operator, []byte, error) {
	kp, err := nkeys.CreateOperator()
	if err != nil {
		return nil, nil, fmt.Errorf("operator key: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, nil, fmt.Errorf("operator key: %w", err)
	}
	op, err := LoadOperator(name, seed)
	return op, seed, err
}

// LoadOperator rebuilds the operator from its seed and signs a fresh,
// self-signed operator JWT for it.
func LoadOperator(name string, seed []byte) (*Operator, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("operator seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("operator seed: %w", err)
	}
	if !nkeys.IsValidPublicOperatorKey(pub) {
		return nil, errors.New("operator seed: not an operator key")
	}
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = name
	token, err := oc.Encode(kp)
	if err != nil {
		return nil, fmt.Errorf("operator jwt: %w", err)
	}
	return &Operator{kp: kp, pub: pub, claims: oc, token: token}, nil
}

// PublicKey is the operator's identity, which nodes trust.
func (o *Operator) PublicKey() string { return o.pub }

// JWT is the operator JWT a node is started with (--operator).
func (o *Operator) JWT() string { return o.token }

// SetSystemAccount names the system account in the operator JWT and
// re-signs it.
func (o *Operator) SetSystemAccount(pub string) error {
	o.claims.SystemAccount = pub
	token, err := o.claims.Encode(o.kp)
	if err != nil {
		return fmt.Errorf("operator jwt: %w", err)
	}
	o.token = token
	return nil
}

// NewAccountKey creates an account's identity. The control plane keeps the
// seed: it signs the account's users.
func NewAccountKey() (pub string, seed []byte, err error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return "", nil, fmt.Errorf("account key: %w", err)
	}
	if pub, err = kp.PublicKey(); err != nil {
		return "", nil, fmt.Errorf("account key: %w", err)
	}
	if seed, err = kp.Seed(); err != nil {
		return "", nil, fmt.Errorf("account key: %w", err)
	}
	return pub, seed, nil
}

// AccountSpec is everything an account JWT says.
type AccountSpec struct {
	PublicKey string
	Name      string
	Limits    Limits
	// Revocations maps a user public key (or "*" for all users) to the
	// time before which its JWTs are void.
	Revocations map[string]time.Time
}

// IssueAccount signs the account JWT for spec.
func (o *Operator) IssueAccount(spec AccountSpec) (string, error) {
	if !nkeys.IsValidPublicAccountKey(spec.PublicKey) {
		return "", fmt.Errorf("account %q: not an account public key", spec.PublicKey)
	}
	ac := jwt.NewAccountClaims(spec.PublicKey)
	ac.Name = spec.Name
	spec.Limits.Apply(ac)
	for pub, at := range spec.Revocations {
		ac.RevokeAt(pub, at)
	}
	token, err := ac.Encode(o.kp)
	if err != nil {
		return "", fmt.Errorf("account %q: %w", spec.Name, err)
	}
	return token, nil
}

// Adopt makes a previously signed operator JWT the one this operator
// hands out, so the JWT nodes are started with stays the same across
// restarts. It must be this operator's, self-signed, and name the same
// system account.
func (o *Operator) Adopt(token string) error {
	oc, err := jwt.DecodeOperatorClaims(token)
	if err != nil {
		return fmt.Errorf("operator jwt: %w", err)
	}
	if oc.Subject != o.pub || oc.Issuer != o.pub {
		return fmt.Errorf("operator jwt is for %s, not %s: %w", oc.Subject, o.pub, ErrInvalidClaim)
	}
	if oc.SystemAccount != o.claims.SystemAccount || oc.Name != o.claims.Name {
		return fmt.Errorf("operator jwt names another system account or name: %w", ErrInvalidClaim)
	}
	o.claims, o.token = oc, token
	return nil
}
