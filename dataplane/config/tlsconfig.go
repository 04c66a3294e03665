package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
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
	t := o.TLS
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("config: tls: cert_file and key_file are required")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("config: tls: loading cert_file %q and key_file %q: %w", t.CertFile, t.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if t.CAFile != "" {
		if cfg.ClientCAs, err = loadCAs(t.CAFile); err != nil {
			return nil, err
		}
	}
	if t.Verify || t.VerifyAndMap {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: tls: reading ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("config: tls: ca_file %q holds no PEM certificates", path)
	}
	return pool, nil
}
