package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Server request subjects in the system account, as nats-server serves
// them: natscli's `nats server list|ping|info|report` ask these.
const (
	subjServerPing    = "$SYS.REQ.SERVER.PING"    // statsz from every server
	subjServerPingReq = "$SYS.REQ.SERVER.PING.%s" // <service> from every server
	subjServerReq     = "$SYS.REQ.SERVER.%s.%s"   // <service> from one server, by id
)

// ServerStatsMsg answers a server ping: who the server is and its
// statistics (the Monitoring "STATSZ" document).
type ServerStatsMsg struct {
	Server *sysServerInfo `json:"server"`
	Stats  any            `json:"statsz"`
}

// ServerID is the static identity IDZ answers with.
type ServerID struct {
	Name string `json:"name"`
	Host string `json:"host"`
	ID   string `json:"id"`
}

// accountzOptions are the options of an ACCOUNTZ request.
type accountzOptions struct {
	Account string `json:"account"`
}

// serverServices are the server services by their last token.
func (s *Server) serverServices() map[string]sysHandler {
	doc := func(endpoint string) sysHandler {
		return func(_, reply string, body []byte) {
			s.zReply(reply, body, func() (any, error) { return s.monitorDoc(endpoint, body, "") })
		}
	}
	return map[string]sysHandler{
		"STATSZ":  s.statszRequest,
		"VARZ":    doc("VARZ"),
		"CONNZ":   doc("CONNZ"),
		"SUBSZ":   doc("SUBSZ"),
		"JSZ":     doc("JSZ"),
		"HEALTHZ": doc("HEALTHZ"),
		"ACCOUNTZ": func(_, reply string, body []byte) {
			s.zReply(reply, body, func() (any, error) {
				var opts accountzOptions
				if err := decodeOptions(body, &opts); err != nil {
					return nil, err
				}
				return s.Accountz(opts.Account)
			})
		},
		"IDZ": func(_, reply string, _ []byte) {
			s.sysReply(reply, &ServerID{Name: s.name, Host: s.opts.Host, ID: s.id})
		},
	}
}

// startServerServices subscribes every server service on its ping subject
// and on this server's own subject, and the bare server ping.
func (s *Server) startServerServices() error {
	for name, h := range s.serverServices() {
		for _, subj := range []string{fmt.Sprintf(subjServerPingReq, name), fmt.Sprintf(subjServerReq, s.id, name)} {
			if err := s.sysServe(subj, h); err != nil {
				return err
			}
		}
	}
	return s.sysServe(subjServerPing, s.statszRequest)
}

// statszRequest answers a server ping with this server's statistics,
// unwrapped, as nats-server does; a body that is not JSON gets a 400 in
// the usual envelope.
func (s *Server) statszRequest(_, reply string, body []byte) {
	if reply == "" {
		return
	}
	if len(body) > 0 {
		var f eventFilter
		if err := json.Unmarshal(body, &f); err != nil {
			s.sysReply(reply, &sysAPIResponse{Server: s.sysInfo(),
				Error: &sysAPIError{Code: http.StatusBadRequest, Description: err.Error()}})
			return
		}
		if f.excludes(s) {
			return
		}
	}
	stats, err := s.monitorDoc("STATSZ", nil, "")
	if err != nil {
		s.sysReply(reply, &sysAPIResponse{Server: s.sysInfo(),
			Error: &sysAPIError{Code: http.StatusInternalServerError, Description: err.Error()}})
		return
	}
	s.sysReply(reply, &ServerStatsMsg{Server: s.sysInfo(), Stats: stats})
}

// StartSystemServices subscribes the system account's services: claim
// updates are already served (SetOperatorMode); this adds the account
// services ($SYS.REQ.ACCOUNT.<account>.CONNZ|STATZ|CONNS|SUBSZ|INFO|JSZ and
// $SYS.REQ.ACCOUNT.PING.STATZ) and the server services
// ($SYS.REQ.SERVER.PING[.<service>], $SYS.REQ.SERVER.<id>.<service>),
// and starts the statsz heartbeat.
// Call it after SetOperatorMode and SetMonitoring, before Serve. Without
// a system account there is no one to serve, and it does nothing.
func (s *Server) StartSystemServices() error {
	if s.sys == nil {
		return nil
	}
	if err := s.startAccountServices(); err != nil {
		return fmt.Errorf("system account: %w", err)
	}
	if err := s.startServerServices(); err != nil {
		return fmt.Errorf("system account: %w", err)
	}
	go s.heartbeatStatsz()
	return nil
}

// subjServerStatsz is where a server announces its statistics unasked, as
// nats-server does: `nats server watch` and monitoring agents listen here.
const subjServerStatsz = "$SYS.SERVER.%s.STATSZ"

// Statsz heartbeats start often, so a watcher sees a new server at once,
// and slow down to the steady interval.
const (
	statszFirst    = 250 * time.Millisecond
	statszInterval = 10 * time.Second
)

// heartbeatStatsz publishes this server's statistics on its statsz
// subject until the server shuts down, skipping the work while nobody in
// the system account listens.
func (s *Server) heartbeatStatsz() {
	subj := fmt.Sprintf(subjServerStatsz, s.id)
	t := time.NewTimer(statszFirst)
	defer t.Stop()
	for every := statszFirst; ; every = min(2*every, statszInterval) {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.sys.HasInterest(subj) {
			if stats, err := s.monitorDoc("STATSZ", nil, ""); err == nil {
				s.sysReply(subj, &ServerStatsMsg{Server: s.sysInfo(), Stats: stats})
			}
		}
		t.Reset(every)
	}
}
