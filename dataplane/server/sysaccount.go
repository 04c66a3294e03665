package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Per-account request subjects in the system account, as nats-server
// serves them: $SYS.REQ.ACCOUNT.<account>.<service>. Only system users
// reach them; every other account's $SYS subjects are its own.
const (
	subjAccReq       = "$SYS.REQ.ACCOUNT.*.%s"
	subjAccPingStatz = "$SYS.REQ.ACCOUNT.PING.STATZ"
	// accPing is the account token of the server-wide ping subjects,
	// which also match the per-account filters.
	accPing = "PING"
)

// accountServices are the per-account services by their last token.
func (s *Server) accountServices() map[string]func(account, reply string, body []byte) {
	return map[string]func(account, reply string, body []byte){
		"CONNZ": s.monitorService("CONNZ"),
		"SUBSZ": s.monitorService("SUBSZ"),
		"JSZ":   s.monitorService("JSZ"),
		"INFO": func(account, reply string, body []byte) {
			s.zReply(reply, body, func() (any, error) { return s.accountInfo(account) })
		},
		"STATZ": func(account, reply string, body []byte) {
			if account == accPing {
				return // answered by the PING.STATZ service
			}
			s.zReply(reply, body, func() (any, error) { return s.accountStatzFor(body, account) })
		},
		"CONNS": s.accountConnsRequest,
	}
}

// startAccountServices subscribes the per-account services and the
// server-wide account statz ping.
func (s *Server) startAccountServices() error {
	for name, serve := range s.accountServices() {
		err := s.sysServe(fmt.Sprintf(subjAccReq, name), func(subject, reply string, body []byte) {
			// $SYS.REQ.ACCOUNT.<account>.<service>
			serve(strings.Split(subject, ".")[3], reply, body)
		})
		if err != nil {
			return err
		}
	}
	return s.sysServe(subjAccPingStatz, func(_, reply string, body []byte) {
		s.zReply(reply, body, func() (any, error) { return s.accountStatzFor(body, "") })
	})
}

// monitorService answers with the Monitoring document of endpoint scoped
// to the account.
func (s *Server) monitorService(endpoint string) func(account, reply string, body []byte) {
	return func(account, reply string, body []byte) {
		s.zReply(reply, body, func() (any, error) { return s.monitorDoc(endpoint, body, account) })
	}
}

// errNoMonitoring answers document requests on a node without Monitoring.
var errNoMonitoring = errors.New("monitoring documents are not available on this node")

// monitorDoc builds a document through the registered Monitoring.
func (s *Server) monitorDoc(endpoint string, body []byte, account string) (any, error) {
	m := s.monitoring()
	if m == nil {
		return nil, errNoMonitoring
	}
	return m.MonitorDoc(endpoint, body, account)
}

// accountStatzFor answers an account statz request: for one account (the
// subject's), or the accounts the body lists (all when none). As from
// nats-server, a server with nothing to report stays silent unless the
// request includes unused accounts.
func (s *Server) accountStatzFor(body []byte, account string) (any, error) {
	var opts AccountStatzOptions
	if err := decodeOptions(body, &opts); err != nil {
		return nil, err
	}
	if account != "" {
		opts.Accounts = []string{account}
	}
	stz := s.AccountStatz(&opts)
	if len(stz.Accounts) == 0 && !opts.IncludeUnused {
		return nil, errNoReply
	}
	return stz, nil
}

// accNumConnsReq is the optional body of a CONNS request.
type accNumConnsReq struct {
	Account string `json:"acc"`
}

// accountConnsRequest answers $SYS.REQ.ACCOUNT.<account>.CONNS with the
// account's AccountNumConns, unwrapped, as nats-server does, and only
// when the account has connections here.
func (s *Server) accountConnsRequest(account, reply string, body []byte) {
	if reply == "" {
		return
	}
	m := accNumConnsReq{Account: account}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			s.log.Warn("account connections request: bad body", "account", account, "err", err)
			return
		}
	}
	if m.Account != account {
		s.log.Warn("account connections request: body names another account", "account", account, "body", m.Account)
		return
	}
	a := s.LoadedAccount(account)
	if a == nil || a.NumConnections() == 0 {
		return
	}
	msg := &AccountNumConns{TypedEvent: newTypedEvent(typeAccountConns, time.Now()), AccountStat: *a.statz()}
	msg.Server = s.sysInfo()
	s.sysReply(reply, msg)
}
