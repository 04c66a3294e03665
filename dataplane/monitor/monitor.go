// Package monitor serves a node's HTTP monitoring endpoints (/healthz,
// /varz, /connz, /subsz, /jsz, /accountz, /accstatz) with nats-server's
// paths and JSON field names, so existing dashboards and exporters read
// Contrail unchanged. It also builds the same documents for the system
// account's services (MonitorDoc), which send them over NATS.
package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/server"
)

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("monitor closed")

// Monitor is the monitoring HTTP server of one node.
type Monitor struct {
	srv  *server.Server
	log  *slog.Logger
	http *http.Server
	ln   net.Listener

	js       JetStreamSource // nil when JetStream is off; set before Serve
	mu       sync.Mutex
	reqStats map[string]uint64 // guarded by mu
	cpu      cpuSampler        // guarded by mu
}

// New builds the monitor for srv.
func New(srv *server.Server, log *slog.Logger) *Monitor {
	m := &Monitor{srv: srv, log: log, reqStats: map[string]uint64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", m.counted("/", m.root))
	mux.HandleFunc("/healthz", m.counted("/healthz", m.healthz))
	mux.HandleFunc("/varz", m.counted("/varz", m.varz))
	mux.HandleFunc("/connz", m.counted("/connz", m.connz))
	mux.HandleFunc("/subsz", m.counted("/subsz", m.subsz))
	mux.HandleFunc("/subscriptionsz", m.counted("/subscriptionsz", m.subsz))
	mux.HandleFunc("/jsz", m.counted("/jsz", m.jsz))
	mux.HandleFunc("/routez", m.counted("/routez", m.routez))
	mux.HandleFunc("/accountz", m.counted("/accountz", m.accountz))
	mux.HandleFunc("/accstatz", m.counted("/accstatz", m.accstatz))
	mux.HandleFunc("/digestz", m.counted("/digestz", m.digestz))
	mux.HandleFunc("/metrics", m.counted("/metrics", m.metrics))
	m.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return m
}

// Listen binds addr.
func (m *Monitor) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("monitor listen %s: %w", addr, err)
	}
	m.ln = ln
	return nil
}

// Addr is the bound address.
func (m *Monitor) Addr() net.Addr { return m.ln.Addr() }

// Serve answers requests until Close.
func (m *Monitor) Serve() error {
	m.log.Info("monitoring listening", "addr", m.ln.Addr().String())
	err := m.http.Serve(m.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return ErrClosed
	}
	return err
}

// Close stops the HTTP server.
func (m *Monitor) Close() error { return m.http.Close() }

func (m *Monitor) counted(path string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.reqStats[path]++
		m.mu.Unlock()
		h(w, r)
	}
}

func (m *Monitor) root(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<html><body><h1>Contrail data plane</h1><ul>
<li><a href="varz">varz</a></li><li><a href="connz">connz</a></li>
<li><a href="subsz">subsz</a></li><li><a href="jsz">jsz</a></li><li><a href="accountz">accountz</a></li>
<li><a href="accstatz">accstatz</a></li><li><a href="healthz">healthz</a></li></ul></body></html>`)
}

// healthz answers /healthz as nats-server does: 200 {"status":"ok"}, or
// 503 {"status":"unavailable","error":…} while a clustered node has not
// caught up with its groups' leaders.
func (m *Monitor) healthz(w http.ResponseWriter, r *http.Request) {
	hs := m.health()
	if hs.StatusCode != http.StatusOK {
		m.log.Warn("health check failed", "err", hs.Error)
		w.WriteHeader(hs.StatusCode)
	}
	hs.StatusCode = 0 // the HTTP status says it
	writeJSON(w, r, hs)
}

// health is this node's health status.
func (m *Monitor) health() *healthStatus {
	if m.js != nil {
		if err := m.js.ClusterHealth(); err != nil {
			return &healthStatus{Status: "unavailable", StatusCode: http.StatusServiceUnavailable, Error: err.Error()}
		}
	}
	return &healthStatus{Status: "ok", StatusCode: http.StatusOK}
}

// writeJSON writes v indented, wrapped in a JSONP callback when asked.
func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if cb := r.URL.Query().Get("callback"); cb != "" {
		w.Header().Set("Content-Type", "application/javascript")
		fmt.Fprintf(w, "%s(%s)", cb, b)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// badRequest answers a malformed query parameter.
func badRequest(w http.ResponseWriter, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
}

// intParam reads a non-negative integer query parameter.
func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid %s %q", name, v)
	}
	return n, nil
}

// pageParams reads the offset and limit every listing endpoint takes.
func pageParams(r *http.Request) (offset, limit int, err error) {
	if offset, err = intParam(r, "offset", 0); err != nil {
		return 0, 0, err
	}
	limit, err = intParam(r, "limit", 1024)
	return offset, limit, err
}

// uptime renders a duration as nats-server does: 1d2h3m4s.
func uptime(d time.Duration) string {
	tsecs := int64(d / time.Second)
	days, hours := tsecs/86400, (tsecs%86400)/3600
	mins, secs := (tsecs%3600)/60, tsecs%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd%dh%dm%ds", days, hours, mins, secs)
	case hours > 0:
		return fmt.Sprintf("%dh%dm%ds", hours, mins, secs)
	case mins > 0:
		return fmt.Sprintf("%dm%ds", mins, secs)
	}
	return fmt.Sprintf("%ds", secs)
}
