package provider_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/contrail/contrail/openapi/spectest"
)

// specProxy stands between the tests (the provider, and their own
// clients) and the control plane, and holds every exchange to
// openapi.yaml: what the provider sends and reads must be what the
// contract says, not only what today's server accepts.
//
// A request the spec does not allow counts only if the server accepted
// it (a 4xx answer means both refused it, as a test of a bad value
// expects); every answer must match the spec.
type specProxy struct {
	srv   *httptest.Server
	check *spectest.Checker
	mu    sync.Mutex
	bad   []string // guarded by mu
}

// startSpecProxy proxies to backend (a base URL) on a loopback port.
func startSpecProxy(backend string) (*specProxy, error) {
	target, err := url.Parse(backend)
	if err != nil {
		return nil, fmt.Errorf("spec proxy: backend %q: %w", backend, err)
	}
	p := &specProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec := httptest.NewRecorder()
		fwd := r.Clone(r.Context())
		fwd.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(rec, fwd)
		p.record(r, body, rec)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	if p.check, err = spectest.New(p.srv.URL); err != nil {
		p.srv.Close()
		return nil, err
	}
	return p, nil
}

// record checks one exchange and keeps what the spec does not allow.
func (p *specProxy) record(r *http.Request, body []byte, rec *httptest.ResponseRecorder) {
	req := r.Clone(r.Context())
	req.URL = &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	x := spectest.Exchange{Request: req, RequestBody: body, SkipRequest: rec.Code >= 400 && rec.Code < 500,
		Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	errs := p.check.Check(x)
	if len(errs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, err := range errs {
		p.bad = append(p.bad, fmt.Sprintf("%s %s -> %d: %v", r.Method, r.URL.RequestURI(), rec.Code, err))
	}
}

// violations returns what the exchanges so far broke of the spec.
func (p *specProxy) violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bad...)
}

// URL is the proxy's base URL.
func (p *specProxy) URL() string { return p.srv.URL }

// Close stops the proxy.
func (p *specProxy) Close() { p.srv.Close() }
