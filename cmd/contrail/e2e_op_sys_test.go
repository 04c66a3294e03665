package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The system account's services in operator mode: connect/disconnect
// events, per-account requests ($SYS.REQ.ACCOUNT.<acc>.*), server pings,
// $SYS.REQ.USER.INFO from any account, and the account monitoring
// endpoints. Shapes are compared with nats-server trusting the same
// operator and accounts.

// sysWorld is an operator world with a JetStream-enabled tenant account A
// (and its user alice), an account B (user bob), and a system user.
type sysWorld struct {
	*opWorld
	a, b             *opAccount
	aCreds, aUser    string
	bCreds, sysCreds string
	sysUser          string
	opFile, aUserJWT string
}

func newSysWorld(t *testing.T) *sysWorld {
	t.Helper()
	w := &sysWorld{opWorld: newOpWorld(t)}
	jsOn := func(ac *jwt.AccountClaims) { ac.Limits.JetStreamLimits = jsLimits() }
	w.a = w.account("A", jsOn)
	w.b = w.account("B", jsOn)
	w.aCreds, w.aUser = w.a.user("alice", nil)
	w.bCreds, _ = w.b.user("bob", nil)
	w.sysCreds, w.sysUser = w.sys.user("admin", nil)
	w.aUserJWT = readUserJWT(t, w.aCreds)
	w.opFile = filepath.Join(t.TempDir(), "operator.jwt")
	writeFile(t, filepath.Dir(w.opFile), "operator.jwt", w.opJWT)
	return w
}

// startRef starts nats-server trusting the world's operator, with every
// account preloaded in a memory resolver and JetStream on.
func (w *sysWorld) startRef(t *testing.T) *refServer {
	t.Helper()
	dir := t.TempDir()
	var pre strings.Builder
	w.mu.Lock()
	for k, v := range w.jwts {
		fmt.Fprintf(&pre, "  %s: %s\n", k, v)
	}
	w.mu.Unlock()
	conf := fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n%s}\njetstream: {store_dir: %q}\n",
		w.opFile, w.sys.pub, pre.String(), filepath.Join(dir, "js"))
	return startNatsServer(t, "-c", writeFile(t, dir, "ref.conf", conf))
}

// sysTarget is one server under test (Contrail or the reference) with a
// system user connected.
type sysTarget struct {
	name, url, monURL string
	sys               *nats.Conn
}

// targets starts Contrail and nats-server for the world.
func (w *sysWorld) targets(t *testing.T) (ours, ref *sysTarget) {
	t.Helper()
	n := w.startOpNode(t)
	r := w.startRef(t)
	ours = &sysTarget{name: "contrail", url: n.URL, monURL: n.MonURL, sys: connectCreds(t, n.URL, w.sysCreds)}
	ref = &sysTarget{name: "nats-server", url: r.URL, monURL: r.MonURL, sys: connectCreds(t, r.URL, w.sysCreds)}
	return ours, ref
}

// sysRequest asks a system service and decodes the JSON answer.
func sysRequest(t *testing.T, nc *nats.Conn, subj, body string) map[string]any {
	t.Helper()
	msg, err := nc.Request(subj, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(msg.Data, &m); err != nil {
		t.Fatalf("request %s: %v: %s", subj, err, msg.Data)
	}
	return m
}

// obj reads a nested JSON object by keys, failing when one is missing.
func obj(t *testing.T, m map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("%q is %T (%v), want an object", k, m[k], m[k])
		}
		m = next
	}
	return m
}

