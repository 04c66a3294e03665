package config

import (
	"strings"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// GlobalAccount is the name of the account users outside the accounts
// block belong to, as in nats-server.
const GlobalAccount = "$G"

// Account is one static account of the `accounts` block: an isolated
// subject space with its own users, JetStream limits and the subjects it
// shares with other accounts.
type Account struct {
	Name  string
	Users []User
	// DefaultPermissions apply to the account's users that have none.
	DefaultPermissions *Permissions
	// JetStream is nil when the account has no JetStream.
	JetStream *AccountJetStream
	Exports   []Export
	Imports   []Import
	// Limits are the account's NATS limits; -1 (the default) is none.
	Limits AccountLimits

	pos conf.Pos
}

// AccountLimits are an account's `limits` block. max_leafnodes is read
// and has nothing to bound: Contrail accepts no leaf node connections.
type AccountLimits struct {
	MaxConnections, MaxSubscriptions, MaxPayload, MaxLeafNodes int64
}

func newAccount(name string, pos conf.Pos) *Account {
	return &Account{Name: name, pos: pos, Limits: AccountLimits{-1, -1, -1, -1}}
}

// AccountJetStream are an account's JetStream limits; -1 is unlimited,
// the value of every limit `jetstream: enabled` leaves unset.
type AccountJetStream struct {
	MaxMemory, MaxStore                       int64
	MaxStreams, MaxConsumers, MaxAckPending   int64
	MemoryMaxStreamBytes, StoreMaxStreamBytes int64
	MaxBytesRequired                          bool
}

// UnlimitedJetStream is `jetstream: enabled`.
func UnlimitedJetStream() *AccountJetStream {
	return &AccountJetStream{MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1, MaxAckPending: -1,
		MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}
}

// Export shares a stream (subjects others may subscribe to) or a service
// (subjects others may send requests to). Accounts, when not empty, are
// the only accounts that may import it.
type Export struct {
	Stream, Service string
	Accounts        []string
	// ResponseType is a service's "Singleton" (default), "Stream" or
	// "Chunked".
	ResponseType string
	// AccountTokenPosition, when > 0, is the subject token that must be
	// the importing account's name.
	AccountTokenPosition int

	pos conf.Pos
}

// Import brings another account's export in: a stream's messages appear
// under Prefix or To; requests to a service's To (default: the exported
// subject) go to the exporter.
type Import struct {
	Stream, Service *ImportSource
	Prefix, To      string

	pos conf.Pos
}

// ImportSource names the exporting account and subject.
type ImportSource struct {
	Account, Subject string
}

// accountsField reads `accounts { NAME { ... } ... }`, or the short form
// `accounts: [A, B]` of accounts with nothing in them.
func accountsField(d *decoder, o *Options, path string, v *conf.Value) {
	switch v.Kind {
	case conf.KindArray:
		for _, item := range v.Array {
			if item.Kind != conf.KindString {
				d.typeErr(path, item, "account name")
				continue
			}
			o.Accounts = append(o.Accounts, newAccount(item.Str, item.Pos))
		}
	case conf.KindMap:
		for _, e := range v.Map.Entries() {
			if e.Used {
				continue // a $variable defined inside the block
			}
			p := path + "." + e.Key
			a := newAccount(e.Key, e.KeyPos)
			if e.Value.Kind != conf.KindMap {
				d.typeErr(p, e.Value, "map")
				continue
			}
			decodeMap(d, a, p, e.Value.Map, accountFields, accountUnsupported)
			o.Accounts = append(o.Accounts, a)
		}
	default:
		d.typeErr(path, v, "map or list of account names")
	}
}

var accountFields = map[string]field[Account]{
	"users": func(d *decoder, a *Account, path string, v *conf.Value) {
		a.Users = append(a.Users, d.users(path, v, a.Name)...)
	},
	"default_permissions": blockField(permFields, nil, func() *Permissions { return &Permissions{} },
		func(a *Account, p *Permissions) { a.DefaultPermissions = p }),
	"jetstream": accountJetStreamField,
	"exports":   listField(exportItem, func(a *Account, e Export) { a.Exports = append(a.Exports, e) }),
	"imports":   listField(importItem, func(a *Account, i Import) { a.Imports = append(a.Imports, i) }),
	"limits": func(d *decoder, a *Account, path string, v *conf.Value) {
		if v.Kind != conf.KindMap {
			d.typeErr(path, v, "map")
			return
		}
		decodeMap(d, &a.Limits, path, v.Map, accountLimitFields, nil)
	},
}

var accountLimitFields = map[string]field[AccountLimits]{
	"max_connections":   intField(func(l *AccountLimits) *int64 { return &l.MaxConnections }),
	"max_conn":          intField(func(l *AccountLimits) *int64 { return &l.MaxConnections }),
	"max_subscriptions": intField(func(l *AccountLimits) *int64 { return &l.MaxSubscriptions }),
	"max_subs":          intField(func(l *AccountLimits) *int64 { return &l.MaxSubscriptions }),
	"max_payload":       intField(func(l *AccountLimits) *int64 { return &l.MaxPayload }),
	"max_pay":           intField(func(l *AccountLimits) *int64 { return &l.MaxPayload }),
	"max_leafnodes":     intField(func(l *AccountLimits) *int64 { return &l.MaxLeafNodes }),
	"max_leafs":         intField(func(l *AccountLimits) *int64 { return &l.MaxLeafNodes }),
}

// accountUnsupported are nats-server account keys Contrail lacks.
var accountUnsupported = setOf("nkey", "mappings", "maps", "msg_trace", "trace_dest", "cluster_traffic")

// listField reads an array whose items item decodes.
func listField[T, I any](item func(d *decoder, path string, v *conf.Value) (I, bool), add func(*T, I)) field[T] {
	return func(d *decoder, dst *T, path string, v *conf.Value) {
		if v.Kind != conf.KindArray {
			d.typeErr(path, v, "array")
			return
		}
		for _, it := range v.Array {
			if it.Kind != conf.KindMap {
				d.typeErr(path, it, "map")
				continue
			}
			if x, ok := item(d, path, it); ok {
				add(dst, x)
			}
		}
	}
}

// accountJetStreamField takes nats-server's forms: a boolean,
// "enabled"/"disabled", or a map of limits (unset ones unlimited).
func accountJetStreamField(d *decoder, a *Account, path string, v *conf.Value) {
	switch v.Kind {
	case conf.KindBool:
		a.JetStream = nil
		if v.Bool {
			a.JetStream = UnlimitedJetStream()
		}
	case conf.KindString:
		switch strings.ToLower(v.Str) {
		case "enabled", "enable":
			a.JetStream = UnlimitedJetStream()
		case "disabled", "disable":
			a.JetStream = nil
		default:
			d.fail(v.Pos, nil, "%s: expected \"enabled\" or \"disabled\", got %q", path, v.Str)
		}
	case conf.KindMap:
		js := UnlimitedJetStream()
		decodeMap(d, js, path, v.Map, accountJSFields, setOf("cluster_traffic"))
		a.JetStream = js
	default:
		d.typeErr(path, v, "boolean, \"enabled\" or map")
	}
}

var accountJSFields = func() map[string]field[AccountJetStream] {
	m := map[string]field[AccountJetStream]{}
	alias := func(f field[AccountJetStream], keys ...string) {
		for _, k := range keys {
			m[k] = f
		}
	}
	alias(sizeField(func(j *AccountJetStream) *int64 { return &j.MaxMemory }), "max_memory", "max_mem", "mem", "memory")
	alias(sizeField(func(j *AccountJetStream) *int64 { return &j.MaxStore }), "max_store", "max_file", "max_disk", "store", "disk")
	alias(intField(func(j *AccountJetStream) *int64 { return &j.MaxStreams }), "max_streams", "streams")
	alias(intField(func(j *AccountJetStream) *int64 { return &j.MaxConsumers }), "max_consumers", "consumers")
	alias(intField(func(j *AccountJetStream) *int64 { return &j.MaxAckPending }), "max_ack_pending")
	alias(sizeField(func(j *AccountJetStream) *int64 { return &j.MemoryMaxStreamBytes }), "mem_max_stream_bytes", "memory_max_stream_bytes")
	alias(sizeField(func(j *AccountJetStream) *int64 { return &j.StoreMaxStreamBytes }), "disk_max_stream_bytes", "store_max_stream_bytes")
	alias(boolField(func(j *AccountJetStream) *bool { return &j.MaxBytesRequired }), "max_bytes_required", "max_stream_bytes", "max_bytes")
	return m
}()

func exportItem(d *decoder, path string, v *conf.Value) (Export, bool) {
	e := Export{pos: v.Pos}
	decodeMap(d, &e, path, v.Map, exportFields, setOf("threshold", "response_threshold", "response_max_time",
		"response_time", "latency", "allow_trace", "advertise"))
	switch {
	case e.Stream == "" && e.Service == "":
		d.fail(v.Pos, nil, "%s: an export needs a stream or a service subject", path)
		return e, false
	case e.Stream != "" && e.Service != "":
		d.fail(v.Pos, nil, "%s: an export is a stream or a service, not both", path)
		return e, false
	case e.Stream != "" && e.ResponseType != "":
		d.fail(v.Pos, nil, "%s: response_type applies to service exports only", path)
		return e, false
	}
	return e, true
}

var exportFields = map[string]field[Export]{
	"stream":  stringField(func(e *Export) *string { return &e.Stream }),
	"service": stringField(func(e *Export) *string { return &e.Service }),
	"accounts": func(d *decoder, e *Export, path string, v *conf.Value) {
		e.Accounts = d.subjects(path, v)
	},
	"response":               responseTypeField,
	"response_type":          responseTypeField,
	"account_token_position": intField(func(e *Export) *int { return &e.AccountTokenPosition }),
}

func responseTypeField(d *decoder, e *Export, path string, v *conf.Value) {
	if v.Kind != conf.KindString {
		d.typeErr(path, v, "string")
		return
	}
	switch strings.ToLower(v.Str) {
	case "single", "singleton":
		e.ResponseType = "Singleton"
	case "stream":
		e.ResponseType = "Stream"
	case "chunk", "chunked":
		e.ResponseType = "Chunked"
	default:
		d.fail(v.Pos, nil, "%s: unknown response type %q (want singleton, stream or chunked)", path, v.Str)
	}
}

func importItem(d *decoder, path string, v *conf.Value) (Import, bool) {
	im := Import{pos: v.Pos}
	decodeMap(d, &im, path, v.Map, importFields, setOf("share", "allow_trace"))
	switch {
	case im.Stream == nil && im.Service == nil:
		d.fail(v.Pos, nil, "%s: an import needs a stream or a service", path)
		return im, false
	case im.Stream != nil && im.Service != nil:
		d.fail(v.Pos, nil, "%s: an import is a stream or a service, not both", path)
		return im, false
	case im.Stream != nil && im.Prefix != "" && im.To != "":
		d.fail(v.Pos, nil, "%s: a stream import has a prefix or a to, not both", path)
		return im, false
	case im.Service != nil && im.Prefix != "":
		d.fail(v.Pos, nil, "%s: prefix applies to stream imports only; a service import takes to", path)
		return im, false
	}
	src := im.Stream
	if src == nil {
		src = im.Service
	}
	if src.Account == "" || src.Subject == "" {
		d.fail(v.Pos, nil, "%s: an import needs an account and a subject", path)
		return im, false
	}
	return im, true
}

var importFields = map[string]field[Import]{
	"stream":  importSourceField(func(i *Import) **ImportSource { return &i.Stream }),
	"service": importSourceField(func(i *Import) **ImportSource { return &i.Service }),
	"prefix":  stringField(func(i *Import) *string { return &i.Prefix }),
	"to":      stringField(func(i *Import) *string { return &i.To }),
}

func importSourceField(sel func(*Import) **ImportSource) field[Import] {
	return blockField(map[string]field[ImportSource]{
		"account": stringField(func(s *ImportSource) *string { return &s.Account }),
		"subject": stringField(func(s *ImportSource) *string { return &s.Subject }),
	}, nil, func() *ImportSource { return &ImportSource{} }, func(i *Import, s *ImportSource) { *sel(i) = s })
}
