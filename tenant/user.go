package tenant

import (
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Permission is one direction's allow and deny lists of subjects
// (wildcards allowed). An empty allow list allows everything not denied.
type Permission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Permissions restrict what a user may publish and subscribe to.
type Permissions struct {
	Publish   Permission `json:"publish"`
	Subscribe Permission `json:"subscribe"`
}

// UserSpec is everything a user JWT says.
type UserSpec struct {
	Name        string
	Permissions Permissions
	// Expires, if not zero, is when the user's JWT stops working.
	Expires time.Time
}

// IssuedUser is a freshly created user: the creds file holds its secret
// seed and is shown to its owner once.
type IssuedUser struct {
	PublicKey string
	JWT       string
	Creds     []byte
}

// IssueUser creates a user of the account whose seed is accountSeed and
// returns its creds file.
func IssueUser(accountSeed []byte, spec UserSpec) (*IssuedUser, error) {
	akp, err := nkeys.FromSeed(accountSeed)
	if err != nil {
		return nil, fmt.Errorf("account seed: %w", err)
	}
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("user key: %w", err)
	}
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = spec.Name
	uc.Pub.Allow = spec.Permissions.Publish.Allow
	uc.Pub.Deny = spec.Permissions.Publish.Deny
	uc.Sub.Allow = spec.Permissions.Subscribe.Allow
	uc.Sub.Deny = spec.Permissions.Subscribe.Deny
	if !spec.Expires.IsZero() {
		uc.Expires = spec.Expires.Unix()
	}
	vr := jwt.ValidationResults{}
	uc.Validate(&vr)
	if err := vr.Errors(); len(err) > 0 {
		return nil, fmt.Errorf("user %q: %w", spec.Name, err[0])
	}
	token, err := uc.Encode(akp)
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", spec.Name, err)
	}
	creds, err := jwt.FormatUserConfig(token, useed)
	if err != nil {
		return nil, fmt.Errorf("user %q creds: %w", spec.Name, err)
	}
	return &IssuedUser{PublicKey: upub, JWT: token, Creds: creds}, nil
}

// ParseCreds reads a creds file back into its user JWT and key pair.
func ParseCreds(creds []byte) (token string, kp nkeys.KeyPair, err error) {
	if token, err = jwt.ParseDecoratedJWT(creds); err != nil {
		return "", nil, fmt.Errorf("creds: %w", err)
	}
	if kp, err = jwt.ParseDecoratedUserNKey(creds); err != nil {
		return "", nil, fmt.Errorf("creds: %w", err)
	}
	return token, kp, nil
}
