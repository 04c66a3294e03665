package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig builds the client-facing server TLS configuration from the
// files named in the tls block. It returns nil, nil when TLS is not
// configured. With verify on, clients must present a certificate signed by
// ca_file (or, without ca_file, by a system root).
func (o *Options) TLSConfig() (*tls.Config, error) {
	if o == nil || o.TLS == nil {
		return nil, nil
	}
	cfg, err := o.TLS.build("tls")
	if err != nil {
		return nil, err
	}
	if o.TLS.Verify || o.TLS.VerifyAndMap {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// TLSConfig builds the cluster port's TLS configuration, nil, nil when the
// block has none. The port is both ends of every connection, so the one
// configuration serves accepting and dialing: the node's certificate is
// presented either way, and a peer's is always required and checked
// against ca_file (or the system roots), as nats-server's routes check.
func (c *ClusterOptions) TLSConfig() (*tls.Config, error) {
	if c == nil || c.TLS == nil {
		return nil, nil
	}
	cfg, err := c.TLS.build("cluster.tls")
	if err != nil {
		return nil, err
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.RootCAs = cfg.ClientCAs
	return cfg, nil
}

// build loads the block's key pair and CA file; what is the block's
// path, for errors.
func (t *TLSOptions) build(what string) (*tls.Config, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, fmt.Errorf("config: %s: cert_file and key_file are required", what)
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("config: %s: loading cert_file %q and key_file %q: %w", what, t.CertFile, t.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if t.CAFile != "" {
		if cfg.ClientCAs, err = loadCAs(t.CAFile); err != nil {
			return nil, fmt.Errorf("config: %s: %w", what, err)
		}
	}
	return cfg, nil
}

func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %q holds no PEM certificates", path)
	}
	return pool, nil
}
