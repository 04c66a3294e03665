package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Lifetimes of tokens.
const (
	SessionTTL     = time.Hour
	DefaultAPITTL  = 30 * 24 * time.Hour
	MaxAPITTL      = 365 * 24 * time.Hour
	tokenIssuer    = "contrail"
	signingKeySize = 32
)

// ErrInvalidToken covers every reason a bearer token is refused: bad
// signature, expired, malformed. Callers answer 401 without detail.
var ErrInvalidToken = errors.New("invalid token")

// Claims are what a token carries: its id (checked against the store),
// the person (subject) and their organization.
type Claims struct {
	Org  string `json:"org"`
	Kind string `json:"kind"`
	jwt.RegisteredClaims
}

// Signer signs and verifies tokens with one HMAC key.
type Signer struct {
	key []byte
}

// NewSigner returns a Signer for key (at least 32 random bytes, see
// NewSigningKey).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < signingKeySize {
		return nil, fmt.Errorf("token signing key: %d bytes, want at least %d", len(key), signingKeySize)
	}
	return &Signer{key: key}, nil
}

// NewSigningKey makes a fresh token signing key.
func NewSigningKey() ([]byte, error) {
	return randomBytes(signingKeySize)
}

// Sign issues a token with id for person in org, valid until expires.
func (s *Signer) Sign(id, kind, person, org string, now, expires time.Time) (string, error) {
	c := Claims{Org: org, Kind: kind, RegisteredClaims: jwt.RegisteredClaims{
		ID:        id,
		Subject:   person,
		Issuer:    tokenIssuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(expires),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	return tok, nil
}

// Verify checks a token's signature, issuer and expiry at now and
// returns its claims; any failure is ErrInvalidToken.
func (s *Signer) Verify(token string, now time.Time) (*Claims, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(tokenIssuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	if err != nil || c.ID == "" || c.Subject == "" {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return &c, nil
}
