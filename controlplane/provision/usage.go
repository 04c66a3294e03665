package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Usage is what an account uses on its cell right now.
type Usage struct {
	Connections  int    `json:"connections"`
	Streams      int    `json:"streams"`
	Consumers    int    `json:"consumers"`
	Messages     uint64 `json:"messages"`
	StorageBytes uint64 `json:"storage_bytes"`
	MemoryBytes  uint64 `json:"memory_bytes"`
}

// Stream is one of an account's streams as a cell reports it.
type Stream struct {
	Name      string   `json:"name"`
	Subjects  []string `json:"subjects"`
	Storage   string   `json:"storage,omitempty"`
	Replicas  int      `json:"replicas,omitempty"`
	Messages  uint64   `json:"messages"`
	Bytes     uint64   `json:"bytes"`
	Consumers int      `json:"consumers"`
}

// jsz is the part of nats-server's account JSZ reply (AccountDetail in a
// ServerAPIResponse) the control plane reads.
type jsz struct {
	Data  *jszData  `json:"data"`
	Error *apiError `json:"error"`
}

type jszData struct {
	Memory  uint64      `json:"memory"`
	Storage uint64      `json:"storage"`
	Streams []jszStream `json:"stream_detail"`
}

type jszStream struct {
	Name   string `json:"name"`
	Config *struct {
		Subjects []string `json:"subjects"`
		Storage  string   `json:"storage"`
		Replicas int      `json:"num_replicas"`
	} `json:"config"`
	State struct {
		Messages  uint64 `json:"messages"`
		Bytes     uint64 `json:"bytes"`
		LastSeq   uint64 `json:"last_seq"`
		Consumers int    `json:"consumer_count"`
	} `json:"state"`
}

// notLoaded reports a JSZ error that means the cell simply has nothing for
// the account yet: no client has connected, or JetStream is off for it.
func notLoaded(e *apiError) bool {
	d := strings.ToLower(e.Description)
	return strings.Contains(d, "not found") || strings.Contains(d, "not jetstream enabled") ||
		strings.Contains(d, "jetstream not enabled")
}

// accountJSZ asks the cell's nodes for the account's JetStream detail
// and merges their answers. A nil result with no error means no node has
// the account's JetStream; loaded says some node has the account.
func (c *Cells) accountJSZ(ctx context.Context, cell, pub string) (*jszData, bool, error) {
	replies, err := c.requestAll(ctx, cell, "$SYS.REQ.ACCOUNT."+pub+".JSZ", []byte(`{"streams":true,"config":true}`))
	if err != nil {
		return nil, false, err
	}
	var datas []*jszData
	loaded := false
	for _, data := range replies {
		var r jsz
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, false, fmt.Errorf("%w: %s: unreadable JSZ reply: %v", ErrCellUnavailable, cell, err)
		}
		if r.Error != nil {
			if !notLoaded(r.Error) {
				return nil, false, fmt.Errorf("%w: %s: JSZ: %d %s", ErrCellUnavailable, cell, r.Error.Code, r.Error.Description)
			}
			// Loaded but without JetStream, or not loaded: STATZ tells.
			loaded = loaded || !strings.Contains(strings.ToLower(r.Error.Description), "not found")
			continue
		}
		loaded = true
		if r.Data != nil {
			datas = append(datas, r.Data)
		}
	}
	return mergeJSZ(datas), loaded, nil
}

// mergeJSZ merges the JSZ answers of a cell's nodes. One answer is taken
// as it is. From several, each stream counts once (a node lists the
// streams it holds; a stream listed by several nodes counts as the copy
// furthest ahead), and the bytes are those of the streams.
func mergeJSZ(datas []*jszData) *jszData {
	switch len(datas) {
	case 0:
		return nil
	case 1:
		return datas[0]
	}
	byName := map[string]jszStream{}
	var order []string
	for _, d := range datas {
		for _, st := range d.Streams {
			have, ok := byName[st.Name]
			if !ok {
				order = append(order, st.Name)
			}
			if !ok || st.State.LastSeq > have.State.LastSeq {
				byName[st.Name] = st
			}
		}
	}
	sort.Strings(order)
	out := &jszData{}
	for _, name := range order {
		st := byName[name]
		out.Streams = append(out.Streams, st)
		if st.Config != nil && st.Config.Storage == "memory" {
			out.Memory += st.State.Bytes
		} else {
			out.Storage += st.State.Bytes
		}
	}
	return out
}

// Usage asks the account's cell for its connections (STATZ) and
// JetStream use (JSZ). An account the cell has not loaded uses nothing.
func (c *Cells) Usage(ctx context.Context, cell, pub string) (*Usage, error) {
	js, loaded, err := c.accountJSZ(ctx, cell, pub)
	if err != nil {
		return nil, err
	}
	u := &Usage{}
	if js != nil {
		u.MemoryBytes, u.StorageBytes = js.Memory, js.Storage
		u.Streams = len(js.Streams)
		for _, s := range js.Streams {
			u.Consumers += s.State.Consumers
			u.Messages += s.State.Messages
		}
	}
	if !loaded {
		return u, nil
	}
	replies, err := c.requestAll(ctx, cell, "$SYS.REQ.ACCOUNT."+pub+".STATZ", []byte(`{"include_unused":true}`))
	if err != nil {
		return nil, err
	}
	// Each node counts the connections it serves.
	for _, data := range replies {
		if err := addConns(u, cell, pub, data); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// addConns adds the account's connections one node's STATZ reports.
func addConns(u *Usage, cell, pub string, data []byte) error {
	var st struct {
		Data *struct {
			Accounts []struct {
				Account string `json:"acc"`
				Conns   int    `json:"conns"`
			} `json:"account_statz"`
		} `json:"data"`
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%w: %s: unreadable STATZ reply: %v", ErrCellUnavailable, cell, err)
	}
	if st.Error != nil {
		return fmt.Errorf("%w: %s: STATZ: %d %s", ErrCellUnavailable, cell, st.Error.Code, st.Error.Description)
	}
	if st.Data != nil {
		for _, a := range st.Data.Accounts {
			if a.Account == pub {
				u.Connections += a.Conns
			}
		}
	}
	return nil
}

// Streams lists the account's streams on its cell.
func (c *Cells) Streams(ctx context.Context, cell, pub string) ([]Stream, error) {
	js, _, err := c.accountJSZ(ctx, cell, pub)
	if err != nil {
		return nil, err
	}
	out := []Stream{}
	if js == nil {
		return out, nil
	}
	for _, s := range js.Streams {
		st := Stream{Name: s.Name, Subjects: []string{}, Messages: s.State.Messages, Bytes: s.State.Bytes,
			Consumers: s.State.Consumers}
		if s.Config != nil {
			if s.Config.Subjects != nil {
				st.Subjects = s.Config.Subjects
			}
			st.Storage, st.Replicas = s.Config.Storage, s.Config.Replicas
		}
		out = append(out, st)
	}
	return out, nil
}
