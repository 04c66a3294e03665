package api

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contrail/contrail/tenant"
)

// Bounds of what the API accepts.
const (
	minPassword = 12
	maxPassword = 1024
	maxName     = 64
	maxEmail    = 254
	maxSubjects = 256
)

// checkName checks a display name: 1–64 characters, printable.
func checkName(field, name string) error {
	n := utf8.RuneCountInString(name)
	if strings.TrimSpace(name) == "" || n > maxName {
		return invalid(field, fmt.Sprintf("must be 1 to %d characters", maxName))
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return invalid(field, "must contain only printable characters")
		}
	}
	return nil
}

func checkEmail(email string) error {
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || !strings.Contains(email[strings.LastIndexByte(email, '@')+1:], ".") || len(email) > maxEmail {
		return invalid("email", "must be an email address like name@example.com")
	}
	return nil
}

func checkPassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < minPassword {
		return invalid("password", fmt.Sprintf("must be at least %d characters", minPassword))
	}
	if n > maxPassword {
		return invalid("password", fmt.Sprintf("must be at most %d characters", maxPassword))
	}
	return nil
}

// checkSubject checks a subject as NATS permissions take it: dot
// separated non-empty tokens without whitespace, '*' a whole token, '>'
// a whole last token.
func checkSubject(field, s string) error {
	if s == "" || len(s) > 1024 {
		return invalid(field, "must be a NATS subject of 1 to 1024 bytes")
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return invalid(field, fmt.Sprintf("%q has an empty token", s))
		case strings.ContainsFunc(t, unicode.IsSpace):
			return invalid(field, fmt.Sprintf("%q contains whitespace", s))
		case strings.ContainsFunc(t, unicode.IsControl):
			return invalid(field, fmt.Sprintf("%q contains a control character", s))
		case t == ">" && i != len(toks)-1:
			return invalid(field, fmt.Sprintf("%q: '>' must be the last token", s))
		case len(t) > 1 && strings.ContainsAny(t, "*>"):
			return invalid(field, fmt.Sprintf("%q: wildcards must be whole tokens", s))
		}
	}
	return nil
}

func checkPermissions(p *tenant.Permissions) error {
	for _, dir := range []struct {
		name string
		perm tenant.Permission
	}{{"publish", p.Publish}, {"subscribe", p.Subscribe}} {
		for _, list := range []struct {
			name string
			subs []string
		}{{"allow", dir.perm.Allow}, {"deny", dir.perm.Deny}} {
			field := "permissions." + dir.name + "." + list.name
			if len(list.subs) > maxSubjects {
				return invalid(field, fmt.Sprintf("at most %d subjects", maxSubjects))
			}
			for i, s := range list.subs {
				if err := checkSubject(fmt.Sprintf("%s[%d]", field, i), s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkLimits turns tenant's validation error into a 400 naming the field.
func checkLimits(l tenant.Limits) error {
	if err := l.Validate(); err != nil {
		if fe, ok := err.(*tenant.FieldError); ok {
			return invalid(fe.Field, fe.Reason)
		}
		return invalid("limits", err.Error())
	}
	return nil
}
