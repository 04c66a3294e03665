package tenant

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// What a credential can fail on. Data-plane nodes log these and tell the
// client only "Authorization Violation": the reason helps an attacker more
// than the user.
var (
	ErrUntrusted    = errors.New("not signed by a trusted key")
	ErrBadSignature = errors.New("nonce signature does not verify")
	ErrExpired      = errors.New("jwt expired")
	ErrNotYetValid  = errors.New("jwt not yet valid")
	ErrRevoked      = errors.New("user revoked")
	ErrBearer       = errors.New("bearer token not allowed by account")
	ErrInvalidClaim = errors.New("invalid claims")
)

// Trust is what a data-plane node trusts: one operator and its signing
// keys.
type Trust struct {
	claims *jwt.OperatorClaims
	keys   map[string]bool
}

// NewTrust reads an operator JWT (plain or in a decorated file, as nsc
// writes it). The operator must sign itself.
func NewTrust(operatorJWT []byte) (*Trust, error) {
	token, err := jwt.ParseDecoratedJWT(operatorJWT)
	if err != nil {
		return nil, fmt.Errorf("operator jwt: %w", err)
	}
	oc, err := jwt.DecodeOperatorClaims(token)
	if err != nil {
		return nil, fmt.Errorf("operator jwt: %w", err)
	}
	if err := blocking(oc); err != nil {
		return nil, fmt.Errorf("operator jwt: %w", err)
	}
	if oc.Issuer != oc.Subject {
		return nil, fmt.Errorf("operator jwt: issued by %s, not by itself: %w", oc.Issuer, ErrUntrusted)
	}
	t := &Trust{claims: oc, keys: map[string]bool{oc.Subject: true}}
	for _, k := range oc.SigningKeys {
		t.keys[k] = true
	}
	return t, nil
}

// OperatorKey is the trusted operator's public key.
func (t *Trust) OperatorKey() string { return t.claims.Subject }

// Operator is the operator's claims.
func (t *Trust) Operator() *jwt.OperatorClaims { return t.claims }

// SystemAccount is the system account the operator JWT names, if any.
func (t *Trust) SystemAccount() string { return t.claims.SystemAccount }

// VerifyAccount decodes an account JWT and checks it is signed by the
// operator (or one of its signing keys), valid now, and about account
// want (when want is not empty).
func (t *Trust) VerifyAccount(token, want string, now time.Time) (*jwt.AccountClaims, error) {
	ac, err := jwt.DecodeAccountClaims(strings.TrimSpace(token))
	if err != nil {
		return nil, fmt.Errorf("account jwt: %w", err)
	}
	if want != "" && ac.Subject != want {
		return nil, fmt.Errorf("account jwt is for %s, not %s: %w", ac.Subject, want, ErrInvalidClaim)
	}
	if !t.keys[ac.Issuer] {
		return nil, fmt.Errorf("account %s: issuer %s: %w", ac.Subject, ac.Issuer, ErrUntrusted)
	}
	if err := blocking(ac); err != nil {
		return nil, fmt.Errorf("account %s: %w", ac.Subject, err)
	}
	if err := timely(&ac.ClaimsData, now); err != nil {
		return nil, fmt.Errorf("account %s: %w", ac.Subject, err)
	}
	return ac, nil
}

// DecodeUser reads a user JWT and says which account it claims to be in.
// The claims are not to be trusted until CheckUser passes.
func DecodeUser(token string) (uc *jwt.UserClaims, account string, err error) {
	uc, err = jwt.DecodeUserClaims(token)
	if err != nil {
		return nil, "", fmt.Errorf("user jwt: %w", err)
	}
	account = uc.IssuerAccount
	if account == "" {
		account = uc.Issuer
	}
	if !nkeys.IsValidPublicAccountKey(account) {
		return nil, "", fmt.Errorf("user %s: issuer account %q: %w", uc.Subject, account, ErrInvalidClaim)
	}
	return uc, account, nil
}

// CheckUser verifies a user against its (verified) account at connect:
// the issuer is the account or one of its signing keys, the JWT is valid
// now and not revoked, and sig is the user's signature of nonce (unless
// the user is a bearer token the account allows). A user issued by a
// scoped signing key gets the scope's template as its permissions and
// limits; uc is updated in place.
func CheckUser(ac *jwt.AccountClaims, uc *jwt.UserClaims, nonce []byte, sig string, now time.Time) error {
	if uc.Issuer != ac.Subject {
		if !ac.SigningKeys.Contains(uc.Issuer) {
			return fmt.Errorf("user %s: issuer %s: %w", uc.Subject, uc.Issuer, ErrUntrusted)
		}
		if uc.IssuerAccount != ac.Subject {
			return fmt.Errorf("user %s: issuer_account %s: %w", uc.Subject, uc.IssuerAccount, ErrInvalidClaim)
		}
		if scope, ok := ac.SigningKeys.GetScope(uc.Issuer); ok && scope != nil {
			if err := scope.ValidateScopedSigner(uc); err != nil {
				return fmt.Errorf("user %s: %w: %v", uc.Subject, ErrInvalidClaim, err)
			}
			us, ok := scope.(*jwt.UserScope)
			if !ok {
				return fmt.Errorf("user %s: unknown scope kind: %w", uc.Subject, ErrInvalidClaim)
			}
			tmpl, err := expandTemplate(us.Template, uc, ac)
			if err != nil {
				return fmt.Errorf("user %s: scope template: %w", uc.Subject, err)
			}
			uc.UserPermissionLimits = tmpl
		}
	}
	if err := blocking(uc); err != nil {
		return fmt.Errorf("user %s: %w", uc.Subject, err)
	}
	if err := timely(&uc.ClaimsData, now); err != nil {
		return fmt.Errorf("user %s: %w", uc.Subject, err)
	}
	if Revoked(ac, uc) {
		return fmt.Errorf("user %s: %w", uc.Subject, ErrRevoked)
	}
	if uc.BearerToken {
		if ac.Limits.DisallowBearer {
			return fmt.Errorf("user %s: %w", uc.Subject, ErrBearer)
		}
		return nil
	}
	return VerifyNonce(uc.Subject, nonce, sig)
}

