package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClusterBlock(t *testing.T) {
	src := `
server_name: n1
cluster {
  name: east
  listen: "127.0.0.1:6222"
  routes: [
    "nats-route://127.0.0.1:6223"
    "n3=nats-route://127.0.0.1:6224"
  ]
}
`
	o, err := Parse([]byte(src), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := &ClusterOptions{Name: "east", Host: "127.0.0.1", Port: 6222,
		Peers: []Peer{{Addr: "127.0.0.1:6223"}, {ID: "n3", Addr: "127.0.0.1:6224"}}}
	if !reflect.DeepEqual(o.Cluster, want) {
		t.Errorf("cluster = %+v, want %+v", o.Cluster, want)
	}
	if o.NodeID() != "n1" {
		t.Errorf("node id %q", o.NodeID())
	}
}

// TestClusterAuthorization: the cluster block's authorization becomes
// the cluster secret, and routes may carry the same pair, as a
// nats-server config with route credentials does.
func TestClusterAuthorization(t *testing.T) {
	src := `
cluster {
  port: 6222
  authorization { user: route, password: s3cr3t }
  routes: [ "nats-route://route:s3cr3t@127.0.0.1:6223", "nats-route://127.0.0.1:6224" ]
}
`
	o, err := Parse([]byte(src), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Cluster.Secret != "route:s3cr3t" {
		t.Errorf("secret %q", o.Cluster.Secret)
	}
	if got := fmt.Sprint(o.Cluster.LogValue()); strings.Contains(got, "s3cr3t") {
		t.Errorf("the log form shows the secret: %s", got)
	}
}

// TestClusterTLSBlock: nats-server's cluster tls block, and the one
// configuration it builds for both ends of the port.
func TestClusterTLSBlock(t *testing.T) {
	o, err := Parse([]byte(`cluster { tls { cert_file: "c.pem", key_file: "k.pem", ca_file: "ca.pem", verify: true, timeout: 3 } }`), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := TLSOptions{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", Verify: true, Timeout: 3 * time.Second}
	if o.Cluster.TLS == nil || *o.Cluster.TLS != want {
		t.Fatalf("cluster tls %+v, want %+v", o.Cluster.TLS, want)
	}
	if _, err := o.Cluster.TLSConfig(); err == nil || !strings.Contains(err.Error(), "cluster.tls") {
		t.Fatalf("missing files: %v", err)
	}
	if cfg, err := (&ClusterOptions{}).TLSConfig(); cfg != nil || err != nil {
		t.Fatalf("no tls block: %v, %v", cfg, err)
	}
}

func TestClusterDefaults(t *testing.T) {
	o, err := Parse([]byte("cluster { port: 6222 }"), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	if o.Cluster.Name != DefaultClusterName || o.Cluster.Addr() != "0.0.0.0:6222" {
		t.Errorf("cluster = %+v", o.Cluster)
	}
}

func TestClusterBad(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{`cluster { routes: ["http://h:1"] }`, `scheme "http"`},
		{`cluster { routes: ["nats-route://u:p@h:1"] }`, `must be the cluster block's authorization`},
		{`cluster { authorization { user: u, password: p }, routes: ["nats-route://u:q@h:1"] }`, `must be the cluster block's authorization`},
		{`cluster { authorization { user: u } }`, `needs user and password`},
		{`cluster { authorization { token: t } }`, `"cluster.authorization.token" is not supported`},
		{`cluster { authorization { users: [ { user: a, password: b } ] } }`, `"cluster.authorization.users" is not supported`},
		{`cluster { authorization { usr: u, password: p } }`, `unknown key "cluster.authorization.usr"`},
		{`cluster { routes: ["nats-route://h"] }`, `not host:port`},
		{`cluster { pool_size: 3 }`, `"cluster.pool_size" is not supported`},
		{`cluster { tls { cert_file: c, key_file: k, verify_and_map: true } }`, `"cluster.tls.verify_and_map" is not supported`},
		{`cluster { tls { cert_file: c, key_file: k, cipher_suites: [] } }`, `"cluster.tls.cipher_suites" is not supported`},
		{`cluster { tls { cert_file: c } }`, `cluster.tls: cert_file is set but key_file is not`},
		{`cluster { tls { cert_file: c, key_file: k, timeout: -1 } }`, `cluster.tls.timeout`},
		{`cluster { name: "a b" }`, `cluster name`},
		{`server_name: n9
cluster { routes: ["n1=nats-route://h:1", "n2=nats-route://h:2"] }`, `this node "n9" is not among them`},
		{`cluster { routes: ["n1=nats-route://h:1"] }`, `needs a name`},
		{`server_name: n1
cluster { routes: ["n1=nats-route://h:1", "n1=nats-route://h:2"] }`, `"n1" appears twice`},
		{`cluster { routes: ["nats-route://h:1", "nats-route://h:1"] }`, `"h:1" appears twice`},
	} {
		o, err := Parse([]byte(tt.src), "test.conf")
		if err == nil {
			err = o.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.src, err, tt.want)
		}
	}
}

func TestParsePeers(t *testing.T) {
	p, err := ParsePeers("n1=127.0.0.1:1,n2=127.0.0.1:2, n3=h:3")
	if err != nil {
		t.Fatal(err)
	}
	want := []Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}, {ID: "n3", Addr: "h:3"}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("peers = %v", p)
	}
	for _, bad := range []string{"", "n1", "n1=", "=h:1", "n1=h", "n1=h:0", "n1=h:x"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
