package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// sysAPIResponse is nats-server's envelope for monitoring answers over
// NATS: the answering server, then the document or an error.
type sysAPIResponse struct {
	Server *sysServerInfo `json:"server"`
	Data   any            `json:"data,omitempty"`
	Error  *sysAPIError   `json:"error,omitempty"`
}

// sysAPIError is the error of a sysAPIResponse; Code is HTTP-like.
type sysAPIError struct {
	Code        int    `json:"code"`
	Description string `json:"description,omitempty"`
}

// eventFilter is nats-server's EventFilterOptions: a request meant for
// some servers only names them, and the others stay silent.
type eventFilter struct {
	Name       string   `json:"server_name,omitempty"`
	Cluster    string   `json:"cluster,omitempty"`
	Host       string   `json:"host,omitempty"`
	ExactMatch bool     `json:"exact_match,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Domain     string   `json:"domain,omitempty"`
}

// errNoReply tells zReply the request is not for this server: it answers
// nothing, as nats-server leaves requests to the servers they concern.
var errNoReply = errors.New("request not for this server")

// excludes reports whether the filter leaves this server out. Contrail
// has no server tags, so filters on them leave it out.
func (f *eventFilter) excludes(s *Server) bool {
	has := strings.Contains
	if f.ExactMatch {
		has = func(a, b string) bool { return a == b }
	}
	if (f.Name != "" && !has(s.name, f.Name)) || (f.Host != "" && !has(s.opts.Host, f.Host)) ||
		(f.Cluster != "" && !has(s.ClusterName(), f.Cluster)) || len(f.Tags) > 0 {
		return true
	}
	if f.Domain != "" {
		d := s.jetstream.Load()
		return d == nil || *d != f.Domain
	}
	return false
}

// zReply answers a monitoring request as nats-server's zReq does: a body
// that is not JSON gets 400; a filter that leaves this server out gets
// nothing; otherwise build's document, or its error (400 for
// ErrBadOptions, else 500), in the envelope.
func (s *Server) zReply(reply string, body []byte, build func() (any, error)) {
	s.zReplyIn(s.sys, reply, body, build)
}

// zReplyIn is zReply for a request made in account a.
func (s *Server) zReplyIn(a *Account, reply string, body []byte, build func() (any, error)) {
	if reply == "" {
		return
	}
	resp := &sysAPIResponse{}
	var err error
	code := http.StatusInternalServerError
	if len(body) > 0 {
		var f eventFilter
		if err = json.Unmarshal(body, &f); err != nil {
			code = http.StatusBadRequest
		} else if f.excludes(s) {
			return
		}
	}
	if err == nil {
		resp.Data, err = build()
		switch {
		case errors.Is(err, errNoReply):
			return
		case errors.Is(err, ErrBadOptions):
			code = http.StatusBadRequest
		}
	}
	if err != nil {
		resp.Data, resp.Error = nil, &sysAPIError{Code: code, Description: err.Error()}
	}
	resp.Server = s.sysInfo()
	s.replyIn(a, reply, resp)
}

// decodeOptions reads a request's JSON options into v; an empty body
// leaves v at its defaults.
func decodeOptions(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadOptions, err)
	}
	return nil
}

// sysHandler serves one system request, on a goroutine of its own: it
// owns its arguments.
type sysHandler func(subject, reply string, body []byte)

// sysServe subscribes h to subj in the system account. Requests are
// copied off the publisher's goroutine, which must not wait for them.
func (s *Server) sysServe(subj string, h sysHandler) error {
	_, err := s.sys.SubscribeInternal(subj, func(subject, reply, _, msg []byte) {
		sub, rep, body := string(subject), string(reply), bytes.Clone(msg)
		go h(sub, rep, body)
	})
	if err != nil {
		return fmt.Errorf("system service %s: %w", subj, err)
	}
	return nil
}
