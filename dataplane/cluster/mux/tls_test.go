package mux

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"testing"
	"time"
)

// testCA issues certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// node is a certificate for 127.0.0.1 good for both ends of a
// connection, as every node of a cluster is.
func (ca *testCA) node(t *testing.T, serial int64) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// clusterTLS is the configuration a node of ca's cluster runs with.
func (ca *testCA) clusterTLS(t *testing.T, serial int64) *TLS {
	return &TLS{Config: &tls.Config{Certificates: []tls.Certificate{ca.node(t, serial)}, RootCAs: ca.pool,
		ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, Timeout: 2 * time.Second}
}

// TestTLSAdmitsOnlyTheClustersCertificates: two muxes with certificates
// of one CA talk; a plain TCP peer, a TLS peer without a certificate and
// one with another CA's are refused before the preface is read, and a
// dialer that does not trust the port's certificate gives up.
func TestTLSAdmitsOnlyTheClustersCertificates(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := New(ln, slog.New(slog.DiscardHandler), nil, ca.clusterTLS(t, 2))
	defer m.Close()
	raft, err := m.Listen(KindRaft, 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()

	// A peer of the same cluster.
	peerLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := New(peerLn, slog.New(slog.DiscardHandler), nil, ca.clusterTLS(t, 3))
	defer peer.Close()
	c, err := peer.Dial(addr, KindRaft, 1, 2*time.Second)
	if err != nil {
		t.Fatalf("dial with the cluster's certificate: %v", err)
	}
	if _, err := c.Write([]byte("entry")); err != nil {
		t.Fatal(err)
	}
	s, err := raft.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "entry" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if _, ok := s.(*tls.Conn); !ok {
		t.Fatalf("accepted %T, want a TLS connection", s)
	}
	c.Close()
	s.Close()

	refusedBeforePreface := func(what string, c net.Conn) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		// A preface in the clear is not TLS: the server's handshake fails
		// and the connection is closed without reaching the channel.
		_, _ = c.Write([]byte("F\x00\x01 and a raft entry in the clear"))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s: the port answered", what)
		}
		c.Close()
	}
	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	refusedBeforePreface("plain TCP", plain)

	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no certificate", nil},
		{"another CA's certificate", []tls.Certificate{newTestCA(t, "other CA").node(t, 4)}},
	} {
		tc2, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, Certificates: tc.certs, MinVersion: tls.VersionTLS12})
		if err == nil {
			// TLS 1.3 clients finish before the server checks their
			// certificate: the refusal comes on the first read.
			_, _ = tc2.Write([]byte{byte(KindRaft), 0, 1})
			_ = tc2.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err = tc2.Read(make([]byte, 1)); err == nil {
				t.Fatalf("%s: admitted", tc.name)
			}
			tc2.Close()
		}
	}

	// A mux of another cluster does not trust this port's certificate.
	other := newTestCA(t, "other CA")
	otherLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	om := New(otherLn, slog.New(slog.DiscardHandler), nil, other.clusterTLS(t, 5))
	defer om.Close()
	if c, err := om.Dial(addr, KindRaft, 1, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("a dialer of another cluster connected")
	}
	select {
	case s := <-raft.conns:
		t.Fatalf("a refused peer reached the channel: %v", s.RemoteAddr())
	default:
	}
}
