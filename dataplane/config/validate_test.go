package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(o *Options)
		want   []string // each must appear; nil means valid
	}{
		{"defaults", func(o *Options) {}, nil},
		{"random ports", func(o *Options) { o.Port, o.HTTPPort = -1, -1 }, nil},
		{"port too big", func(o *Options) { o.Port = 70000 }, []string{"port: 70000 is out of range [-1, 65535]"}},
		{"port too small", func(o *Options) { o.Port = -2 }, []string{"port: -2 is out of range"}},
		{"http_port", func(o *Options) { o.HTTPPort = 65536 }, []string{"http_port: 65536 is out of range"}},
		{"max_payload zero", func(o *Options) { o.MaxPayload = 0 }, []string{"max_payload: 0 is out of range [1, 67108864]"}},
		{"max_payload too big", func(o *Options) { o.MaxPayload = 64<<20 + 1; o.MaxPending = 1 << 30 }, []string{"max_payload: 67108865 is out of range"}},
		{"max_payload at limit", func(o *Options) { o.MaxPayload = 64 << 20 }, nil},
		{"max_payload over max_pending", func(o *Options) { o.MaxPayload = 2 << 20; o.MaxPending = 1 << 20 }, []string{"max_payload (2097152) cannot be larger than max_pending (1048576)"}},
		{"max_control_line", func(o *Options) { o.MaxControlLine = 0 }, []string{"max_control_line: 0 must be positive"}},
		{"max_account_subscriptions", func(o *Options) { o.MaxAccountSubs = -1 }, []string{"max_account_subscriptions: -1 must be positive"}},
		{"max_connections", func(o *Options) { o.MaxConnections = -1 }, []string{"max_connections: -1 must be positive"}},
		{"max_pending", func(o *Options) { o.MaxPending = 0 }, []string{"max_pending: 0 must be positive"}},
		{"ping_interval", func(o *Options) { o.PingInterval = 0 }, []string{"ping_interval: 0s must be positive"}},
		{"ping_max", func(o *Options) { o.PingMax = 0 }, []string{"ping_max: 0 must be at least 1"}},
		{"write_deadline", func(o *Options) { o.WriteDeadline = -time.Second }, []string{"write_deadline: -1s must be positive"}},
		{"server_name", func(o *Options) { o.ServerName = "a b" }, []string{`server_name: "a b" cannot contain white space`}},
		{"tls ok", func(o *Options) { o.TLS = &TLSOptions{CertFile: "c", KeyFile: "k"} }, nil},
		{"tls empty", func(o *Options) { o.TLS = &TLSOptions{} }, []string{"tls: cert_file and key_file are required"}},
		{"tls cert without key", func(o *Options) { o.TLS = &TLSOptions{CertFile: "c"} }, []string{"tls: cert_file is set but key_file is not"}},
		{"tls key without cert", func(o *Options) { o.TLS = &TLSOptions{KeyFile: "k"} }, []string{"tls: key_file is set but cert_file is not"}},
		{"tls negative times", func(o *Options) {
			o.TLS = &TLSOptions{CertFile: "c", KeyFile: "k", Timeout: -1, HandshakeFirstFallback: -1}
		}, []string{"tls.timeout: -1ns cannot be negative", "tls.handshake_first: fallback -1ns cannot be negative"}},
		{"jetstream ok", func(o *Options) { o.JetStream = &JetStreamOptions{Enabled: true, MaxMemory: -1, MaxStore: -1} }, nil},
		{"jetstream bad", func(o *Options) {
			o.JetStream = &JetStreamOptions{MaxMemory: -2, MaxStore: -5, SyncInterval: -1, Domain: "a b", MaxBufferedMsgs: -1, NodeMaxBufferedSize: -3,
				StoreCompression: "zstd"}
		}, []string{
			`jetstream.store_compression: "zstd" is not none or snappy`,
			"jetstream.max_memory_store: -2 cannot be negative",
			"jetstream.max_file_store: -5 cannot be negative",
			"jetstream.sync_interval: -1ns cannot be negative",
			"jetstream.max_buffered_msgs: -1 cannot be negative",
			"jetstream.node_max_buffered_size: -3 cannot be negative",
			`jetstream.domain: "a b" cannot contain`,
		}},
		{"batch limits negative", func(o *Options) {
			o.JetStream = &JetStreamOptions{Batch: BatchLimits{MaxInflightPerStream: -1, MaxMsgs: -2, Timeout: -1}}
		}, []string{
			"jetstream.limits.batch.max_inflight_per_stream: -1 cannot be negative",
			"jetstream.limits.batch.max_msgs: -2 cannot be negative",
			"jetstream.limits.batch.timeout: -1ns cannot be negative",
		}},
		{"everything at once", func(o *Options) {
			o.Port, o.MaxPayload, o.PingMax = 99999, -1, 0
			o.TLS = &TLSOptions{CertFile: "c"}
		}, []string{"port: 99999", "max_payload: -1", "ping_max: 0", "tls: cert_file is set but key_file is not"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Default()
			tt.modify(o)
			err := o.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed, want %q", tt.want)
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	var o *Options
	if err := o.Validate(); err == nil {
		t.Fatal("nil options validated")
	}
}

// writeCert writes a self-signed ECDSA certificate and key as PEM files.
func writeCert(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IsCA:         true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, "server")
	ca, _ := writeCert(t, dir, "ca")
	notPEM := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}

	o := Default()
	if cfg, err := o.TLSConfig(); cfg != nil || err != nil {
		t.Fatalf("no tls block: got %v, %v; want nil, nil", cfg, err)
	}

	o.TLS = &TLSOptions{CertFile: cert, KeyFile: key}
	cfg, err := o.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || len(cfg.Certificates) != 1 || cfg.ClientAuth != tls.NoClientCert || cfg.ClientCAs != nil {
		t.Errorf("plain TLS config: %+v", cfg)
	}

	o.TLS = &TLSOptions{CertFile: cert, KeyFile: key, CAFile: ca, Verify: true}
	if cfg, err = o.TLSConfig(); err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Errorf("verify TLS config: ClientAuth %v, ClientCAs %v", cfg.ClientAuth, cfg.ClientCAs)
	}

	bad := []struct {
		name string
		tls  TLSOptions
		want string
	}{
		{"no key", TLSOptions{CertFile: cert}, "cert_file and key_file are required"},
		{"missing cert", TLSOptions{CertFile: filepath.Join(dir, "none.pem"), KeyFile: key}, "loading cert_file"},
		{"key mismatch", TLSOptions{CertFile: cert, KeyFile: filepath.Join(dir, "ca-key.pem")}, "loading cert_file"},
		{"missing ca", TLSOptions{CertFile: cert, KeyFile: key, CAFile: filepath.Join(dir, "none.pem")}, "reading ca_file"},
		{"junk ca", TLSOptions{CertFile: cert, KeyFile: key, CAFile: notPEM}, "holds no PEM certificates"},
	}
	for _, tt := range bad {
		o.TLS = &tt.tls
		if _, err := o.TLSConfig(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}
