// Package api is the control plane's REST API under /v1 (echo), the
// account resolver data-plane nodes read, /healthz, /metrics and
// /openapi.yaml. Handlers parse and validate every body strictly, answer
// errors as application/problem+json, and never reveal whether another
// organization's resource exists (404, never 403).
package api

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
)

// CellReader answers usage questions about an account on its cell;
// *provision.Cells is the real one.
type CellReader interface {
	Usage(ctx context.Context, cell, pub string) (*provision.Usage, error)
	Streams(ctx context.Context, cell, pub string) ([]provision.Stream, error)
}

// Provisioner makes accounts and users and keeps cells in step with
// them; *provision.Provisioner is the real one. Change re-signs an
// account inside a records update; Sync pushes it to its cell; Kick asks
// the reconcile loop to retry at once.
type Provisioner interface {
	CreateAccount(na provision.NewAccount, now time.Time) (*records.Account, error)
	CreateUser(a *records.Account, nu provision.NewUser, now time.Time) (*records.NatsUser, []byte, error)
	Change(a *records.Account) error
	Sync(ctx context.Context, orgID, id string) error
	Kick()
}

// Config is what the API is built from.
type Config struct {
	Repo   *records.Repo
	Signer *auth.Signer
	// Throttle slows password guessing (by email and client address);
	// auth.NewThrottle() if nil.
	Throttle *auth.Throttle
	// SignupThrottle bounds sign-ups per client address;
	// auth.NewSignupThrottle() if nil.
	SignupThrottle *auth.Throttle
	// Hasher runs password hashes within a memory budget;
	// auth.NewHasher(0, 0) if nil.
	Hasher *auth.Hasher
	// TrustedProxies are the networks whose X-Forwarded-For the client
	// address is taken from (for throttling). Empty: the address is the
	// connection's, and the header is ignored.
	TrustedProxies []*net.IPNet
	Prov           Provisioner
	// Keys are the operator's and system account's; the resolver serves
	// the system account's JWT.
	Keys  *provision.Keys
	Cells CellReader
	// Streams manages streams on cells as their accounts.
	Streams StreamCell
	// DefaultCell is where new accounts are placed.
	DefaultCell string
	// NatsURLs maps a cell to the URL its clients connect to.
	NatsURLs map[string]string
	// Spec is the OpenAPI document served at /openapi.yaml.
	Spec []byte
	Log  *slog.Logger
	// Ready reports whether every cell is connected (for /readyz).
	Ready func() bool
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Collectors are more metrics for /metrics (the provisioner's).
	Collectors []prometheus.Collector
	// Usage keeps sampled usage for the history route; none kept if nil.
	Usage UsageHistory
	// UsageInterval is how often Usage samples (reported with the history).
	UsageInterval time.Duration
}

// Server is the HTTP API.
type Server struct {
	Config
	log  *slog.Logger
	echo *echo.Echo

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// New builds the API.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Throttle == nil {
		cfg.Throttle = auth.NewThrottle()
	}
	if cfg.SignupThrottle == nil {
		cfg.SignupThrottle = auth.NewSignupThrottle()
	}
	if cfg.Hasher == nil {
		cfg.Hasher = auth.NewHasher(0, 0)
	}
	s := &Server{Config: cfg, log: cfg.Log}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.IPExtractor = clientAddress(cfg.TrustedProxies)
	s.echo = e

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "contrail_controlplane_http_requests_total",
		Help: "HTTP requests by method, route and status.",
	}, []string{"method", "route", "code"})
	s.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "contrail_controlplane_http_request_duration_seconds",
		Help:    "HTTP request latency by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	reg.MustRegister(s.requests, s.duration)
	reg.MustRegister(cfg.Collectors...)
	e.Use(s.observe, secureHeaders)

	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.ready)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	e.GET("/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", s.Spec) })
	e.GET("/jwt/v1/accounts/:key", s.resolve)
	e.GET("/jwt/v1/accounts/", s.resolverPing)

	v1 := e.Group("/v1")
	v1.POST("/signup", s.signup)
	v1.POST("/login", s.login)
	authed := v1.Group("", s.authenticate)
	authed.POST("/tokens", s.createToken)
	authed.GET("/tokens", s.listTokens)
	authed.DELETE("/tokens/:id", s.deleteToken)
	authed.GET("/accounts", s.listAccounts)
	authed.POST("/accounts", s.createAccount)
	authed.GET("/accounts/:id", s.getAccount)
	authed.PATCH("/accounts/:id", s.patchAccount)
	authed.DELETE("/accounts/:id", s.deleteAccount)
	authed.GET("/accounts/:id/usage", s.usage)
	authed.GET("/accounts/:id/streams", s.streams)
	authed.POST("/accounts/:id/users", s.createUser)
	authed.GET("/accounts/:id/users", s.listUsers)
	authed.DELETE("/accounts/:id/users/:user_id", s.deleteUser)
	s.consoleRoutes(e, v1, authed)
	s.streamRoutes(authed)
	// Anything else under /v1 needs a token too, so an unauthenticated
	// caller learns nothing about which routes exist.
	authed.Any("/*", func(c echo.Context) error { return echo.ErrNotFound })
	return s
}

// clientAddress is how the client address (which throttling is keyed
// by) is found: the connection's, unless the connection comes from a
// trusted proxy, whose X-Forwarded-For is believed back to the first
// address that is not a trusted proxy. A header from anyone else is
// ignored: a client must not pick the address it is throttled under.
func clientAddress(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ServeHTTP makes the Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// ready answers 200 once every cell is connected, 503 before: scripts
// wait on it before connecting clients.
func (s *Server) ready(c echo.Context) error {
	if s.Ready != nil && !s.Ready() {
		return cellUnavailable("not connected to every cell yet")
	}
	return c.String(http.StatusOK, "ready\n")
}

// observe counts every request by route and status.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		s.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(c.Response().Status)).Inc()
		s.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		return nil
	}
}

// items is the envelope of every list.
type items[T any] struct {
	Items []T `json:"items"`
}

func list[T any](v []T) items[T] {
	if v == nil {
		v = []T{}
	}
	return items[T]{Items: v}
}