// Revoked reports whether the account's revocations void uc: an entry for
// the user's key (or "*") at or after the JWT's issue time.
func Revoked(ac *jwt.AccountClaims, uc *jwt.UserClaims) bool {
	return ac.IsClaimRevoked(uc)
}

// VerifyNonce checks sig (base64, URL or standard alphabet, as clients
// send it) is pub's signature of nonce.
func VerifyNonce(pub string, nonce []byte, sig string) error {
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return fmt.Errorf("signature encoding: %w", ErrBadSignature)
		}
	}
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return fmt.Errorf("public key %q: %w", pub, ErrBadSignature)
	}
	if err := kp.Verify(nonce, raw); err != nil {
		return ErrBadSignature
	}
	return nil
}

// blocking fails on the claim validation errors that make a JWT unusable.
func blocking(c jwt.Claims) error {
	vr := jwt.CreateValidationResults()
	c.Validate(vr)
	if errs := vr.Errors(); len(errs) > 0 {
		return fmt.Errorf("%w: %v", ErrInvalidClaim, errs[0])
	}
	return nil
}

// timely checks expiry and not-before against now, to the second as the
// claims carry them.
func timely(cd *jwt.ClaimsData, now time.Time) error {
	if cd.Expires > 0 && now.Unix() >= cd.Expires {
		return ErrExpired
	}
	if cd.NotBefore > 0 && now.Unix() < cd.NotBefore {
		return ErrNotYetValid
	}
	return nil
}

var templateFn = regexp.MustCompile(`{{\s*([a-z-]+)\(\s*([^)]*?)\s*\)\s*}}`)

// expandTemplate fills a scoped signing key's permission template with the
// user's and account's names, keys and tags: {{name()}}, {{subject()}},
// {{account-name()}}, {{account-subject()}}, {{tag(k)}}, {{account-tag(k)}}.
// A tag a subject needs but the user lacks voids that subject.
func expandTemplate(t jwt.UserPermissionLimits, uc *jwt.UserClaims, ac *jwt.AccountClaims) (jwt.UserPermissionLimits, error) {
	var ferr error
	expand := func(list jwt.StringList) jwt.StringList {
		var out jwt.StringList
		for _, s := range list {
			missing := false
			v := templateFn.ReplaceAllStringFunc(s, func(m string) string {
				p := templateFn.FindStringSubmatch(m)
				switch p[1] {
				case "name":
					return uc.Name
				case "subject":
					return uc.Subject
				case "account-name":
					return ac.Name
				case "account-subject":
					return ac.Subject
				case "tag", "account-tag":
					tags := uc.Tags
					if p[1] == "account-tag" {
						tags = ac.Tags
					}
					for _, tag := range tags {
						if k, v, ok := strings.Cut(tag, ":"); ok && strings.EqualFold(k, p[2]) {
							return v
						}
					}
					missing = true
					return ""
				}
				ferr = fmt.Errorf("unknown template function %q: %w", p[1], ErrInvalidClaim)
				return ""
			})
			if !missing {
				out = append(out, v)
			}
		}
		return out
	}
	t.Pub.Allow, t.Pub.Deny = expand(t.Pub.Allow), expand(t.Pub.Deny)
	t.Sub.Allow, t.Sub.Deny = expand(t.Sub.Allow), expand(t.Sub.Deny)
	return t, ferr
}

// VerifyDelete checks an account deletion request as nats-server takes
// it: a generic JWT the operator (or one of its signing keys) issued about
// itself, listing account keys in data.accounts. It returns the keys.
func (t *Trust) VerifyDelete(token string) ([]string, error) {
	gc, err := jwt.DecodeGeneric(strings.TrimSpace(token))
	if err != nil {
		return nil, fmt.Errorf("delete request: %w", err)
	}
	if gc.Subject != gc.Issuer {
		return nil, fmt.Errorf("delete request: not self-signed: %w", ErrInvalidClaim)
	}
	if !t.keys[gc.Issuer] {
		return nil, fmt.Errorf("delete request: issuer %s: %w", gc.Issuer, ErrUntrusted)
	}
	list, ok := gc.Data["accounts"].([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("delete request: no accounts listed: %w", ErrInvalidClaim)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		key, ok := e.(string)
		if !ok || !nkeys.IsValidPublicAccountKey(key) {
			return nil, fmt.Errorf("delete request: %v is not an account key: %w", e, ErrInvalidClaim)
		}
		out = append(out, key)
	}
	return out, nil
}
