// Package auth holds how people prove who they are to the control plane:
// argon2id password hashes, signed session and API tokens (JWTs whose id
// is checked against the store on every request, so deleting a token
// revokes it at once), and the throttle that slows password guessing.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes),
// which keeps a login well under 100 ms.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	saltLen      = 16
)

// ErrMismatch is returned by CheckPassword for a wrong password.
var ErrMismatch = errors.New("password does not match")

var b64 = base64.RawStdEncoding

// HashPassword returns the PHC-format argon2id hash of password.
func HashPassword(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPassword compares password with a hash from HashPassword, reading
// the parameters from the hash so they can be raised later.
func CheckPassword(hash, password string) error {
	ph, err := parseHash(hash)
	if err != nil {
		return err
	}
	return ph.check(password)
}

// parsedHash is a PHC-format argon2id hash taken apart.
type parsedHash struct {
	m, t      uint32
	p         uint8
	salt, key []byte
}

func parseHash(hash string) (*parsedHash, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return nil, errors.New("password hash: unknown format")
	}
	var ph parsedHash
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &ph.m, &ph.t, &ph.p); err != nil {
		return nil, fmt.Errorf("password hash parameters: %w", err)
	}
	if ph.t < 1 || ph.p < 1 || ph.m < 8*uint32(ph.p) {
		return nil, fmt.Errorf("password hash parameters %q: out of range", parts[3]) // argon2 panics on these
	}
	var err error
	if ph.salt, err = b64.DecodeString(parts[4]); err != nil {
		return nil, fmt.Errorf("password hash salt: %w", err)
	}
	if ph.key, err = b64.DecodeString(parts[5]); err != nil {
		return nil, fmt.Errorf("password hash key: %w", err)
	}
	if len(ph.key) == 0 {
		return nil, errors.New("password hash: empty key")
	}
	return &ph, nil
}

func (ph *parsedHash) check(password string) error {
	got := argon2.IDKey([]byte(password), ph.salt, ph.t, ph.m, ph.p, uint32(len(ph.key)))
	if subtle.ConstantTimeCompare(got, ph.key) != 1 {
		return ErrMismatch
	}
	return nil
}
