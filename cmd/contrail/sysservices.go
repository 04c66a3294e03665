package main

import (
	"log/slog"

	"github.com/contrail/contrail/dataplane/monitor"
	"github.com/contrail/contrail/dataplane/server"
)

// startSystemServices builds the node's monitoring documents (JetStream
// figures included, from the engine's snapshot) and starts the system
// account's services, which send them over NATS: a control plane meters
// accounts through them whether or not the HTTP monitor listens. Call it
// before the server serves; the monitor it returns serves HTTP if asked.
func startSystemServices(srv *server.Server, js *jetStream, log *slog.Logger) (*monitor.Monitor, error) {
	mon := monitor.New(srv, log)
	if js.engine != nil {
		mon.SetJetStream(js.engine)
	}
	srv.SetMonitoring(mon)
	if err := srv.StartSystemServices(); err != nil {
		return nil, err
	}
	return mon, nil
}