// first is the first object of a JSON array field.
func first(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	list, ok := m[key].([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("%q is %v, want a non-empty list", key, m[key])
	}
	o, ok := list[0].(map[string]any)
	if !ok {
		t.Fatalf("%q[0] is %T, want an object", key, list[0])
	}
	return o
}

// str reads a string field.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// eventPair waits for one CONNECT and one DISCONNECT event of account acc
// while fn connects and disconnects a client.
func eventPair(t *testing.T, sys *nats.Conn, acc string, fn func()) (connect, disconnect map[string]any) {
	t.Helper()
	sub := subscribeSync(t, sys, "$SYS.ACCOUNT."+acc+".*")
	flush(t, sys)
	fn()
	for connect == nil || disconnect == nil {
		m := nextMsg(t, sub)
		var ev map[string]any
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("%s: %v", m.Subject, err)
		}
		switch {
		case strings.HasSuffix(m.Subject, ".DISCONNECT"):
			if connect == nil {
				t.Fatalf("disconnect event before the connect event")
			}
			disconnect = ev
		case strings.HasSuffix(m.Subject, ".CONNECT"):
			connect = ev
		}
	}
	return connect, disconnect
}

func TestOpSysConnectEvents(t *testing.T) {
	w := newSysWorld(t)
	ours, ref := w.targets(t)
	events := map[string][2]map[string]any{}
	for _, tg := range []*sysTarget{ours, ref} {
		c, d := eventPair(t, tg.sys, w.a.pub, func() {
			nc := connectCreds(t, tg.url, w.aCreds, nats.Name("meter-me"))
			for range 3 {
				publish(t, nc, "work", []byte("12345"))
			}
			flush(t, nc)
			nc.Close()
		})
		events[tg.name] = [2]map[string]any{c, d}
	}
	c, d := events["contrail"][0], events["contrail"][1]
	if str(c, "type") != "io.nats.server.advisory.v1.client_connect" || str(d, "type") != "io.nats.server.advisory.v1.client_disconnect" {
		t.Errorf("event types %q, %q", c["type"], d["type"])
	}
	cl := obj(t, c, "client")
	if str(cl, "acc") != w.a.pub || str(cl, "user") != w.aUser || str(cl, "name") != "meter-me" ||
		str(cl, "jwt") != w.aUserJWT || str(cl, "name_tag") != "A" || str(cl, "issuer_key") != w.a.pub || str(cl, "lang") != "go" {
		t.Errorf("connect event client: %v", cl)
	}
	if str(obj(t, c, "server"), "id") == "" || str(c, "id") == "" || str(c, "id") == str(d, "id") {
		t.Errorf("connect event: server %v, ids %v / %v", c["server"], c["id"], d["id"])
	}
	sent, recv := obj(t, d, "sent"), obj(t, d, "received")
	if num(t, sent, "msgs") != 3 || num(t, sent, "bytes") != 15 || num(t, recv, "msgs") != 0 || str(d, "reason") != "Client Closed" {
		t.Errorf("disconnect event: sent %v received %v reason %q", sent, recv, d["reason"])
	}
	if str(obj(t, d, "client"), "stop") == "" || str(obj(t, d, "client"), "user") != w.aUser {
		t.Errorf("disconnect event client: %v", d["client"])
	}

	r := events["nats-server"]
	compareKeys(t, "connect event", c, r[0], []string{"type", "id", "timestamp", "server", "client"})
	compareKeys(t, "connect event client", cl, obj(t, r[0], "client"),
		[]string{"start", "host", "id", "acc", "user", "name", "lang", "ver", "jwt", "issuer_key", "name_tag", "kind", "client_type"})
	compareKeys(t, "disconnect event", d, r[1], []string{"type", "id", "timestamp", "server", "client", "sent", "received", "reason"})
	compareKeys(t, "disconnect event client", obj(t, d, "client"), obj(t, r[1], "client"), []string{"start", "stop", "acc", "user"})
	compareKeys(t, "event server", obj(t, c, "server"), obj(t, r[0], "server"), []string{"name", "host", "id", "ver", "jetstream", "seq", "time"})
}

