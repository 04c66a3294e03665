package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/contrail/contrail/controlplane/auth"
	"github.com/contrail/contrail/controlplane/records"
)

// caller is who made an authenticated request.
type caller struct {
	PersonID string
	OrgID    string
	TokenID  string
}

const callerKey = "contrail.caller"

func who(c echo.Context) caller { return c.Get(callerKey).(caller) }

// authenticate requires a valid token (a bearer token, or the console's
// session cookie) whose id is still in the store: a deleted token is
// refused on its next request.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, err := s.credential(c)
		if err != nil {
			return err
		}
		claims, err := s.tokenClaims(token)
		if err != nil {
			return unauthorized("the token is invalid or expired")
		}
		rec, err := s.Repo.Token(claims.ID)
		if errors.Is(err, records.ErrNotFound) || (err == nil && (rec.PersonID != claims.Subject || !rec.ExpiresAt.After(s.Now()))) {
			return unauthorized("the token was revoked or has expired")
		}
		if err != nil {
			return err
		}
		s.touch(rec)
		c.Set(callerKey, caller{PersonID: rec.PersonID, OrgID: rec.OrgID, TokenID: rec.ID})
		return next(c)
	}
}

type signupReq struct {
	Email        string `json:"email"`
	Password     string `json:"password"`
	Organization string `json:"organization"`
}

type userView struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

type orgView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type signupResp struct {
	Token        string    `json:"token"`
	ExpiresAt    time.Time `json:"expires_at"`
	User         userView  `json:"user"`
	Organization orgView   `json:"organization"`
}

func (s *Server) signup(c echo.Context) error {
	var req signupReq
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := checkEmail(req.Email); err != nil {
		return err
	}
	if err := checkPassword(req.Password); err != nil {
		return err
	}
	if err := checkName("organization", req.Organization); err != nil {
		return err
	}
	if wait := s.SignupThrottle.Attempt(s.Now(), "ip:"+c.RealIP()); wait > 0 {
		return tooManyRequests("too many sign-ups from this address", wait)
	}
	// A taken email is refused before the costly hash (SignUp checks
	// again under its lock).
	if _, err := s.Repo.PersonByEmail(req.Email); err == nil {
		return conflict("an account with this email already exists")
	} else if !errors.Is(err, records.ErrNotFound) {
		return err
	}
	hash, err := s.Hasher.Hash(c.Request().Context(), req.Password)
	if errors.Is(err, auth.ErrBusy) {
		s.SignupThrottle.Release("ip:" + c.RealIP())
		return hashersBusy()
	}
	if err != nil {
		return err
	}
	now := s.Now().UTC()
	p := &records.Person{ID: records.NewID("usr"), Email: req.Email, PasswordHash: hash, CreatedAt: now}
	o := &records.Org{ID: records.NewID("org"), Name: req.Organization, CreatedAt: now}
	p.OrgID = o.ID
	if err := s.Repo.SignUp(p, o); err != nil {
		if errors.Is(err, records.ErrEmailTaken) {
			return conflict("an account with this email already exists")
		}
		return err
	}
	s.log.Info("signed up", "person", p.ID, "org", o.ID)
	token, exp, err := s.IssueToken(records.KindSession, "session", p, auth.SessionTTL)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, signupResp{Token: token, ExpiresAt: exp,
		User: userView{ID: p.ID, Email: p.Email}, Organization: orgView{ID: o.ID, Name: o.Name}})
}

// IssueToken stores a token record for person p and signs its JWT, valid
// for ttl from now; an API token is prefixed with APITokenPrefix. The
// handlers and the dev bootstrap issue tokens here.
func (s *Server) IssueToken(kind, name string, p *records.Person, ttl time.Duration) (string, time.Time, error) {
	now := s.Now().UTC().Truncate(time.Second)
	exp := now.Add(ttl)
	rec := &records.Token{ID: records.NewID("tok"), Kind: kind, Name: name, PersonID: p.ID, OrgID: p.OrgID,
		CreatedAt: now, ExpiresAt: exp}
	if err := s.Repo.PutToken(rec, s.Now()); err != nil {
		return "", time.Time{}, err
	}
	token, err := s.Signer.Sign(rec.ID, kind, p.ID, p.OrgID, now, exp)
	if err == nil && kind == records.KindAPI {
		token = APITokenPrefix + token
	}
	return token, exp, err
}

