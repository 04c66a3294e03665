package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
)

// StreamCell sends JetStream API requests to an account's cell as the
// account; *provision.Cells is the real one.
type StreamCell interface {
	JetStream(ctx context.Context, cell string, accountSeed []byte, subject string, body []byte) ([]byte, error)
}

// streamRoutes adds stream management under an account: the control
// plane acts on the cell with the account's own credentials, so a
// caller needs only the REST API and a token.
func (s *Server) streamRoutes(g *echo.Group) {
	g.GET("/accounts/:id/streams/:name", s.getStream)
	g.POST("/accounts/:id/streams/:name", s.createStream)
	g.PUT("/accounts/:id/streams/:name", s.updateStream)
	g.DELETE("/accounts/:id/streams/:name", s.deleteStream)
}

type streamState struct {
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumer_count"`
}

type streamView struct {
	Name    string       `json:"name"`
	Config  streamConfig `json:"config"`
	State   streamState  `json:"state"`
	Created time.Time    `json:"created"`
}

// jsStreamReply is a cell's answer to STREAM.INFO, CREATE, UPDATE and
// DELETE.
type jsStreamReply struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Config  json.RawMessage `json:"config"`
	State   streamState     `json:"state"`
	Created time.Time       `json:"created"`
	Success bool            `json:"success"`
}

// streamCall sends one JetStream API request for account a and decodes
// the reply; a JetStream error becomes the problem it means.
func (s *Server) streamCall(c echo.Context, a *records.Account, verb, name string, body []byte) (*jsStreamReply, error) {
	if s.Streams == nil {
		return nil, cellUnavailable("stream management is not configured")
	}
	data, err := s.Streams.JetStream(c.Request().Context(), a.Cell, a.Seed, "$JS.API.STREAM."+verb+"."+name, body)
	switch {
	case errors.Is(err, provision.ErrNoJetStream):
		return nil, conflict("JetStream is not enabled for this account (its limits.jetstream turn it off)")
	case errors.Is(err, provision.ErrAccountRefused):
		return nil, conflict("the cell refused the control plane's connection as this account " +
			"(is it at limits.max_connections?): " + err.Error())
	case errors.Is(err, provision.ErrCellUnavailable):
		return nil, cellUnavailable("the account's cell did not answer; try again")
	case err != nil:
		return nil, err
	}
	var r jsStreamReply
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("stream %q: unreadable reply from cell %s: %w", name, a.Cell, err)
	}
	if r.Error != nil {
		return nil, jsProblem(name, r.Error.Code, r.Error.ErrCode, r.Error.Description)
	}
	return &r, nil
}

// jsProblem turns a JetStream API error into the REST problem it means,
// naming the request field at fault where the error is about one.
func jsProblem(name string, code, errCode int, desc string) error {
	switch errCode {
	case 10059:
		return notFound("stream")
	case 10058:
		return conflict(fmt.Sprintf("stream %q already exists with another configuration", name))
	case 10065:
		return invalid("subjects", desc)
	case 10074, 10061:
		return invalid("num_replicas", desc)
	case 10039:
		return conflict("JetStream is not enabled for this account (its limits.jetstream turn it off)")
	case 10027:
		return conflict("the account is at limits.jetstream.max_streams: " + desc)
	case 10023, 10028, 10047, 10053:
		return conflict("the account's JetStream limits do not allow this stream: " + desc)
	}
	if code == http.StatusServiceUnavailable {
		return cellUnavailable(desc)
	}
	return invalid(jsField(desc), desc)
}

// jsFields maps words in nats-server's config errors to the field they
// are about, most specific first.
var jsFields = []struct{ word, field string }{
	{"discard new per subject", "discard_new_per_subject"},
	{"duplicates window", "duplicate_window"},
	{"max age", "max_age"},
	{"maxage", "max_age"},
	{"message ttl", "allow_msg_ttl"},
	{"replicas", "num_replicas"},
	{"storage", "storage"},
	{"retention", "retention"},
	{"description", "description"},
	{"metadata", "metadata"},
	{"max msg size", "max_msg_size"},
	{"max consumers", "max_consumers"},
	{"republish", "republish"},
	{"subject", "subjects"},
}

func jsField(desc string) string {
	d := strings.ToLower(desc)
	for _, f := range jsFields {
		if strings.Contains(d, f.word) {
			return f.field
		}
	}
	return "body"
}

