package config

import (
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config/conf"
	"github.com/contrail/contrail/dataplane/subject"
)

// checkAuth applies the rules that span the authorization and accounts
// blocks, as nats-server does: users are unique across both, the single
// user and token forms exclude users lists, and every name an import,
// export, no_auth_user or system_account gives must exist.
func (d *decoder) checkAuth(o *Options) {
	a := o.Authorization
	accounts := map[string]*Account{}
	for _, acc := range o.Accounts {
		if acc.Name == "" || strings.ContainsAny(acc.Name, " \t.*>") {
			d.fail(acc.pos, nil, "accounts: %q is not a valid account name", acc.Name)
		}
		if accounts[acc.Name] != nil {
			d.fail(acc.pos, nil, "accounts: account %q is defined twice", acc.Name)
		}
		accounts[acc.Name] = acc
	}
	seen := map[string]bool{}
	var all []User
	if a != nil {
		all = append(all, a.Users...)
	}
	accountUsers := 0
	for _, acc := range o.Accounts {
		all = append(all, acc.Users...)
		accountUsers += len(acc.Users)
	}
	for _, u := range all {
		if seen[u.ID()] {
			d.fail(u.pos, nil, "duplicate user %q (users are unique across the authorization and accounts blocks)", u.ID())
		}
		seen[u.ID()] = true
	}
	if a != nil {
		switch {
		case a.User != "" && len(a.Users) > 0:
			d.fail(a.userPos, nil, "authorization: a single user/password and a users list cannot be combined")
		case a.Token != "" && len(a.Users) > 0:
			d.fail(a.tokenPos, nil, "authorization: a token and a users list cannot be combined")
		case a.User != "" && a.Token != "":
			d.fail(a.tokenPos, nil, "authorization: a single user/password and a token cannot be combined")
		case a.User != "" && accountUsers > 0:
			d.fail(a.userPos, nil, "authorization: a single user/password cannot be combined with users in accounts")
		case a.Token != "" && accountUsers > 0:
			d.fail(a.tokenPos, nil, "authorization: a token cannot be combined with users in accounts")
		case a.Password != "" && a.User == "":
			d.fail(a.userPos, nil, "authorization: password without user")
		}
		if a.Timeout < 0 {
			d.fail(a.userPos, nil, "authorization.timeout: %v cannot be negative", a.Timeout)
		}
	}
	for _, acc := range o.Accounts {
		for _, e := range acc.Exports {
			for _, name := range e.Accounts {
				if accounts[name] == nil {
					d.fail(e.pos, nil, "accounts.%s.exports: account %q is not defined", acc.Name, name)
				}
			}
		}
		for _, im := range acc.Imports {
			src := im.Stream
			if src == nil {
				src = im.Service
			}
			switch {
			case accounts[src.Account] == nil:
				d.fail(im.pos, nil, "accounts.%s.imports: account %q is not defined", acc.Name, src.Account)
			case src.Account == acc.Name:
				d.fail(im.pos, nil, "accounts.%s.imports: an account cannot import from itself", acc.Name)
			case !subject.ValidFilterString(src.Subject):
				d.fail(im.pos, nil, "accounts.%s.imports: %q is not a valid subject", acc.Name, src.Subject)
			case im.Prefix != "" && !subject.ValidLiteralString(strings.TrimSuffix(im.Prefix, ".")):
				d.fail(im.pos, nil, "accounts.%s.imports: prefix %q is not a literal subject", acc.Name, im.Prefix)
			case im.To != "" && !subject.ValidFilterString(im.To):
				d.fail(im.pos, nil, "accounts.%s.imports: to %q is not a valid subject", acc.Name, im.To)
			case !exported(accounts[src.Account], acc.Name, im):
				// nats-server refuses to start on such an import too.
				d.fail(im.pos, nil, "accounts.%s.imports: %s %q of account %s is not exported to %s",
					acc.Name, im.kind(), src.Subject, src.Account, acc.Name)
			}
		}
	}
	if o.NoAuthUser != "" && !seen[o.NoAuthUser] {
		d.fail(d.noAuthUserPos, nil, "no_auth_user: %q is not a user of the authorization or accounts block", o.NoAuthUser)
	}
	if o.NoAuthUser != "" && o.Operator != "" {
		d.fail(d.noAuthUserPos, ErrUnsupported, "no_auth_user: names a configured user, which operator mode does not have")
	}
	if len(o.Accounts) > 0 && o.Operator != "" {
		d.fail(o.Accounts[0].pos, nil, "accounts: an operator's accounts come from JWTs; remove the accounts block or the operator")
	}
	if sys := o.SystemAccount; sys != "" && o.Operator == "" && len(o.Accounts) > 0 && !nkeys.IsValidPublicAccountKey(sys) && accounts[sys] == nil {
		d.fail(d.systemAccountPos, nil, "system_account: %q is not an account of the accounts block", sys)
	}
}

func noAuthUserField(d *decoder, o *Options, path string, v *conf.Value) {
	d.noAuthUserPos = v.Pos
	stringField(func(o *Options) *string { return &o.NoAuthUser })(d, o, path, v)
}

func systemAccountField(d *decoder, o *Options, path string, v *conf.Value) {
	d.systemAccountPos = v.Pos
	stringField(func(o *Options) *string { return &o.SystemAccount })(d, o, path, v)
}

// StaticAuth reports whether the options configure users (the
// authorization or accounts block) that clients must prove at CONNECT.
func (o *Options) StaticAuth() bool {
	if a := o.Authorization; a != nil && (a.User != "" || a.Token != "" || len(a.Users) > 0) {
		return true
	}
	for _, acc := range o.Accounts {
		if len(acc.Users) > 0 {
			return true
		}
	}
	return false
}

// exported reports whether exp has an export of the import's kind whose
// subject contains the import's and which admits the importer.
func exported(exp *Account, importer string, im Import) bool {
	for _, e := range exp.Exports {
		subj, want := e.Stream, im.Stream
		if im.Service != nil {
			subj, want = e.Service, im.Service
		}
		if subj == "" || !subject.SubsetOf(want.Subject, subj) {
			continue
		}
		if len(e.Accounts) == 0 {
			return true
		}
		for _, a := range e.Accounts {
			if a == importer {
				return true
			}
		}
	}
	return false
}

func (im Import) kind() string {
	if im.Service != nil {
		return "service"
	}
	return "stream"
}
