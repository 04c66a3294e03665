package monitor

import (
	"encoding/json"
	"fmt"

	"github.com/contrail/contrail/dataplane/server"
)

// healthStatus is nats-server's HealthStatus, as HEALTHZ answers over NATS.
type healthStatus struct {
	Status     string `json:"status"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
}

// MonitorDoc builds a monitoring document for the system account's
// services (server.Monitoring): the same documents the HTTP endpoints
// serve, with options read from the request's JSON body as nats-server
// names them. An account scopes CONNZ and SUBSZ (with the subscriptions
// listed) to it, and makes JSZ the account's own detail.
func (m *Monitor) MonitorDoc(endpoint string, opts []byte, account string) (any, error) {
	switch endpoint {
	case "VARZ":
		return m.varzDoc(), nil
	case "STATSZ":
		return m.statszDoc(), nil
	case "HEALTHZ":
		return m.health(), nil
	case "CONNZ":
		var o connzOptions
		if err := decode(opts, &o); err != nil {
			return nil, err
		}
		if account != "" {
			o.Account = account
		}
		return m.connzDoc(&o)
	case "SUBSZ":
		var o subszOptions
		if err := decode(opts, &o); err != nil {
			return nil, err
		}
		if account != "" {
			o.Account, o.Subs = account, true
		}
		return m.subszDoc(&o)
	case "JSZ":
		var o jszOptions
		if err := decode(opts, &o); err != nil {
			return nil, err
		}
		if account != "" {
			o.Account = account
			return m.accountJsz(&o)
		}
		return m.jszDoc(&o), nil
	}
	return nil, fmt.Errorf("monitoring document %q: not served", endpoint)
}

// decode reads a request's JSON options into v; empty leaves defaults.
func decode(opts []byte, v any) error {
	if len(opts) == 0 {
		return nil
	}
	if err := json.Unmarshal(opts, v); err != nil {
		return fmt.Errorf("%w: %v", server.ErrBadOptions, err)
	}
	return nil
}

// The system account's services read their documents from the monitor.
var _ server.Monitoring = (*Monitor)(nil)
