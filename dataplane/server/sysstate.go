package server

import (
	"errors"
	"sync"
)

// Monitoring builds the documents of the monitoring endpoints (/varz,
// /connz, /subsz, /jsz, /healthz and the statsz of a server ping) for the
// system account's services, which send the same documents over NATS as
// nats-server does ($SYS.REQ.SERVER.<id>.VARZ, $SYS.REQ.ACCOUNT.<acc>.CONNZ,
// …), so a control plane or natscli reads a node without HTTP. The monitor
// package owns those documents and implements it; it imports this package,
// so cmd wires the two with SetMonitoring.
//
// MonitorDoc may be called from many goroutines at once.
type Monitoring interface {
	// MonitorDoc builds the document of endpoint ("VARZ", "CONNZ",
	// "SUBSZ", "JSZ", "HEALTHZ", "STATSZ"). opts is the request's JSON
	// body with nats-server's option names, or empty for the defaults.
	// account, when not empty, scopes the document to that account, and
	// for JSZ asks for nats-server's per-account document. An error
	// wrapping ErrBadOptions is the requester's fault.
	MonitorDoc(endpoint string, opts []byte, account string) (any, error)
}

// ErrBadOptions marks a monitoring request whose options cannot be read;
// nats-server answers those with code 400, and other failures with 500.
var ErrBadOptions = errors.New("bad request options")

// sysState is what one server keeps for the system account's services and
// the per-connection identities that events and /connz?auth=1 report.
type sysState struct {
	srv *Server

	mu struct {
		sync.Mutex
		mon Monitoring // set before Serve; guarded by mu
		// live maps each authenticated client to its identity as events
		// report it. Invariant: a client is in live from its connect
		// event until its disconnect event, and only then, so every
		// disconnect event follows its connect event.
		live    map[*client]*ClientInfo // guarded by mu
		queue   []sysEvent              // events not yet published; guarded by mu
		running bool                    // the publishing goroutine runs; guarded by mu
	}
	wake chan struct{} // one token: the queue has events
}

func newSysState(s *Server) *sysState {
	st := &sysState{srv: s, wake: make(chan struct{}, 1)}
	st.mu.live = map[*client]*ClientInfo{}
	return st
}

// state returns the server's system-service state.
func (s *Server) state() *sysState { return s.sysst }

// SetMonitoring gives the system account's services the monitoring
// documents to send; call it before Serve. Without it, requests for those
// documents are answered with an error.
func (s *Server) SetMonitoring(m Monitoring) {
	st := s.state()
	st.mu.Lock()
	st.mu.mon = m
	st.mu.Unlock()
}

// monitoring is the registered Monitoring, or nil.
func (s *Server) monitoring() Monitoring {
	st := s.state()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.mon
}
