package server

import (
	"encoding/json"
	"net"
	"runtime"
)

// serverInfo is the INFO a client receives on connect. Field names are the
// protocol's; clients read headers, max_payload, tls_required and version
// to decide what they may do.
type serverInfo struct {
	ID           string   `json:"server_id"`
	Name         string   `json:"server_name"`
	Version      string   `json:"version"`
	Proto        int      `json:"proto"`
	GoVersion    string   `json:"go"`
	Host         string   `json:"host"`
	Port         int      `json:"port"`
	Headers      bool     `json:"headers"`
	AuthRequired bool     `json:"auth_required,omitempty"`
	TLSRequired  bool     `json:"tls_required,omitempty"`
	TLSVerify    bool     `json:"tls_verify,omitempty"`
	TLSAvailable bool     `json:"tls_available,omitempty"`
	MaxPayload   int32    `json:"max_payload"`
	JetStream    bool     `json:"jetstream,omitempty"`
	ClientID     uint64   `json:"client_id,omitempty"`
	ClientIP     string   `json:"client_ip,omitempty"`
	Nonce        string   `json:"nonce,omitempty"`
	Domain       string   `json:"domain,omitempty"`
	Cluster      string   `json:"cluster,omitempty"`
	ConnectURLs  []string `json:"connect_urls,omitempty"`
}

// infoFor builds the INFO line for one client.
func (s *Server) infoFor(c *client) []byte {
	info := serverInfo{
		ID:         s.id,
		Name:       s.name,
		Version:    Version,
		Proto:      1,
		GoVersion:  runtime.Version(),
		Host:       s.opts.Host,
		Port:       s.opts.Port,
		Headers:    true,
		MaxPayload: s.opts.MaxPayload,
		ClientID:   c.cid,
		ClientIP:   c.host,
	}
	if s.authRequired {
		info.AuthRequired = true
		info.Nonce = string(c.nonce)
	}
	if d := s.jetstream.Load(); d != nil {
		info.JetStream, info.Domain = true, *d
	}
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		info.Port = a.Port
	}
	if s.cluster != nil {
		info.Cluster, info.ConnectURLs = s.cluster.name, s.cluster.connectURLs()
	}
	if s.tls != nil {
		info.TLSRequired = !s.opts.AllowNonTLS
		info.TLSAvailable = s.opts.AllowNonTLS
		info.TLSVerify = s.opts.TLS.Verify || s.opts.TLS.VerifyAndMap
	}
	b, _ := json.Marshal(&info) // a plain struct cannot fail to marshal
	line := make([]byte, 0, len(b)+8)
	line = append(line, "INFO "...)
	line = append(line, b...)
	return append(line, "\r\n"...)
}

// connectOpts is what a client says about itself in CONNECT.
type connectOpts struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	TLSRequired  bool   `json:"tls_required"`
	Echo         bool   `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	Protocol     int    `json:"protocol"`
	User         string `json:"user,omitempty"`
	Pass         string `json:"pass,omitempty"`
	Token        string `json:"auth_token,omitempty"`
	JWT          string `json:"jwt,omitempty"`
	Nkey         string `json:"nkey,omitempty"`
	Sig          string `json:"sig,omitempty"`
}
