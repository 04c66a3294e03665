package monitor

import (
	"net/http"

	"github.com/contrail/contrail/dataplane/server"
)

// accountz answers /accountz: the node's accounts, or with acc=<key> the
// detail of one (400 when the node does not have it), as nats-server.
func (m *Monitor) accountz(w http.ResponseWriter, r *http.Request) {
	doc, err := m.srv.Accountz(r.URL.Query().Get("acc"))
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	writeJSON(w, r, doc)
}

// accstatz answers /accstatz: connections and traffic of the accounts
// with connections, or of all loaded accounts with unused=true.
func (m *Monitor) accstatz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, m.srv.AccountStatz(&server.AccountStatzOptions{IncludeUnused: boolParam(r, "unused")}))
}
