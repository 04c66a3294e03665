package config

import (
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// topFields are the top-level keys Contrail understands, with the aliases
// nats-server accepts for them.
var topFields = map[string]field[Options]{
	"listen":                    listenField,
	"host":                      stringField(func(o *Options) *string { return &o.Host }),
	"net":                       stringField(func(o *Options) *string { return &o.Host }),
	"port":                      intField(func(o *Options) *int { return &o.Port }),
	"http":                      httpField,
	"http_port":                 intField(func(o *Options) *int { return &o.HTTPPort }),
	"monitor_port":              intField(func(o *Options) *int { return &o.HTTPPort }),
	"http_host":                 stringField(func(o *Options) *string { return &o.HTTPHost }), // Contrail only
	"max_payload":               intField(func(o *Options) *int32 { return &o.MaxPayload }),
	"max_control_line":          intField(func(o *Options) *int32 { return &o.MaxControlLine }),
	"max_connections":           intField(func(o *Options) *int { return &o.MaxConnections }),
	"max_conn":                  intField(func(o *Options) *int { return &o.MaxConnections }),
	"max_pending":               intField(func(o *Options) *int64 { return &o.MaxPending }),
	"max_account_subscriptions": intField(func(o *Options) *int64 { return &o.MaxAccountSubs }),
	"ping_interval":             durationField(func(o *Options) *time.Duration { return &o.PingInterval }),
	"ping_max":                  intField(func(o *Options) *int { return &o.PingMax }),
	"write_deadline":            durationField(func(o *Options) *time.Duration { return &o.WriteDeadline }),
	"server_name":               stringField(func(o *Options) *string { return &o.ServerName }),
	"debug":                     boolField(func(o *Options) *bool { return &o.Debug }),
	"trace":                     boolField(func(o *Options) *bool { return &o.Trace }),
	"tls":                       tlsField,
	"allow_non_tls":             boolField(func(o *Options) *bool { return &o.AllowNonTLS }),
	"jetstream":                 jetStreamField,
	"store_dir":                 topStoreDirField,
	"storedir":                  topStoreDirField,
	"operator":                  operatorField,
	"operators":                 operatorField,
	"root":                      operatorField,
	"roots":                     operatorField,
	"root_operator":             operatorField,
	"root_operators":            operatorField,
	"resolver":                  resolverField,
	"account_resolver":          resolverField,
	"accounts_resolver":         resolverField,
	"system_account":            systemAccountField,
	"system":                    systemAccountField,
	"resolver_preload":          resolverPreloadField,
	"authorization":             authorizationField,
	"cluster":                   clusterField,
	"accounts":                  accountsField,
	"no_auth_user":              noAuthUserField,
	"logtime":                   boolField(func(o *Options) *bool { return &o.LogTime }),
	"logtime_utc":               boolField(func(o *Options) *bool { return &o.LogTimeUTC }),
	"log_file":                  stringField(func(o *Options) *string { return &o.LogFile }),
	"logfile":                   stringField(func(o *Options) *string { return &o.LogFile }),
}

// topUnsupported are nats-server top-level keys Contrail does not
// implement. Naming them keeps users from hunting for a typo.
var topUnsupported = setOf(
	"gateway", "leafnodes", "leaf", "websocket", "ws", "mqtt",
	"mappings", "maps",
	"https", "https_port", "http_base_path", "client_advertise",
	"trace_verbose",
	"logfile_size_limit", "log_size_limit", "logfile_max_num", "syslog",
	"remote_syslog", "pidfile", "pid_file", "ports_file_dir", "prof_port",
	"max_subscriptions", "max_subs", "max_sub_tokens",
	"max_subscription_tokens", "max_traced_msg_len",
	"disable_sublist_cache", "no_sublist_cache", "ocsp", "ocsp_cache",
	"lame_duck_duration", "lame_duck_grace_period",
	"resolver_tls", "resolver_pinned_accounts",
	"no_system_account", "no_system", "no_sys_acc", "no_header_support",
	"trusted", "trusted_keys", "connect_error_reports",
	"reconnect_error_reports", "server_tags", "default_js_domain",
	"write_deadline_policy", "max_closed_clients",
)

func setOf(keys ...string) map[string]bool {
	s := make(map[string]bool, len(keys))
	for _, k := range keys {
		s[k] = true
	}
	return s
}

// listenField handles `listen: port` and `listen: host:port`. A bare port
// resets the host to the default, as nats-server does.
func listenField(d *decoder, o *Options, path string, v *conf.Value) {
	host, port, ok := d.hostPort(path, v)
	if !ok {
		return
	}
	if host == "" {
		host = DefaultHost
	}
	o.Host, o.Port = host, port
}

// httpField handles `http: port` and `http: host:port` for monitoring.
func httpField(d *decoder, o *Options, path string, v *conf.Value) {
	if host, port, ok := d.hostPort(path, v); ok {
		o.HTTPHost, o.HTTPPort = host, port
	}
}

func operatorField(d *decoder, o *Options, path string, v *conf.Value) {
	if v.Kind == conf.KindArray {
		d.fail(v.Pos, ErrUnsupported, "%s: a list of operators is not supported by Contrail yet; give one", path)
		return
	}
	stringField(func(o *Options) *string { return &o.Operator })(d, o, path, v)
}

func resolverField(d *decoder, o *Options, path string, v *conf.Value) {
	if v.Kind != conf.KindMap {
		stringField(func(o *Options) *string { return &o.Resolver })(d, o, path, v)
		return
	}
	r := &DirResolver{}
	decodeMap(d, r, path, v.Map, dirResolverFields, nil)
	switch strings.ToLower(r.Type) {
	case "full":
	case "cache":
		d.fail(v.Pos, ErrUnsupported, "%s: type cache fetches accounts from other servers, which a single Contrail node does not have; use type full or a URL resolver", path)
		return
	default:
		d.fail(v.Pos, nil, "%s: type %q: want full", path, r.Type)
		return
	}
	if r.Dir == "" {
		d.fail(v.Pos, nil, "%s: dir has no value and needs to point to a directory", path)
		return
	}
	o.DirResolver = r
}

// dirResolverFields are the keys of nats-server's directory resolver
// block. interval (how often servers compare their stores) is read and
// checked but changes nothing on a single node.
var dirResolverFields = map[string]field[DirResolver]{
	"type":         stringField(func(r *DirResolver) *string { return &r.Type }),
	"dir":          stringField(func(r *DirResolver) *string { return &r.Dir }),
	"allow_delete": boolField(func(r *DirResolver) *bool { return &r.AllowDelete }),
	"hard_delete":  boolField(func(r *DirResolver) *bool { return &r.HardDelete }),
	"limit":        intField(func(r *DirResolver) *int64 { return &r.Limit }),
	"interval":     durationField(func(r *DirResolver) *time.Duration { return &r.Interval }),
	"timeout":      durationField(func(r *DirResolver) *time.Duration { return &r.Timeout }),
}

// resolverPreloadField reads `resolver_preload { <account key>: <jwt> }`,
// which nsc writes for memory resolvers.
func resolverPreloadField(d *decoder, o *Options, path string, v *conf.Value) {
	if v.Kind != conf.KindMap {
		d.typeErr(path, v, "map")
		return
	}
	if o.ResolverPreload == nil {
		o.ResolverPreload = map[string]string{}
	}
	for _, e := range v.Map.Entries() {
		if e.Value.Kind != conf.KindString {
			d.typeErr(path+"."+e.Key, e.Value, "string")
			continue
		}
		o.ResolverPreload[e.Key] = e.Value.Str
	}
}
