package monitor

import (
	"errors"
	"net/http"

	"github.com/contrail/contrail/dataplane/jetstream"
)

// digestSource is the optional part of a JetStreamSource that hashes
// what this node's store holds of one stream.
type digestSource interface {
	StreamDigest(account, name string) (jetstream.StreamDigest, error)
}

// digestz answers /digestz?acc=ACCOUNT&stream=NAME with this node's
// digest of the stream (jetstream.StreamDigest): operators and the fault
// tests compare it across a stream's replicas, which must agree once they
// have applied the same entries. It reads the store, so any member
// answers, leader or not. Not a nats-server endpoint.
func (m *Monitor) digestz(w http.ResponseWriter, r *http.Request) {
	ds, ok := m.js.(digestSource)
	if m.js == nil || !ok {
		http.Error(w, "jetstream not enabled", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	acc, name := q.Get("acc"), q.Get("stream")
	if acc == "" || name == "" {
		badRequest(w, "acc and stream are required")
		return
	}
	d, err := ds.StreamDigest(acc, name)
	switch {
	case errors.Is(err, jetstream.ErrNoStream):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		writeJSON(w, r, d)
	}
}
