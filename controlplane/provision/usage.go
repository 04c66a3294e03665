package provision

import (
	"context"
	"encoding/json"
	"fmt"
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
	Name     string   `json:"name"`
	Subjects []string `json:"subjects"`
	Messages uint64   `json:"messages"`
	Bytes    uint64   `json:"bytes"`
}

// jsz is the part of nats-server's account JSZ reply (AccountDetail in a
// ServerAPIResponse) the control plane reads.
type jsz struct {
	Data *struct {
		Memory  uint64 `json:"memory"`
		Storage uint64 `json:"storage"`
		Streams []struct {
			Name   string `json:"name"`
			Config *struct {
				Subjects []string `json:"subjects"`
			} `json:"config"`
			State struct {
				Messages  uint64 `json:"messages"`
				Bytes     uint64 `json:"bytes"`
				Consumers int    `json:"consumer_count"`
			} `json:"state"`
		} `json:"stream_detail"`
	} `json:"data"`
	Error *apiError `json:"error"`
}

// notLoaded reports a JSZ error that means the cell simply has nothing for
// the account yet: no client has connected, or JetStream is off for it.
func notLoaded(e *apiError) bool {
	d := strings.ToLower(e.Description)
	return strings.Contains(d, "not found") || strings.Contains(d, "not jetstream enabled") ||
		strings.Contains(d, "jetstream not enabled")
}

// accountJSZ asks the cell for the account's JetStream detail. A nil
// result with no error means the cell has not loaded the account.
func (c *Cells) accountJSZ(ctx context.Context, cell, pub string) (*jsz, bool, error) {
	data, err := c.request(ctx, cell, "$SYS.REQ.ACCOUNT."+pub+".JSZ", []byte(`{"streams":true,"config":true}`))
	if err != nil {
		return nil, false, err
	}
	var r jsz
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, false, fmt.Errorf("%w: %s: unreadable JSZ reply: %v", ErrCellUnavailable, cell, err)
	}
	if r.Error != nil {
		if notLoaded(r.Error) {
			// Loaded but without JetStream, or not loaded: STATZ tells.
			return nil, !strings.Contains(strings.ToLower(r.Error.Description), "not found"), nil
		}
		return nil, false, fmt.Errorf("%w: %s: JSZ: %d %s", ErrCellUnavailable, cell, r.Error.Code, r.Error.Description)
	}
	return &r, true, nil
}

// Usage asks the account's cell for its connections (STATZ) and
// JetStream use (JSZ). An account the cell has not loaded uses nothing.
func (c *Cells) Usage(ctx context.Context, cell, pub string) (*Usage, error) {
	js, loaded, err := c.accountJSZ(ctx, cell, pub)
	if err != nil {
		return nil, err
	}
	u := &Usage{}
	if js != nil && js.Data != nil {
		u.MemoryBytes, u.StorageBytes = js.Data.Memory, js.Data.Storage
		u.Streams = len(js.Data.Streams)
		for _, s := range js.Data.Streams {
			u.Consumers += s.State.Consumers
			u.Messages += s.State.Messages
		}
	}
	if !loaded {
		return u, nil
	}
	data, err := c.request(ctx, cell, "$SYS.REQ.ACCOUNT."+pub+".STATZ", []byte(`{"include_unused":true}`))
	if err != nil {
		return nil, err
	}
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
		return nil, fmt.Errorf("%w: %s: unreadable STATZ reply: %v", ErrCellUnavailable, cell, err)
	}
	if st.Error != nil {
		return nil, fmt.Errorf("%w: %s: STATZ: %d %s", ErrCellUnavailable, cell, st.Error.Code, st.Error.Description)
	}
	if st.Data != nil {
		for _, a := range st.Data.Accounts {
			if a.Account == pub {
				u.Connections += a.Conns
			}
		}
	}
	return u, nil
}

// Streams lists the account's streams on its cell.
func (c *Cells) Streams(ctx context.Context, cell, pub string) ([]Stream, error) {
	js, _, err := c.accountJSZ(ctx, cell, pub)
	if err != nil {
		return nil, err
	}
	out := []Stream{}
	if js == nil || js.Data == nil {
		return out, nil
	}
	for _, s := range js.Data.Streams {
		st := Stream{Name: s.Name, Subjects: []string{}, Messages: s.State.Messages, Bytes: s.State.Bytes}
		if s.Config != nil && s.Config.Subjects != nil {
			st.Subjects = s.Config.Subjects
		}
		out = append(out, st)
	}
	return out, nil
}