// view turns a cell's reply into the API's stream.
func (r *jsStreamReply) view(name string) (streamView, error) {
	v := streamView{Name: name, State: r.State, Created: r.Created.UTC()}
	if err := json.Unmarshal(r.Config, &v.Config); err != nil {
		return v, fmt.Errorf("stream %q: unreadable config from cell: %w", name, err)
	}
	v.Config.Metadata = userMetadata(v.Config.Metadata)
	return v, nil
}

// streamAnswer sends one request for the stream and answers with the
// stream the cell returns, logging changes.
func (s *Server) streamAnswer(c echo.Context, a *records.Account, verb, name string, body []byte, status int) error {
	r, err := s.streamCall(c, a, verb, name, body)
	if err != nil {
		return err
	}
	if verb != "INFO" {
		s.log.Info("stream "+strings.ToLower(verb)+"d", "account", a.ID, "stream", name)
	}
	v, err := r.view(name)
	if err != nil {
		return err
	}
	return c.JSON(status, v)
}

// streamTarget loads the path's account and checks the stream name.
func (s *Server) streamTarget(c echo.Context) (*records.Account, string, error) {
	a, err := s.account(c)
	if err != nil {
		return nil, "", err
	}
	name := c.Param("name")
	// echo routes on the escaped path when it has escapes the plain one
	// would not (a %2F), and then gives parameters escaped: "a%2Fb" names
	// "a/b", which is refused, not a stream of that literal name.
	if c.Request().URL.RawPath != "" {
		if name, err = url.PathUnescape(name); err != nil {
			return nil, "", invalid("name", "is not a valid URL path segment")
		}
	}
	if err := checkStreamName("name", name); err != nil {
		return nil, "", err
	}
	return a, name, nil
}

// streamRequest loads the path's account and stream name and decodes
// and checks a create or update body; fields left out take
// nats-server's defaults.
func (s *Server) streamRequest(c echo.Context) (*records.Account, string, *streamConfig, error) {
	a, name, err := s.streamTarget(c)
	if err != nil {
		return nil, "", nil, err
	}
	cfg := defaultStreamConfig()
	if err := decode(c, &cfg); err != nil {
		return nil, "", nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, "", nil, err
	}
	return a, name, &cfg, nil
}

func (s *Server) getStream(c echo.Context) error {
	a, name, err := s.streamTarget(c)
	if err != nil {
		return err
	}
	return s.streamAnswer(c, a, "INFO", name, nil, http.StatusOK)
}

func (s *Server) createStream(c echo.Context) error {
	a, name, cfg, err := s.streamRequest(c)
	if err != nil {
		return err
	}
	// JetStream's create succeeds for an existing stream of the same
	// config; the API's create is for a new stream only, so that a tool
	// never adopts a stream it did not make without being told to.
	if _, err := s.streamCall(c, a, "INFO", name, nil); err == nil {
		return conflict(fmt.Sprintf("stream %q already exists; change it with PUT", name))
	} else if p := (*Problem)(nil); !errors.As(err, &p) || p.Status != http.StatusNotFound {
		return err
	}
	body, err := cfg.overlay(nil, name)
	if err != nil {
		return err
	}
	return s.streamAnswer(c, a, "CREATE", name, body, http.StatusCreated)
}

func (s *Server) updateStream(c echo.Context) error {
	a, name, cfg, err := s.streamRequest(c)
	if err != nil {
		return err
	}
	cur, err := s.streamCall(c, a, "INFO", name, nil)
	if err != nil {
		return err
	}
	var old streamConfig
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(cur.Config, &old); err != nil {
		return fmt.Errorf("stream %q: unreadable config from cell: %w", name, err)
	}
	if err := json.Unmarshal(cur.Config, &raw); err != nil {
		return fmt.Errorf("stream %q: unreadable config from cell: %w", name, err)
	}
	if err := checkStreamUpdate(&old, cfg); err != nil {
		return err
	}
	body, err := cfg.overlay(raw, name)
	if err != nil {
		return err
	}
	return s.streamAnswer(c, a, "UPDATE", name, body, http.StatusOK)
}

func (s *Server) deleteStream(c echo.Context) error {
	a, name, err := s.streamTarget(c)
	if err != nil {
		return err
	}
	if _, err := s.streamCall(c, a, "DELETE", name, nil); err != nil {
		return err
	}
	s.log.Info("stream deleted", "account", a.ID, "stream", name)
	return c.NoContent(http.StatusNoContent)
}