// tenantActivity gives account A a connected user with a subscription,
// a stream with two messages, and returns the user's connection.
func tenantActivity(t *testing.T, url, creds string) *nats.Conn {
	t.Helper()
	nc := connectCreds(t, url, creds)
	subscribeSync(t, nc, "orders.watch")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := createStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	jsPublish(t, js, "orders.1", "one")
	jsPublish(t, js, "orders.2", "two")
	if _, err := s.CreateOrUpdateConsumer(ctxT(t), jetstream.ConsumerConfig{Durable: "SHIP", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	return nc
}

func TestOpSysAccountRequests(t *testing.T) {
	w := newSysWorld(t)
	ours, ref := w.targets(t)
	docs := map[string]map[string]map[string]any{}
	for _, tg := range []*sysTarget{ours, ref} {
		tenantActivity(t, tg.url, w.aCreds)
		connectCreds(t, tg.url, w.bCreds) // B has a connection but no streams
		acc := "$SYS.REQ.ACCOUNT." + w.a.pub + "."
		docs[tg.name] = map[string]map[string]any{
			"STATZ":   sysRequest(t, tg.sys, acc+"STATZ", ""),
			"CONNS":   sysRequest(t, tg.sys, acc+"CONNS", ""),
			"CONNZ":   sysRequest(t, tg.sys, acc+"CONNZ", `{"auth":true}`),
			"SUBSZ":   sysRequest(t, tg.sys, acc+"SUBSZ", ""),
			"INFO":    sysRequest(t, tg.sys, acc+"INFO", ""),
			"JSZ":     sysRequest(t, tg.sys, acc+"JSZ", `{"streams":true,"config":true}`),
			"CJSZ":    sysRequest(t, tg.sys, acc+"JSZ", `{"streams":true,"consumer":true}`),
			"PING":    sysRequest(t, tg.sys, "$SYS.REQ.ACCOUNT.PING.STATZ", `{"accounts":["`+w.a.pub+`"]}`),
			"UNKNOWN": sysRequest(t, tg.sys, "$SYS.REQ.ACCOUNT.ADQDZZMW4FSFDKYYFZX4GZ6Y4D5XSQLNBCYHTEFS6ZAM2WEPMXIXTBBN.INFO", ""),
			"BJSZ":    sysRequest(t, tg.sys, "$SYS.REQ.ACCOUNT."+w.b.pub+".JSZ", ""),
		}
	}
	o, r := docs["contrail"], docs["nats-server"]

	st := first(t, obj(t, o["STATZ"], "data"), "account_statz")
	if str(st, "acc") != w.a.pub || str(st, "name") != "A" || num(t, st, "conns") != 1 || num(t, st, "total_conns") != 1 ||
		num(t, st, "num_subscriptions") < 1 || num(t, obj(t, st, "received"), "msgs") < 2 || num(t, obj(t, st, "sent"), "msgs") < 2 {
		t.Errorf("STATZ: %v", st)
	}
	compareKeys(t, "STATZ", o["STATZ"], r["STATZ"], []string{"server", "data"})
	compareKeys(t, "STATZ data", obj(t, o["STATZ"], "data"), obj(t, r["STATZ"], "data"), []string{"server_id", "now", "account_statz"})
	compareKeys(t, "STATZ account", st, first(t, obj(t, r["STATZ"], "data"), "account_statz"),
		[]string{"acc", "name", "conns", "leafnodes", "total_conns", "num_subscriptions", "sent", "received", "slow_consumers"})

	if pings := obj(t, o["PING"], "data")["account_statz"].([]any); len(pings) != 1 {
		t.Errorf("PING.STATZ for A lists %d accounts", len(pings))
	}

	conns := o["CONNS"]
	if str(conns, "type") != "io.nats.server.advisory.v1.account_connections" || str(conns, "acc") != w.a.pub || num(t, conns, "conns") != 1 {
		t.Errorf("CONNS: %v", conns)
	}
	compareKeys(t, "CONNS", conns, r["CONNS"], []string{"type", "id", "timestamp", "server", "acc", "name", "conns", "total_conns"})

	cz := obj(t, o["CONNZ"], "data")
	if num(t, cz, "num_connections") != 1 {
		t.Fatalf("CONNZ for A: %v", cz)
	}
	c := first(t, cz, "connections")
	if str(c, "authorized_user") != w.aUser || str(c, "account") != w.a.pub || str(c, "name_tag") != "A" || str(c, "jwt") != w.aUserJWT {
		t.Errorf("CONNZ connection: %v", c)
	}
	compareKeys(t, "CONNZ connection", c, first(t, obj(t, r["CONNZ"], "data"), "connections"),
		[]string{"cid", "authorized_user", "account", "jwt", "issuer_key", "name_tag"})

	sz := obj(t, o["SUBSZ"], "data")
	found := false
	for _, s := range sz["subscriptions_list"].([]any) {
		found = found || str(s.(map[string]any), "subject") == "orders.watch"
	}
	if !found {
		t.Errorf("SUBSZ for A does not list orders.watch: %v", sz)
	}
	compareKeys(t, "SUBSZ", sz, obj(t, r["SUBSZ"], "data"), []string{"server_id", "num_subscriptions", "subscriptions_list"})

	info := obj(t, o["INFO"], "data")
	if str(info, "account_name") != w.a.pub || str(obj(t, info, "decoded_jwt"), "name") != "A" || str(info, "name_tag") != "A" ||
		info["jetstream_enabled"] != true || num(t, info, "client_connections") != 1 || str(info, "jwt") == "" {
		t.Errorf("INFO: %v", info)
	}
	compareKeys(t, "INFO", info, obj(t, r["INFO"], "data"), []string{"account_name", "expired", "complete",
		"jetstream_enabled", "client_connections", "subscriptions", "jwt", "issuer_key", "name_tag", "decoded_jwt", "sublist_stats"})

	jz := obj(t, o["JSZ"], "data")
	sd := first(t, jz, "stream_detail")
	if str(jz, "id") != w.a.pub || str(jz, "name") != "A" || num(t, jz, "storage") <= 0 ||
		str(sd, "name") != "ORDERS" || num(t, obj(t, sd, "state"), "messages") != 2 || sd["config"] == nil {
		t.Errorf("JSZ: %v", jz)
	}
	// As in nats-server, reserved_* are the account's untiered limits.
	if num(t, jz, "reserved_memory") != 64<<20 || num(t, jz, "reserved_storage") != 256<<20 {
		t.Errorf("JSZ reserved %v / %v, want the account JWT's limits", jz["reserved_memory"], jz["reserved_storage"])
	}
	compareKeys(t, "JSZ", jz, obj(t, r["JSZ"], "data"), []string{"name", "id", "memory", "storage", "reserved_memory",
		"reserved_storage", "accounts", "ha_assets", "api", "stream_detail"})
	compareKeys(t, "JSZ stream", sd, first(t, obj(t, r["JSZ"], "data"), "stream_detail"), []string{"name", "created", "config", "state"})
	cd := first(t, first(t, obj(t, o["CJSZ"], "data"), "stream_detail"), "consumer_detail")
	compareKeys(t, "JSZ consumer", cd, first(t, first(t, obj(t, r["CJSZ"], "data"), "stream_detail"), "consumer_detail"),
		[]string{"stream_name", "name", "created", "delivered", "ack_floor", "num_ack_pending", "num_redelivered", "num_waiting", "num_pending"})
	if str(cd, "name") != "SHIP" || num(t, cd, "num_pending") != 2 || cd["config"] != nil {
		t.Errorf("JSZ consumer detail: %v", cd)
	}
	if bj := obj(t, o["BJSZ"], "data"); bj["stream_detail"] != nil || str(bj, "name") != "B" {
		t.Errorf("JSZ for B shows A's streams: %v", bj)
	}

	for name, doc := range map[string]map[string]any{"ours": o["UNKNOWN"], "nats-server": r["UNKNOWN"]} {
		if doc["data"] != nil || num(t, obj(t, doc, "error"), "code") != 500 {
			t.Errorf("%s: INFO of an unknown account: %v", name, doc)
		}
	}
}

func TestOpSysTenantCannotReachSystemServices(t *testing.T) {
	w := newSysWorld(t)
	n := w.startOpNode(t)
	sys := connectCreds(t, n.URL, w.sysCreds)
	tenantActivity(t, n.URL, w.aCreds)
	bob := connectCreds(t, n.URL, w.bCreds)

	for _, subj := range []string{
		"$SYS.REQ.ACCOUNT." + w.a.pub + ".STATZ", "$SYS.REQ.ACCOUNT." + w.a.pub + ".JSZ",
		"$SYS.REQ.ACCOUNT." + w.a.pub + ".INFO", "$SYS.REQ.ACCOUNT." + w.a.pub + ".CONNZ",
		"$SYS.REQ.ACCOUNT." + w.a.pub + ".CONNS", "$SYS.REQ.ACCOUNT." + w.a.pub + ".SUBSZ",
		"$SYS.REQ.ACCOUNT." + w.b.pub + ".STATZ",
		"$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.ACCOUNT." + w.a.pub + ".CLAIMS.LOOKUP",
	} {
		if _, err := bob.Request(subj, nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("B requesting %s: %v, want no responders", subj, err)
		}
	}

	// What B may ask about itself covers B alone, whatever it names.
	for _, body := range []string{"", `{"accounts":["` + w.a.pub + `"]}`} {
		stz := sysRequest(t, bob, "$SYS.REQ.ACCOUNT.PING.STATZ", body)
		list := obj(t, stz, "data")["account_statz"].([]any)
		if len(list) != 1 || str(list[0].(map[string]any), "acc") != w.b.pub {
			t.Errorf("B's PING.STATZ (body %q): %v", body, stz)
		}
	}
	connz := obj(t, sysRequest(t, bob, "$SYS.REQ.ACCOUNT.PING.CONNZ", `{"acc":"`+w.a.pub+`","auth":true}`), "data")
	for _, c := range connz["connections"].([]any) {
		if acc := str(c.(map[string]any), "account"); acc != w.b.pub {
			t.Errorf("B's PING.CONNZ shows a connection of %s", acc)
		}
	}
	if num(t, connz, "num_connections") != 1 {
		t.Errorf("B's PING.CONNZ: %v", connz)
	}

	// B's $SYS subjects are its own: B listening to all of them hears the
	// marker it publishes itself, never the system events of A's clients.
	spy := subscribeSync(t, bob, "$SYS.>")
	flush(t, bob)
	c, _ := eventPair(t, sys, w.a.pub, func() { connectCreds(t, n.URL, w.aCreds).Close() })
	if str(obj(t, c, "client"), "acc") != w.a.pub {
		t.Fatalf("connect event: %v", c)
	}
	publish(t, bob, "$SYS.MARKER", []byte("mine"))
	if m := nextMsg(t, spy); m.Subject != "$SYS.MARKER" {
		t.Fatalf("B's $SYS.> subscription received %s: %s", m.Subject, m.Data)
	}
}

func TestOpSysUserInfo(t *testing.T) {
	w := newSysWorld(t)
	limited, upub := w.a.user("limited", func(uc *jwt.UserClaims) {
		uc.Permissions.Pub.Allow = jwt.StringList{"orders.>", "$SYS.REQ.USER.INFO", "$JS.API.>"}
		uc.Permissions.Sub.Allow = jwt.StringList{"_INBOX.>"}
		uc.Permissions.Resp = &jwt.ResponsePermission{MaxMsgs: 1}
		uc.Expires = time.Now().Add(time.Hour).Unix()
	})
	ours, ref := w.targets(t)
	replies := map[string]map[string]any{}
	for _, tg := range []*sysTarget{ours, ref} {
		replies[tg.name] = sysRequest(t, connectCreds(t, tg.url, limited), "$SYS.REQ.USER.INFO", "")
		replies[tg.name+" sys"] = sysRequest(t, tg.sys, "$SYS.REQ.USER.INFO", "")
	}
	o, r := obj(t, replies["contrail"], "data"), obj(t, replies["nats-server"], "data")
	for k, want := range map[string]string{"user": upub, "account": w.a.pub, "account_name": "A", "user_name": "limited"} {
		if str(o, k) != want || str(r, k) != want {
			t.Errorf("user info %s: ours %q, nats-server %q, want %q", k, o[k], r[k], want)
		}
	}
	if exp := num(t, o, "expires"); exp <= float64(50*time.Minute) || exp > float64(time.Hour) {
		t.Errorf("user info expires %v", o["expires"])
	}
	perms, rperms := obj(t, o, "permissions"), obj(t, r, "permissions")
	if canonJSON(perms["responses"]) != canonJSON(rperms["responses"]) {
		t.Errorf("responses: ours %v, nats-server %v", perms["responses"], rperms["responses"])
	}
	for _, dir := range []string{"publish", "subscribe"} {
		if got, want := sortedAllow(t, obj(t, perms, dir)), sortedAllow(t, obj(t, rperms, dir)); got != want {
			t.Errorf("%s permissions: ours %s, nats-server %s", dir, got, want)
		}
	}
	compareKeys(t, "user info", o, r, []string{"user", "account", "account_name", "user_name", "permissions", "expires"})
	compareKeys(t, "user info reply", replies["contrail"], replies["nats-server"], []string{"server", "data"})
	if sys := obj(t, replies["contrail sys"], "data"); str(sys, "account") != w.sys.pub || str(sys, "user") != w.sysUser {
		t.Errorf("system user info: %v", sys)
	}
}

// sortedAllow renders a permission's allow list in order.
func sortedAllow(t *testing.T, p map[string]any) string {
	t.Helper()
	var out []string
	list, _ := p["allow"].([]any)
	for _, s := range list {
		out = append(out, s.(string))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestOpSysUserInfoOpenMode(t *testing.T) {
	n := startNode(t, nodeOpts{})
	ref := startNatsServer(t)
	for _, url := range []string{n.URL, ref.URL} {
		msg, err := connect(t, url).Request("$SYS.REQ.USER.INFO", nil, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		var reply struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(msg.Data, &reply); err != nil || str(reply.Data, "account") != "$G" {
			t.Errorf("%s: user info in open mode: %s (%v)", url, msg.Data, err)
		}
	}
}

func TestOpSysAccountInfoCLI(t *testing.T) {
	w := newSysWorld(t)
	n := w.startOpNode(t)
	tenantActivity(t, n.URL, w.aCreds)
	stats, err := exec.Command(natsCLI(t), "--creds", w.aCreds, "-s", n.URL, "account", "report", "statistics").CombinedOutput()
	if err != nil || !strings.Contains(string(stats), "Server Statistics") {
		t.Errorf("nats account report statistics: %v\n%s", err, stats)
	}
	out, err := exec.Command(natsCLI(t), "--creds", w.aCreds, "-s", n.URL, "account", "info").CombinedOutput()
	if err != nil {
		t.Fatalf("nats account info: %v\n%s", err, out)
	}
	// The system user lists the servers ($SYS.REQ.SERVER.PING).
	list, err := exec.Command(natsCLI(t), "--creds", w.sysCreds, "-s", n.URL, "server", "list").CombinedOutput()
	if id := connectCreds(t, n.URL, w.sysCreds).ConnectedServerId(); err != nil || !strings.Contains(string(list), id) {
		t.Errorf("nats server list (%v) does not show %s:\n%s", err, id, list)
	}
	// The limits shown are the account JWT's (jsLimits).
	for _, want := range []string{w.aUser, "A (" + w.a.pub + ")", "JetStream Account Information", "Streams: 1",
		"Memory: 0 B of 64 MiB", "Storage: 54 B of 256 MiB"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("nats account info does not show %q:\n%s", want, out)
		}
	}
}

func TestOpSysServerRequests(t *testing.T) {
	w := newSysWorld(t)
	ours, ref := w.targets(t)
	docs := map[string]map[string]map[string]any{}
	for _, tg := range []*sysTarget{ours, ref} {
		tenantActivity(t, tg.url, w.aCreds)
		id := tg.sys.ConnectedServerId()
		docs[tg.name] = map[string]map[string]any{
			"PING":     sysRequest(t, tg.sys, "$SYS.REQ.SERVER.PING", ""),
			"VARZ":     sysRequest(t, tg.sys, "$SYS.REQ.SERVER.PING.VARZ", ""),
			"HEALTHZ":  sysRequest(t, tg.sys, "$SYS.REQ.SERVER."+id+".HEALTHZ", ""),
			"ACCOUNTZ": sysRequest(t, tg.sys, "$SYS.REQ.SERVER."+id+".ACCOUNTZ", `{"account":"`+w.a.pub+`"}`),
			"JSZ":      sysRequest(t, tg.sys, "$SYS.REQ.SERVER."+id+".JSZ", `{"accounts":true}`),
			"CONNZ":    sysRequest(t, tg.sys, "$SYS.REQ.SERVER.PING.CONNZ", ""),
		}
	}
	o, r := docs["contrail"], docs["nats-server"]
	compareKeys(t, "server ping", o["PING"], r["PING"], []string{"server", "statsz"})
	compareKeys(t, "server ping statsz", obj(t, o["PING"], "statsz"), obj(t, r["PING"], "statsz"),
		[]string{"start", "mem", "cores", "cpu", "connections", "total_connections", "active_accounts", "subscriptions", "sent", "received", "slow_consumers"})
	if st := obj(t, o["PING"], "statsz"); num(t, st, "connections") != 2 || num(t, st, "active_accounts") != 2 {
		t.Errorf("statsz: %v", st)
	}
	if v := obj(t, o["VARZ"], "data"); str(v, "server_id") != str(obj(t, o["VARZ"], "server"), "id") ||
		v["auth_required"] != true || num(t, v, "subscriptions") < 1 {
		t.Errorf("VARZ: %v", v)
	}
	if h := obj(t, o["HEALTHZ"], "data"); str(h, "status") != "ok" {
		t.Errorf("HEALTHZ: %v", h)
	}
	compareKeys(t, "HEALTHZ", obj(t, o["HEALTHZ"], "data"), obj(t, r["HEALTHZ"], "data"), []string{"status", "status_code"})
	az := obj(t, o["ACCOUNTZ"], "data")
	if str(az, "system_account") != w.sys.pub || str(obj(t, az, "account_detail"), "account_name") != w.a.pub {
		t.Errorf("ACCOUNTZ: %v", az)
	}
	compareKeys(t, "ACCOUNTZ", az, obj(t, r["ACCOUNTZ"], "data"), []string{"server_id", "now", "system_account", "account_detail"})
	compareKeys(t, "JSZ", obj(t, o["JSZ"], "data"), obj(t, r["JSZ"], "data"), []string{"server_id", "now", "config",
		"memory", "storage", "api", "streams", "consumers", "messages", "bytes", "account_details", "total"})
	compareKeys(t, "JSZ account", first(t, obj(t, o["JSZ"], "data"), "account_details"),
		first(t, obj(t, r["JSZ"], "data"), "account_details"), []string{"name", "id", "memory", "storage", "api"})
	if cz := obj(t, o["CONNZ"], "data"); num(t, cz, "num_connections") != 2 {
		t.Errorf("CONNZ from the system account lists %v connections, want both", cz["num_connections"])
	}
}

func TestOpSysMonitoringEndpoints(t *testing.T) {
	w := newSysWorld(t)
	ours, ref := w.targets(t)
	docs := map[string]map[string]map[string]any{}
	for _, tg := range []*sysTarget{ours, ref} {
		tenantActivity(t, tg.url, w.aCreds)
		d := map[string]map[string]any{}
		for name, path := range map[string]string{
			"accountz":  "/accountz",
			"detail":    "/accountz?acc=" + w.a.pub,
			"accstatz":  "/accstatz",
			"jsz":       "/jsz?accounts=true",
			"connz":     "/connz?acc=" + w.a.pub + "&auth=true",
			"connz all": "/connz",
		} {
			var m map[string]any
			getJSON(t, tg.monURL+path, &m)
			d[name] = m
		}
		docs[tg.name] = d
	}
	o, r := docs["contrail"], docs["nats-server"]

	list := strings.Join(anyStrings(o["accountz"]["accounts"]), ",")
	if !strings.Contains(list, w.a.pub) || !strings.Contains(list, w.sys.pub) || str(o["accountz"], "system_account") != w.sys.pub {
		t.Errorf("/accountz: %v", o["accountz"])
	}
	compareKeys(t, "/accountz", o["accountz"], r["accountz"], []string{"server_id", "now", "system_account", "accounts"})
	detail := obj(t, o["detail"], "account_detail")
	if str(detail, "account_name") != w.a.pub || str(detail, "name_tag") != "A" || num(t, detail, "client_connections") != 1 {
		t.Errorf("/accountz?acc: %v", detail)
	}
	compareKeys(t, "/accountz?acc", detail, obj(t, r["detail"], "account_detail"), []string{"account_name", "jetstream_enabled",
		"client_connections", "subscriptions", "jwt", "decoded_jwt", "sublist_stats"})

	statz := map[string]map[string]any{}
	for _, a := range o["accstatz"]["account_statz"].([]any) {
		statz[str(a.(map[string]any), "acc")] = a.(map[string]any)
	}
	if a := statz[w.a.pub]; a == nil || num(t, a, "conns") != 1 {
		t.Errorf("/accstatz: %v", o["accstatz"])
	}
	compareKeys(t, "/accstatz", o["accstatz"], r["accstatz"], []string{"server_id", "now", "account_statz"})

	var jd map[string]any
	for _, d := range o["jsz"]["account_details"].([]any) {
		if str(d.(map[string]any), "id") == w.a.pub {
			jd = d.(map[string]any)
		}
	}
	if jd == nil || str(jd, "name") != "A" || num(t, jd, "storage") <= 0 {
		t.Fatalf("/jsz?accounts=true: %v", o["jsz"])
	}
	compareKeys(t, "/jsz account", jd, first(t, r["jsz"], "account_details"), []string{"name", "id", "memory", "storage", "api"})

	c := first(t, o["connz"], "connections")
	if num(t, o["connz"], "num_connections") != 1 || str(c, "authorized_user") != w.aUser || str(c, "account") != w.a.pub ||
		str(c, "name_tag") != "A" {
		t.Errorf("/connz?acc&auth: %v", o["connz"])
	}
	compareKeys(t, "/connz auth", c, first(t, r["connz"], "connections"), []string{"authorized_user", "account", "jwt", "issuer_key", "name_tag"})
	if num(t, o["connz all"], "num_connections") != 2 {
		t.Errorf("/connz lists %v connections, want the tenant's and the system user's", o["connz all"]["num_connections"])
	}
}

// anyStrings reads a JSON array of strings.
func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}

// TestOpSysStatszHeartbeat: a server announces its statistics on
// $SYS.SERVER.<id>.STATSZ unasked, as `nats server watch` expects; the
// shape is nats-server's.
func TestOpSysStatszHeartbeat(t *testing.T) {
	w := newSysWorld(t)
	ours, ref := w.targets(t)
	docs := map[string]map[string]any{}
	for _, tg := range []*sysTarget{ours, ref} {
		sub := subscribeSync(t, tg.sys, "$SYS.SERVER.*.STATSZ")
		m, err := sub.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("%s: no statsz heartbeat: %v", tg.name, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(m.Data, &doc); err != nil {
			t.Fatalf("%s: statsz: %v: %s", tg.name, err, m.Data)
		}
		if id := str(obj(t, doc, "server"), "id"); !strings.HasSuffix(strings.TrimSuffix(m.Subject, ".STATSZ"), id) {
			t.Errorf("%s: statsz on %s from server %s", tg.name, m.Subject, id)
		}
		docs[tg.name] = doc
	}
	compareKeys(t, "statsz heartbeat", docs["contrail"], docs["nats-server"], []string{"server", "statsz"})
}
