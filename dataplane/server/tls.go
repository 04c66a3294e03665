package server

import (
	"crypto/tls"
	"strings"
)

// tlsVersionName renders a TLS version as nats-server's /connz does ("1.3").
func tlsVersionName(v uint16) string {
	return strings.TrimPrefix(tls.VersionName(v), "TLS ")
}

func tlsCipherName(id uint16) string { return tls.CipherSuiteName(id) }
