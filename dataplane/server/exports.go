package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/contrail/contrail/dataplane/subject"
)

// Exports are what an account's JWT offers other accounts. An import is
// allowed when its subject lies within an export of its type and the
// export's terms are met, as nats-server decides it:
//
//   - a public export (no token_req, no account_token_position) admits
//     every account;
//   - account_token_position n admits an account only on subjects whose
//     n-th token is that account's public key;
//   - token_req admits an account holding an activation JWT, signed by the
//     exporter or one of its signing keys, for that account, that import
//     type and a subject containing the import's; not expired, not yet
//     revoked by the export's revocations.
//
// Where several exports contain the import's subject, an exact match is
// tried first, then the others in claim order; the first that admits the
// import decides (nats-server picks one in map order).

// Errors an import is refused with; the refusal is logged, never sent to a
// client.
var (
	errNotExported     = errors.New("not exported")
	errNotAuthorized   = errors.New("export does not admit this account")
	errActivation      = errors.New("activation token rejected")
	errImportFormsLoop = errors.New("import forms a cycle")
)

// grant is an export admitting one import.
type grant struct {
	export *jwt.Export
	// expires is when the activation token that admitted the import
	// expires (zero: no token, or one that does not expire).
	expires time.Time
}

// authorizeImport checks that exporter's claims admit importer's import of
// subj (the subject in the exporter's space) as kind.
func authorizeImport(exporter *jwt.AccountClaims, importer string, imp *jwt.Import, subj string, kind jwt.ExportType, now time.Time) (grant, error) {
	var exact, wider []*jwt.Export
	for _, e := range exporter.Exports {
		if e == nil || e.Type != kind {
			continue
		}
		switch {
		case string(e.Subject) == subj:
			exact = append(exact, e)
		case subject.SubsetOf(subj, string(e.Subject)):
			wider = append(wider, e)
		}
	}
	if len(exact)+len(wider) == 0 {
		return grant{}, fmt.Errorf("%s %q of account %s: %w", kind, subj, exporter.Subject, errNotExported)
	}
	var firstErr error
	for _, e := range append(exact, wider...) {
		exp, err := admits(exporter, e, importer, imp, subj, now)
		if err == nil {
			return grant{export: e, expires: exp}, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return grant{}, fmt.Errorf("%s %q of account %s: %w", kind, subj, exporter.Subject, firstErr)
}

// admits applies one export's terms to an import; it returns when the
// admitting activation expires, if it does.
func admits(exporter *jwt.AccountClaims, e *jwt.Export, importer string, imp *jwt.Import, subj string, now time.Time) (time.Time, error) {
	if pos := e.AccountTokenPosition; pos > 0 {
		toks := strings.Split(subj, ".")
		if int(pos) <= len(toks) && toks[pos-1] == importer {
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("token %d of %q is not the importing account: %w", pos, subj, errNotAuthorized)
	}
	if !e.TokenReq {
		return time.Time{}, nil
	}
	return checkActivation(exporter, e, importer, imp, now)
}

// checkActivation verifies the import's activation token against the
// private export e.
func checkActivation(exporter *jwt.AccountClaims, e *jwt.Export, importer string, imp *jwt.Import, now time.Time) (time.Time, error) {
	if imp.Token == "" {
		return time.Time{}, fmt.Errorf("private export needs an activation token: %w", errNotAuthorized)
	}
	act, err := jwt.DecodeActivationClaims(imp.Token)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", errActivation, err)
	}
	// The import's own checks: the token is for this account, this type,
	// a subject containing the import's, and issued for the exporter.
	vr := jwt.CreateValidationResults()
	imp.Validate(importer, vr)
	if errs := vr.Errors(); len(errs) > 0 {
		return time.Time{}, fmt.Errorf("%w: %v", errActivation, errs[0])
	}
	vr = jwt.CreateValidationResults()
	act.Validate(vr)
	if errs := vr.Errors(); len(errs) > 0 {
		return time.Time{}, fmt.Errorf("%w: %v", errActivation, errs[0])
	}
	switch {
	case act.IssuerAccount == "" && act.Issuer != exporter.Subject:
		return time.Time{}, fmt.Errorf("%w: issued by %s, not the exporter", errActivation, act.Issuer)
	case act.IssuerAccount != "" && act.IssuerAccount != exporter.Subject:
		return time.Time{}, fmt.Errorf("%w: issuer account %s is not the exporter", errActivation, act.IssuerAccount)
	case act.IssuerAccount != "" && act.Issuer != exporter.Subject && !exporter.SigningKeys.Contains(act.Issuer):
		return time.Time{}, fmt.Errorf("%w: issuer %s is not a signing key of the exporter", errActivation, act.Issuer)
	}
	if act.Expires > 0 && now.Unix() >= act.Expires {
		return time.Time{}, fmt.Errorf("%w: expired", errActivation)
	}
	if act.NotBefore > 0 && now.Unix() < act.NotBefore {
		return time.Time{}, fmt.Errorf("%w: not yet valid", errActivation)
	}
	if e.IsClaimRevoked(act) {
		return time.Time{}, fmt.Errorf("%w: revoked by the export", errActivation)
	}
	if act.Expires > 0 {
		return time.Unix(act.Expires, 0), nil
	}
	return time.Time{}, nil
}
