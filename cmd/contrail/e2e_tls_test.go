package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and
// a client certificate, as PEM files in a directory.
type testPKI struct {
	Dir                  string
	CAFile               string
	CertFile, KeyFile    string // server
	ClientCert, ClientKy string
	// OtherCA is a CA that signed nothing the node trusts.
	OtherCAFile string
	OtherCert   string
	OtherKey    string
	pool        *x509.CertPool
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{Dir: dir}
	caCert, caKey := makeCA(t, "contrail e2e CA")
	p.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)

	srvDER, srvKey := makeLeaf(t, caCert, caKey, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	p.CertFile = writePEM(t, dir, "server.pem", "CERTIFICATE", srvDER)
	p.KeyFile = writeKey(t, dir, "server-key.pem", srvKey)

	cliDER, cliKey := makeLeaf(t, caCert, caKey, "e2e-client", x509.ExtKeyUsageClientAuth)
	p.ClientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	p.ClientKy = writeKey(t, dir, "client-key.pem", cliKey)

	otherCA, otherKey := makeCA(t, "untrusted CA")
	p.OtherCAFile = writePEM(t, dir, "other-ca.pem", "CERTIFICATE", otherCA.Raw)
	oDER, oKey := makeLeaf(t, otherCA, otherKey, "intruder", x509.ExtKeyUsageClientAuth)
	p.OtherCert = writePEM(t, dir, "other.pem", "CERTIFICATE", oDER)
	p.OtherKey = writeKey(t, dir, "other-key.pem", oKey)
	return p
}

func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func makeCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// makeLeaf issues a certificate; name is an IP SAN if it parses as one.
func makeLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage ...x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeKey(t testing.TB, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name, "EC PRIVATE KEY", der)
}

// tlsPubSub proves a TLS connection carries messages both ways.
func tlsPubSub(t testing.TB, nc *nats.Conn) {
	t.Helper()
	if !nc.TLSRequired() {
		t.Error("nats.go does not see tls_required")
	}
	state, err := nc.TLSConnectionState()
	if err != nil {
		t.Fatalf("connection is not TLS: %v", err)
	}
	if !state.HandshakeComplete {
		t.Fatal("TLS handshake not complete")
	}
	roundTrip(t, nc)
}

func TestTLSFromFlags(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	n := startNode(t, nodeOpts{tls: true, args: []string{"--tls-cert", pki.CertFile, "--tls-key", pki.KeyFile}})

	t.Run("INFO says tls_required", func(t *testing.T) {
		c := dialRaw(t, n.NatsAddr)
		if c.info["tls_required"] != true {
			t.Errorf("INFO tls_required = %v, want true", c.info["tls_required"])
		}
	})

	t.Run("nats.go with RootCAs", func(t *testing.T) {
		nc := connect(t, n.URL, nats.RootCAs(pki.CAFile), nats.Name("tls-client"))
		tlsPubSub(t, nc)
		// And with a tls.Config of its own, on a nats:// URL: the client
		// upgrades because INFO requires it.
		nc2 := connect(t, "nats://"+n.NatsAddr, nats.Secure(&tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}))
		tlsPubSub(t, nc2)
		sub := subscribeSync(t, nc2, "tls.cross")
		publish(t, nc, "tls.cross", []byte("across"))
		flush(t, nc)
		if m := nextMsg(t, sub); string(m.Data) != "across" {
			t.Fatalf("got %q", m.Data)
		}
		c := connByName(t, n, "tls-client")
		if c.TLSVer == "" {
			t.Error("/connz has no tls_version for a TLS client")
		}
	})

	t.Run("untrusted server certificate", func(t *testing.T) {
		if _, err := dial(t, n.URL); err == nil {
			t.Fatal("nats.go connected without trusting the node's CA")
		} else {
			t.Logf("without the CA: %v", err)
		}
	})

	t.Run("plain client refused", func(t *testing.T) {
		c := dialRaw(t, n.NatsAddr)
		c.send("CONNECT {\"verbose\":false}\r\nPING\r\n")
		for _, l := range c.expectClosed(ioTimeout) {
			if l == "PONG" {
				t.Fatal("a plain-text client was served on a TLS node")
			}
		}
	})
}

func TestTLSVerifyClientCerts(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	n := startNode(t, nodeOpts{tls: true, config: `
tls {
  cert_file: "` + pki.CertFile + `"
  key_file: "` + pki.KeyFile + `"
  ca_file: "` + pki.CAFile + `"
  verify: true
}
`})
	c := dialRaw(t, n.NatsAddr)
	if c.info["tls_required"] != true || c.info["tls_verify"] != true {
		t.Errorf("INFO tls_required=%v tls_verify=%v, want both true", c.info["tls_required"], c.info["tls_verify"])
	}

	if _, err := dial(t, n.URL, nats.RootCAs(pki.CAFile)); err == nil {
		t.Error("connected without a client certificate while verify is on")
	} else {
		t.Logf("without a client certificate: %v", err)
	}
	if _, err := dial(t, n.URL, nats.RootCAs(pki.CAFile), nats.ClientCert(pki.OtherCert, pki.OtherKey)); err == nil {
		t.Error("connected with a client certificate from an untrusted CA")
	} else {
		t.Logf("with an untrusted client certificate: %v", err)
	}
	nc := connect(t, n.URL, nats.RootCAs(pki.CAFile), nats.ClientCert(pki.ClientCert, pki.ClientKy))
	tlsPubSub(t, nc)
}

func TestTLSHandshakeFirst(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	n := startNode(t, nodeOpts{tls: true, config: `
tls {
  cert_file: "` + pki.CertFile + `"
  key_file: "` + pki.KeyFile + `"
  handshake_first: true
}
`})
	nc := connect(t, n.URL, nats.RootCAs(pki.CAFile), nats.TLSHandshakeFirst())
	tlsPubSub(t, nc)

	// The node speaks TLS before anything else: a raw TLS client reads
	// INFO only after its handshake.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: ioTimeout}, "tcp", n.NatsAddr, &tls.Config{RootCAs: pki.pool})
	if err != nil {
		t.Fatalf("TLS-first dial: %v", err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(ioTimeout))
	buf := make([]byte, 5)
	if _, err := conn.Read(buf); err != nil || string(buf) != "INFO " {
		t.Fatalf("after the handshake the node sent %q (%v), want INFO", buf, err)
	}

	// A client that waits for INFO in plain text never gets it.
	if _, err := dial(t, n.URL, nats.RootCAs(pki.CAFile), nats.Timeout(time.Second)); err == nil {
		t.Error("a client without TLS-first connected to a handshake_first node")
	} else {
		t.Logf("without TLS-first: %v", err)
	}
}
