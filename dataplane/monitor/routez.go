package monitor

import (
	"net/http"
	"time"
)

// routez is the /routez document; field names are nats-server's.
type routez struct {
	ID        string      `json:"server_id"`
	Name      string      `json:"server_name"`
	Now       time.Time   `json:"now"`
	NumRoutes int         `json:"num_routes"`
	Routes    []routeInfo `json:"routes"`
}

type routeInfo struct {
	RID          uint64 `json:"rid"`
	RemoteID     string `json:"remote_id"`
	RemoteName   string `json:"remote_name"`
	DidSolicit   bool   `json:"did_solicit"`
	IsConfigured bool   `json:"is_configured"`
	IP           string `json:"ip"`
	Port         int    `json:"port"`
	Start        string `json:"start"`
	LastActivity string `json:"last_activity"`
	RTT          string `json:"rtt,omitempty"`
	Uptime       string `json:"uptime"`
	Idle         string `json:"idle"`
	Pending      int64  `json:"pending_size"`
	InMsgs       uint64 `json:"in_msgs"`
	OutMsgs      uint64 `json:"out_msgs"`
	InBytes      uint64 `json:"in_bytes"`
	OutBytes     uint64 `json:"out_bytes"`
	// DroppedMsgs is Contrail's: messages one account's flood could not
	// queue to the peer (its share of the route's bound was full).
	DroppedMsgs uint64   `json:"dropped_msgs"`
	NumSubs     int      `json:"subscriptions"`
	ConnectURLs []string `json:"connect_urls,omitempty"`
}

func (m *Monitor) routez(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, m.routezDoc())
}

func (m *Monitor) routezDoc() *routez {
	now := time.Now().UTC()
	doc := &routez{ID: m.srv.ID(), Name: m.srv.Name(), Now: now, Routes: []routeInfo{}}
	for _, ri := range m.srv.Routes() {
		out := routeInfo{RID: ri.RID, RemoteID: ri.RemoteID, RemoteName: ri.RemoteName,
			DidSolicit: ri.Solicited, IsConfigured: ri.Solicited, IP: ri.IP, Port: ri.Port,
			Start: ri.Start.UTC().Format(time.RFC3339Nano), LastActivity: ri.LastActivity.UTC().Format(time.RFC3339Nano),
			Uptime: now.Sub(ri.Start).Round(time.Second).String(), Idle: now.Sub(ri.LastActivity).Round(time.Second).String(),
			Pending: ri.Pending, InMsgs: ri.InMsgs, OutMsgs: ri.OutMsgs, InBytes: ri.InBytes, OutBytes: ri.OutBytes,
			DroppedMsgs: ri.DroppedMsgs,
			NumSubs:     ri.Subs, ConnectURLs: ri.ClientURLs}
		if ri.RTT > 0 {
			out.RTT = ri.RTT.String()
		}
		doc.Routes = append(doc.Routes, out)
	}
	doc.NumRoutes = len(doc.Routes)
	return doc
}

// clusterVarz is varz's cluster block.
type clusterVarz struct {
	Name string   `json:"name,omitempty"`
	Addr string   `json:"addr,omitempty"`
	Port int      `json:"cluster_port,omitempty"`
	URLs []string `json:"urls,omitempty"`
}
