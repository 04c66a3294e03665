package api

import (
	"bytes"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/web"
)

// The console is a set of static files (package web) that call the
// REST API with a session cookie instead of a bearer token. Browsers
// send cookies on their own, so every request a cookie authenticates is
// checked for cross-origin forgery, and the cookie itself is HttpOnly
// (no script reads it), Secure, SameSite=Strict and host-only.

// SessionCookie is the console's session cookie; the __Host- prefix
// makes browsers refuse it unless it is Secure, host-only and Path=/.
const SessionCookie = "__Host-contrail_session"

// APITokenPrefix starts every API token, so secret scanners can
// recognise a leaked one. Session tokens carry no prefix.
const APITokenPrefix = "contrail_api_"

// contentSecurityPolicy allows only the console's own files: no inline
// script or style, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// crossOrigin refuses state-changing requests a browser sends from
// another origin (by Sec-Fetch-Site, else Origin against Host).
// Requests without either header (curl, Terraform) pass; they carry no
// ambient cookie.
var crossOrigin = http.NewCrossOriginProtection()

func forbidden(detail string) *Problem {
	return problem(http.StatusForbidden, "forbidden", "Forbidden", detail)
}

// secureHeaders sets the headers every answer carries: the CSP and its
// companions, and no-store on the API, whose answers carry creds,
// tokens and tenant data no cache should keep.
func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if strings.HasPrefix(c.Request().URL.Path, "/v1/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// consoleRoutes adds the console's files and the routes only it needs.
func (s *Server) consoleRoutes(e *echo.Echo, v1, authed *echo.Group) {
	e.GET("/", s.consoleFile)
	e.GET("/app/*", s.consoleFile)
	e.GET("/vendor/*", s.consoleFile)
	v1.POST("/session", s.createSession)
	authed.GET("/session", s.getSession)
	authed.DELETE("/session", s.deleteSession)
	authed.GET("/members", s.listMembers)
	authed.GET("/accounts/:id/usage/history", s.usageHistory)
}

// consoleFile serves one embedded file; directories are not listed.
func (s *Server) consoleFile(c echo.Context) error {
	name := strings.TrimPrefix(path.Clean(c.Request().URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	data, err := fs.ReadFile(web.FS, name)
	if err != nil {
		return echo.ErrNotFound // a directory, or nothing
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, ctype)
	// Revalidated on every load, so a new binary's console is used at once.
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(c.Response(), c.Request(), name, time.Time{}, bytes.NewReader(data))
	return nil
}

// credential finds the request's token: the Authorization header if
// there is one, else the session cookie. A cookie-borne request that
// changes state must come from the console's own origin.
func (s *Server) credential(c echo.Context) (string, error) {
	req := c.Request()
	if h := req.Header.Get(echo.HeaderAuthorization); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="contrail"`)
			return "", unauthorized("an Authorization: Bearer <token> header is required")
		}
		return strings.TrimSpace(token), nil
	}
	ck, err := req.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="contrail"`)
		return "", unauthorized("an Authorization: Bearer <token> header is required")
	}
	if err := crossOrigin.Check(req); err != nil {
		return "", forbidden("cross-origin request refused: the console's session cookie works only from the console's own page")
	}
	return ck.Value, nil
}

// tokenClaims verifies a token as presented: an API token must carry
// its prefix's kind.
func (s *Server) tokenClaims(token string) (*auth.Claims, error) {
	raw, prefixed := strings.CutPrefix(token, APITokenPrefix)
	claims, err := s.Signer.Verify(raw, s.Now())
	if err != nil {
		return nil, err
	}
	if prefixed && claims.Kind != records.KindAPI {
		return nil, auth.ErrInvalidToken
	}
	return claims, nil
}

// touch records an API token's use, at most once per
// records.UsedGranularity. A failure to record it does not fail the
// request.
func (s *Server) touch(rec *records.Token) {
	if rec.Kind != records.KindAPI || !rec.NeedsTouch(s.Now()) {
		return
	}
	if err := s.Repo.TouchToken(rec.ID, s.Now()); err != nil {
		s.log.Warn("recording token use", "token", rec.ID, "err", err)
	}
}

func sessionCookie(token string, exp time.Time, now time.Time) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: token, Path: "/", Expires: exp,
		MaxAge: max(1, int(exp.Sub(now).Seconds())), Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

type sessionView struct {
	ExpiresAt    time.Time `json:"expires_at"`
	Kind         string    `json:"kind"`
	User         userView  `json:"user"`
	Organization orgView   `json:"organization"`
}

func (s *Server) sessionOf(p *records.Person, kind string, exp time.Time) (sessionView, error) {
	o, err := s.Repo.Org(p.OrgID)
	if err != nil {
		return sessionView{}, err
	}
	return sessionView{ExpiresAt: exp, Kind: kind, User: userView{ID: p.ID, Email: p.Email},
		Organization: orgView{ID: o.ID, Name: o.Name}}, nil
}

// createSession logs in as /v1/login does, but answers with the session
// in a cookie instead of the body: the console's script never holds it.
func (s *Server) createSession(c echo.Context) error {
	if err := crossOrigin.Check(c.Request()); err != nil {
		return forbidden("cross-origin login refused")
	}
	p, err := s.checkLogin(c)
	if err != nil {
		return err
	}
	token, exp, err := s.IssueToken(records.KindSession, "console", p, auth.SessionTTL)
	if err != nil {
		return err
	}
	view, err := s.sessionOf(p, records.KindSession, exp)
	if err != nil {
		return err
	}
	c.SetCookie(sessionCookie(token, exp, s.Now()))
	return c.JSON(http.StatusCreated, view)
}

func (s *Server) getSession(c echo.Context) error {
	me := who(c)
	rec, err := s.Repo.Token(me.TokenID)
	if err != nil {
		return err
	}
	p, err := s.Repo.Person(me.PersonID)
	if err != nil {
		return err
	}
	view, err := s.sessionOf(p, rec.Kind, rec.ExpiresAt)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, view)
}

// deleteSession logs out: the session token is revoked at once and the
// cookie cleared. An API token is not a session; it is revoked with
// DELETE /v1/tokens/{id}.
func (s *Server) deleteSession(c echo.Context) error {
	me := who(c)
	rec, err := s.Repo.Token(me.TokenID)
	if err != nil {
		return err
	}
	if rec.Kind != records.KindSession {
		return conflict("this is an API token, not a session; revoke it with DELETE /v1/tokens/" + rec.ID)
	}
	if err := s.Repo.DeleteToken(me.PersonID, me.TokenID); err != nil && !errors.Is(err, records.ErrNotFound) {
		return err
	}
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
	return c.NoContent(http.StatusNoContent)
}

type memberView struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *Server) listMembers(c echo.Context) error {
	people, err := s.Repo.Members(who(c).OrgID)
	if err != nil {
		return err
	}
	out := make([]memberView, 0, len(people))
	for _, p := range people {
		out = append(out, memberView{ID: p.ID, Email: p.Email, CreatedAt: p.CreatedAt})
	}
	return c.JSON(http.StatusOK, list(out))
}
