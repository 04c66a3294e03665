package monitor

import (
	"maps"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/server"
)

// varz is the /varz document; field names are nats-server's.
type varz struct {
	ID               string            `json:"server_id"`
	Name             string            `json:"server_name"`
	Version          string            `json:"version"`
	Proto            int               `json:"proto"`
	GoVersion        string            `json:"go"`
	Host             string            `json:"host"`
	Port             int               `json:"port"`
	AuthRequired     bool              `json:"auth_required,omitempty"`
	TLSRequired      bool              `json:"tls_required,omitempty"`
	TLSVerify        bool              `json:"tls_verify,omitempty"`
	MaxConn          int               `json:"max_connections"`
	PingInterval     time.Duration     `json:"ping_interval"`
	MaxPingsOut      int               `json:"ping_max"`
	HTTPHost         string            `json:"http_host"`
	HTTPPort         int               `json:"http_port"`
	HTTPBasePath     string            `json:"http_base_path"`
	HTTPSPort        int               `json:"https_port"`
	AuthTimeout      float64           `json:"auth_timeout"`
	MaxControlLine   int32             `json:"max_control_line"`
	MaxPayload       int               `json:"max_payload"`
	MaxPending       int64             `json:"max_pending"`
	TLSTimeout       float64           `json:"tls_timeout"`
	WriteDeadline    time.Duration     `json:"write_deadline"`
	Start            time.Time         `json:"start"`
	Now              time.Time         `json:"now"`
	Uptime           string            `json:"uptime"`
	Mem              int64             `json:"mem"`
	Cores            int               `json:"cores"`
	MaxProcs         int               `json:"gomaxprocs"`
	CPU              float64           `json:"cpu"`
	Connections      int               `json:"connections"`
	TotalConnections uint64            `json:"total_connections"`
	Routes           int               `json:"routes"`
	Remotes          int               `json:"remotes"`
	Leafs            int               `json:"leafnodes"`
	InMsgs           int64             `json:"in_msgs"`
	InBytes          int64             `json:"in_bytes"`
	InClientMsgs     int64             `json:"in_client_msgs"`
	InClientBytes    int64             `json:"in_client_bytes"`
	OutMsgs          int64             `json:"out_msgs"`
	OutBytes         int64             `json:"out_bytes"`
	OutClientMsgs    int64             `json:"out_client_msgs"`
	OutClientBytes   int64             `json:"out_client_bytes"`
	SlowConsumers    int64             `json:"slow_consumers"`
	StaleConns       int64             `json:"stale_connections"`
	StalledClients   int64             `json:"stalled_clients"`
	Subscriptions    uint32            `json:"subscriptions"`
	JetStream        *jsVarz           `json:"jetstream,omitempty"`
	HTTPReqStats     map[string]uint64 `json:"http_req_stats"`
	ConfigLoadTime   time.Time         `json:"config_load_time"`
	ConfigDigest     string            `json:"config_digest"`
	SlowConsumerSt   slowConsumerStats `json:"slow_consumer_stats"`
	Cluster          *clusterVarz      `json:"cluster,omitempty"`
	ConnectURLs      []string          `json:"connect_urls,omitempty"`
}

type slowConsumerStats struct {
	Clients  uint64 `json:"clients"`
	Routes   uint64 `json:"routes"`
	Gateways uint64 `json:"gateways"`
	Leafs    uint64 `json:"leafs"`
}

func (m *Monitor) varz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, m.varzDoc())
}

