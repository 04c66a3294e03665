package config

import (
	"time"

	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// Authorization is the `authorization` block: who may connect to the
// global account (or, for users of the accounts block, to theirs), and
// how long a client has to say so. Operator mode does not use it; users
// come from JWTs there.
//
// The forms are exclusive as in nats-server: a single User/Password, a
// Token, or a list of Users (with passwords or nkeys).
type Authorization struct {
	User, Password string
	Token          string
	Users          []User
	// DefaultPermissions apply to the block's users that have none.
	DefaultPermissions *Permissions
	// Timeout bounds the wait for CONNECT; 0 takes the server default.
	Timeout time.Duration

	userPos, tokenPos conf.Pos
}

// User is one user of the authorization or accounts block. Password may
// be plain text or a bcrypt hash ($2a$, $2b$ ...).
type User struct {
	Name, Password, Nkey string
	Permissions          *Permissions // nil: the block's default permissions
	// Account is the accounts-block account the user belongs to; empty
	// for the global account.
	Account string
	// ConnectionTypes, when not empty, are the connection types the user
	// may connect with (STANDARD, WEBSOCKET, ...); Contrail serves
	// STANDARD only.
	ConnectionTypes []string

	pos conf.Pos
}

// ID is how the user is named: its user name, else its nkey.
func (u *User) ID() string {
	if u.Name != "" {
		return u.Name
	}
	return u.Nkey
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
	"user":     authUserField(func(a *Authorization) *string { return &a.User }),
	"username": authUserField(func(a *Authorization) *string { return &a.User }),
	"password": stringField(func(a *Authorization) *string { return &a.Password }),
	"pass":     stringField(func(a *Authorization) *string { return &a.Password }),
	"token": func(d *decoder, a *Authorization, path string, v *conf.Value) {
		a.tokenPos = v.Pos
		stringField(func(a *Authorization) *string { return &a.Token })(d, a, path, v)
	},
	"users": func(d *decoder, a *Authorization, path string, v *conf.Value) {
		a.Users = append(a.Users, d.users(path, v, "")...)
	},
	"default_permissions": blockField(permFields, nil, func() *Permissions { return &Permissions{} },
		func(a *Authorization, p *Permissions) { a.DefaultPermissions = p }),
	"timeout": durationField(func(a *Authorization) *time.Duration { return &a.Timeout }),
}

func authUserField(sel func(*Authorization) *string) field[Authorization] {
	return func(d *decoder, a *Authorization, path string, v *conf.Value) {
		a.userPos = v.Pos
		stringField(sel)(d, a, path, v)
	}
}

var authUnsupported = setOf("auth_callout", "callout", "auth_users", "proxy_required")

// users reads a users list; account names the accounts-block account the
// users belong to ("" for the authorization block).
func (d *decoder) users(path string, v *conf.Value, account string) []User {
	if v.Kind != conf.KindArray {
		d.typeErr(path, v, "array")
		return nil
	}
	var out []User
	for _, item := range v.Array {
		if item.Kind != conf.KindMap {
			d.typeErr(path, item, "map")
			continue
		}
		u := User{Account: account, pos: item.Pos}
		decodeMap(d, &u, path, item.Map, userFields, userUnsupported)
		switch {
		case u.Nkey != "" && (u.Name != "" || u.Password != ""):
			d.fail(item.Pos, nil, "%s: a user has a nkey or a user and password, not both", path)
		case u.Nkey != "" && !nkeys.IsValidPublicUserKey(u.Nkey):
			d.fail(item.Pos, nil, "%s: %q is not a user public nkey", path, u.Nkey)
		case u.Nkey == "" && u.Name == "":
			d.fail(item.Pos, nil, "%s: a user needs a user name or an nkey", path)
		default:
			out = append(out, u)
		}
	}
	return out
}

var userFields = map[string]field[User]{
	"user":        stringField(func(u *User) *string { return &u.Name }),
	"username":    stringField(func(u *User) *string { return &u.Name }),
	"password":    stringField(func(u *User) *string { return &u.Password }),
	"pass":        stringField(func(u *User) *string { return &u.Password }),
	"nkey":        stringField(func(u *User) *string { return &u.Nkey }),
	"permissions": permissionsField,
	"permission":  permissionsField,
	"allowed_connection_types": func(d *decoder, u *User, path string, v *conf.Value) {
		u.ConnectionTypes = d.subjects(path, v)
	},
	"connection_types": func(d *decoder, u *User, path string, v *conf.Value) {
		u.ConnectionTypes = d.subjects(path, v)
	},
}

var userUnsupported = setOf("proxy_required")

var permissionsField = blockField(permFields, nil,
	func() *Permissions { return &Permissions{} },
	func(u *User, p *Permissions) { u.Permissions = p })

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
				"max": intField(func(r *ResponsePermission) *int { return &r.MaxMsgs }),
				"expires": func(d *decoder, r *ResponsePermission, path string, v *conf.Value) {
					if _, ok := d.duration(path, v); ok {
						r.Expires = v.Raw // a duration string, or seconds
						if v.Kind != conf.KindString {
							r.Expires = v.Raw + "s"
						}
					}
				},
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