type loginReq struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type loginResp struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// dummyHash makes a login for an unknown email cost what a wrong password
// costs, so timing does not tell which emails are registered. It is made
// on first use: argon2id takes tens of MiB, which a data-plane process
// (the same binary) must not pay at start.
var dummyHash = sync.OnceValue(func() string {
	h, _ := auth.HashPassword("contrail-dummy-password")
	return h
})

// hashersBusy answers a request whose password hash found no room in
// the memory budget in time.
func hashersBusy() *Problem {
	return tooManyRequests("too many password checks in progress", time.Second)
}

func (s *Server) login(c echo.Context) error {
	p, err := s.checkLogin(c)
	if err != nil {
		return err
	}
	token, exp, err := s.IssueToken(records.KindSession, "session", p, auth.SessionTTL)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, loginResp{Token: token, ExpiresAt: exp})
}

// checkLogin reads a login body and returns the person whose email and
// password it holds, throttling guesses (by email and client address).
func (s *Server) checkLogin(c echo.Context) (*records.Person, error) {
	var req loginReq
	if err := decode(c, &req); err != nil {
		return nil, err
	}
	if req.Email == "" {
		return nil, invalid("email", "is required")
	}
	if req.Password == "" {
		return nil, invalid("password", "is required")
	}
	// Bounded before the email becomes a throttle key or the password
	// is hashed: no registered email or password is longer.
	if len(req.Email) > maxEmail {
		return nil, invalid("email", fmt.Sprintf("must be at most %d bytes", maxEmail))
	}
	if utf8.RuneCountInString(req.Password) > maxPassword {
		return nil, invalid("password", fmt.Sprintf("must be at most %d characters", maxPassword))
	}
	// The attempt is counted before the password is checked, so
	// concurrent guesses cannot all get past the throttle.
	keys := []string{"email:" + strings.ToLower(req.Email), "ip:" + c.RealIP()}
	if wait := s.Throttle.Attempt(s.Now(), keys...); wait > 0 {
		return nil, tooManyRequests("too many login attempts", wait)
	}
	p, err := s.Repo.PersonByEmail(req.Email)
	if err != nil && !errors.Is(err, records.ErrNotFound) {
		return nil, err // the store failed: a 500, not a wrong password
	}
	hash := dummyHash()
	if err == nil {
		hash = p.PasswordHash
	}
	cerr := s.Hasher.Check(c.Request().Context(), hash, req.Password)
	if errors.Is(cerr, auth.ErrBusy) {
		s.Throttle.Release(keys...)
		return nil, hashersBusy()
	}
	if cerr != nil || err != nil {
		return nil, unauthorized("wrong email or password")
	}
	s.Throttle.Succeed(keys...)
	return p, nil
}

type tokenReq struct {
	Name       string `json:"name"`
	TTLSeconds *int64 `json:"ttl_seconds"`
}

type tokenView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// LastUsedAt is when the token last authenticated a request, to the minute.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

func (s *Server) createToken(c echo.Context) error {
	var req tokenReq
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	ttl := auth.DefaultAPITTL
	if req.TTLSeconds != nil {
		if *req.TTLSeconds <= 0 || *req.TTLSeconds > int64(auth.MaxAPITTL/time.Second) {
			return invalid("ttl_seconds", "must be between 1 and 31536000 (one year)")
		}
		ttl = time.Duration(*req.TTLSeconds) * time.Second
	}
	me := who(c)
	p, err := s.Repo.Person(me.PersonID)
	if err != nil {
		return err
	}
	token, exp, err := s.IssueToken(records.KindAPI, req.Name, p, ttl)
	if err != nil {
		return err
	}
	claims, err := s.tokenClaims(token)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, tokenView{ID: claims.ID, Name: req.Name, Token: token,
		CreatedAt: claims.IssuedAt.UTC(), ExpiresAt: exp})
}

func (s *Server) listTokens(c echo.Context) error {
	toks, err := s.Repo.Tokens(who(c).PersonID, records.KindAPI)
	if err != nil {
		return err
	}
	out := make([]tokenView, 0, len(toks))
	for _, t := range toks {
		out = append(out, tokenView{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
			LastUsedAt: t.LastUsedAt})
	}
	return c.JSON(http.StatusOK, list(out))
}

func (s *Server) deleteToken(c echo.Context) error {
	err := s.Repo.DeleteToken(who(c).PersonID, c.Param("id"))
	if errors.Is(err, records.ErrNotFound) {
		return notFound("token")
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
