package config

import (
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// Authorization is the open-mode `authorization` block: users known by
// their nkey, each proving it at CONNECT by signing the server's nonce.
// Operator mode does not use it; accounts and users come from JWTs there.
type Authorization struct {
	Users []NkeyUser
}

// NkeyUser is one bare nkey user of the global account.
type NkeyUser struct {
	Nkey        string
	Permissions *Permissions // nil: may do anything
}

// Permissions restrict a user as nats-server's permissions block does.
type Permissions struct {
	Publish, Subscribe SubjectPermission
	// AllowResponses lets the user publish to reply subjects of requests
	// it received: MaxMsgs replies within Expires (0s: nats-server's
	// defaults, one reply within two minutes).
	AllowResponses *ResponsePermission
}

// SubjectPermission is one direction's allow and deny lists.
type SubjectPermission struct {
	Allow, Deny []string
}

// ResponsePermission bounds the replies allow_responses permits.
type ResponsePermission struct {
	MaxMsgs int
	Expires string
}

var authorizationField = blockField(authFields, authUnsupported,
	func() *Authorization { return &Authorization{} },
	func(o *Options, a *Authorization) { o.Authorization = a })

var authFields = map[string]field[Authorization]{
	"users": func(d *decoder, a *Authorization, path string, v *conf.Value) {
		if v.Kind != conf.KindArray {
			d.typeErr(path, v, "array")
			return
		}
		for _, item := range v.Array {
			if item.Kind != conf.KindMap {
				d.typeErr(path, item, "map")
				continue
			}
			var u NkeyUser
			decodeMap(d, &u, path, item.Map, userFields, userUnsupported)
			if u.Nkey == "" {
				d.fail(item.Pos, nil, "%s: a user needs an nkey (user/password users are not supported by Contrail)", path)
				continue
			}
			if !nkeys.IsValidPublicUserKey(u.Nkey) {
				d.fail(item.Pos, nil, "%s: %q is not a user public nkey", path, u.Nkey)
				continue
			}
			a.Users = append(a.Users, u)
		}
	},
}

var authUnsupported = setOf("user", "username", "password", "pass", "token", "timeout", "auth_callout", "default_permissions")

var userFields = map[string]field[NkeyUser]{
	"nkey":        stringField(func(u *NkeyUser) *string { return &u.Nkey }),
	"permissions": permissionsField,
}

var userUnsupported = setOf("user", "username", "password", "pass", "account", "allowed_connection_types")

var permissionsField = blockField(permFields, nil,
	func() *Permissions { return &Permissions{} },
	func(u *NkeyUser, p *Permissions) { u.Permissions = p })

var permFields = map[string]field[Permissions]{
	"publish":   subjectPermField(func(p *Permissions) *SubjectPermission { return &p.Publish }),
	"pub":       subjectPermField(func(p *Permissions) *SubjectPermission { return &p.Publish }),
	"subscribe": subjectPermField(func(p *Permissions) *SubjectPermission { return &p.Subscribe }),
	"sub":       subjectPermField(func(p *Permissions) *SubjectPermission { return &p.Subscribe }),
	"allow_responses": func(d *decoder, p *Permissions, path string, v *conf.Value) {
		switch v.Kind {
		case conf.KindBool:
			if v.Bool {
				p.AllowResponses = &ResponsePermission{}
			}
		case conf.KindMap:
			r := &ResponsePermission{}
			decodeMap(d, r, path, v.Map, map[string]field[ResponsePermission]{
				"max":     intField(func(r *ResponsePermission) *int { return &r.MaxMsgs }),
				"expires": stringField(func(r *ResponsePermission) *string { return &r.Expires }),
			}, nil)
			p.AllowResponses = r
		default:
			d.typeErr(path, v, "boolean or map")
		}
	},
}

// subjectPermField takes nats-server's three forms: a subject, a list of
// subjects (both meaning allow), or a map with allow and deny.
func subjectPermField(sel func(*Permissions) *SubjectPermission) field[Permissions] {
	return func(d *decoder, p *Permissions, path string, v *conf.Value) {
		sp := sel(p)
		switch v.Kind {
		case conf.KindString, conf.KindArray:
			sp.Allow = d.subjects(path, v)
		case conf.KindMap:
			decodeMap(d, sp, path, v.Map, map[string]field[SubjectPermission]{
				"allow": func(d *decoder, sp *SubjectPermission, path string, v *conf.Value) { sp.Allow = d.subjects(path, v) },
				"deny":  func(d *decoder, sp *SubjectPermission, path string, v *conf.Value) { sp.Deny = d.subjects(path, v) },
			}, nil)
		default:
			d.typeErr(path, v, "subject, list or map")
		}
	}
}

// subjects reads a subject or a list of them.
func (d *decoder) subjects(path string, v *conf.Value) []string {
	if v.Kind == conf.KindString {
		return []string{v.Str}
	}
	if v.Kind != conf.KindArray {
		d.typeErr(path, v, "subject or list")
		return nil
	}
	var out []string
	for _, item := range v.Array {
		if item.Kind != conf.KindString {
			d.typeErr(path, item, "string")
			continue
		}
		out = append(out, item.Str)
	}
	return out
}