// varzDoc builds /varz.
func (m *Monitor) varzDoc() *varz {
	opts := m.srv.Options()
	st := m.srv.Stats()
	now := time.Now()
	v := varz{
		ID:               m.srv.ID(),
		Name:             m.srv.Name(),
		Version:          server.Version,
		Proto:            1,
		GoVersion:        runtime.Version(),
		Host:             opts.Host,
		Port:             opts.Port,
		AuthRequired:     m.srv.AuthRequired(),
		TLSRequired:      opts.TLS != nil && !opts.AllowNonTLS,
		MaxConn:          opts.MaxConnections,
		PingInterval:     opts.PingInterval,
		MaxPingsOut:      opts.PingMax,
		HTTPHost:         opts.HTTPHost,
		HTTPPort:         opts.HTTPPort,
		MaxControlLine:   opts.MaxControlLine,
		MaxPayload:       int(opts.MaxPayload),
		MaxPending:       opts.MaxPending,
		WriteDeadline:    opts.WriteDeadline,
		AuthTimeout:      2, // seconds, nats-server's default; auth arrives with operator mode
		TLSTimeout:       config.DefaultTLSTimeout.Seconds(),
		Start:            st.Start.UTC(),
		Now:              now.UTC(),
		Uptime:           uptime(now.Sub(st.Start)),
		Cores:            runtime.NumCPU(),
		MaxProcs:         runtime.GOMAXPROCS(0),
		Connections:      st.Connections,
		TotalConnections: st.TotalConnections,
		InMsgs:           int64(st.InMsgs),
		InBytes:          int64(st.InBytes),
		InClientMsgs:     int64(st.InMsgs),
		InClientBytes:    int64(st.InBytes),
		OutMsgs:          int64(st.OutMsgs),
		OutBytes:         int64(st.OutBytes),
		OutClientMsgs:    int64(st.OutMsgs),
		OutClientBytes:   int64(st.OutBytes),
		SlowConsumers:    int64(st.SlowConsumers),
		StaleConns:       int64(st.StaleConnections),
		Subscriptions:    clientSubs(m.srv),
		ConfigLoadTime:   st.Start.UTC(),
		SlowConsumerSt:   slowConsumerStats{Clients: st.SlowConsumers, Routes: st.SlowRoutes},
	}
	if ci := m.srv.Cluster(); ci != nil {
		v.Cluster = &clusterVarz{Name: ci.Name, Addr: ci.Host, Port: ci.Port, URLs: ci.URLs}
		v.ConnectURLs = m.srv.ConnectURLs()
		v.Routes = len(m.srv.Routes())
	}
	if a := m.srv.Addr(); a != nil {
		if _, p, err := splitPort(a.String()); err == nil {
			v.Port = p
		}
	}
	if opts.TLS != nil {
		v.TLSVerify = opts.TLS.Verify
		v.TLSTimeout = opts.TLS.Timeout.Seconds()
	}
	m.mu.Lock()
	v.HTTPReqStats = maps.Clone(m.reqStats)
	v.CPU = m.cpu.sample(now)
	m.mu.Unlock()
	v.Mem = rss()
	if m.js != nil {
		snap := m.js.Snapshot()
		st := statsOf(&snap)
		v.JetStream = &jsVarz{Config: configOf(&snap), Stats: &st}
	}
	return &v
}

func splitPort(hostport string) (string, int, error) {
	i := strings.LastIndexByte(hostport, ':')
	p, err := strconv.Atoi(hostport[i+1:])
	return hostport[:i], p, err
}

// rss is the process's resident set size in bytes (Linux), or 0.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// cpuSampler turns the process's CPU time into a percentage over the time
// since the previous sample.
type cpuSampler struct {
	lastAt  time.Time
	lastCPU time.Duration
	pct     float64
}

func (c *cpuSampler) sample(now time.Time) float64 {
	used := processCPU()
	if !c.lastAt.IsZero() {
		if wall := now.Sub(c.lastAt); wall > 0 {
			c.pct = float64(used-c.lastCPU) / float64(wall) * 100
		}
	} else if wall := now.Sub(startTime); wall > 0 {
		c.pct = float64(used) / float64(wall) * 100
	}
	c.lastAt, c.lastCPU = now, used
	return float64(int(c.pct*10)) / 10
}

var startTime = time.Now()

// processCPU reads user+system CPU time from /proc/self/stat (Linux).
func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

// clientSubs counts client subscriptions over every account: each has its
// own subject index.
func clientSubs(srv *server.Server) uint32 {
	var n uint32
	for _, a := range srv.Accounts() {
		n += uint32(a.NumSubscriptions())
	}
	return n
}
