// Package spectest holds HTTP requests and responses to openapi.yaml.
// Tests use it (the API's unit tests and the end-to-end tests alike) so
// the spec cannot drift from the server; no production code imports it.
package spectest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	oaslegacy "github.com/getkin/kin-openapi/routers/legacy"

	"github.com/contrail/contrail/openapi"
)

func init() {
	// /openapi.yaml answers YAML, which kin-openapi has no decoder for.
	openapi3filter.RegisterBodyDecoder("application/yaml", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
}

// Checker validates exchanges with a server at one base URL.
type Checker struct {
	router routers.Router
}

// New loads and validates the spec, with baseURL as its one server.
func New(baseURL string) (*Checker, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
	if err != nil {
		return nil, fmt.Errorf("loading openapi.yaml: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: baseURL}}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	r, err := oaslegacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi router: %w", err)
	}
	return &Checker{router: r}, nil
}

// Exchange is one request (with its full URL) and the answer it got.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte
	// SkipRequest marks a request sent malformed on purpose: only its
	// answer is validated.
	SkipRequest bool
	Status      int
	Header      http.Header
	Body        []byte
}

// Check returns what in the exchange the spec does not allow: the route
// missing from the spec, the request (unless skipped), the response.
func (c *Checker) Check(x Exchange) []error {
	req := x.Request.Clone(x.Request.Context())
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return []error{fmt.Errorf("%s %s is not in openapi.yaml: %w", req.Method, req.URL.Path, err)}
	}
	var errs []error
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true,
		IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if !x.SkipRequest {
		if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
			errs = append(errs, fmt.Errorf("request %s %s %.300s does not match the spec: %w", req.Method, req.URL, x.RequestBody, err))
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status, Header: x.Header,
		Body: io.NopCloser(bytes.NewReader(x.Body)), Options: opts}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		errs = append(errs, fmt.Errorf("response to %s %s (%d %.300s) does not match the spec: %w", req.Method, req.URL, x.Status, x.Body, err))
	}
	return errs
}
