package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/tenant"
)

// maxUserTTL bounds expires_in_seconds (ten years).
const maxUserTTL = 10 * 365 * 24 * time.Hour

type userReq struct {
	Name             string              `json:"name"`
	Permissions      *tenant.Permissions `json:"permissions"`
	ExpiresInSeconds *int64              `json:"expires_in_seconds"`
}

type natsUserView struct {
	ID          string              `json:"id"`
	Name        string              `json:"name"`
	PublicKey   string              `json:"public_key"`
	Permissions *tenant.Permissions `json:"permissions,omitempty"`
	ExpiresAt   *time.Time          `json:"expires_at,omitempty"`
	CreatedAt   time.Time           `json:"created_at"`
	// Creds is the creds file, present only in the answer that creates
	// the user.
	Creds string `json:"creds,omitempty"`
}

func userOut(u *records.NatsUser) natsUserView {
	return natsUserView{ID: u.ID, Name: u.Name, PublicKey: u.PublicKey, Permissions: u.Permissions,
		ExpiresAt: u.ExpiresAt, CreatedAt: u.CreatedAt}
}

func (s *Server) createUser(c echo.Context) error {
	a, err := s.account(c)
	if err != nil {
		return err
	}
	var req userReq
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	nu := provision.NewUser{Name: req.Name}
	if req.Permissions != nil {
		if err := checkPermissions(req.Permissions); err != nil {
			return err
		}
		nu.Permissions = req.Permissions
	}
	now := s.Now().UTC().Truncate(time.Second)
	if req.ExpiresInSeconds != nil {
		if *req.ExpiresInSeconds <= 0 || *req.ExpiresInSeconds > int64(maxUserTTL/time.Second) {
			return invalid("expires_in_seconds", "must be between 1 and 315360000 (ten years)")
		}
		exp := now.Add(time.Duration(*req.ExpiresInSeconds) * time.Second)
		nu.ExpiresAt = &exp
	}
	u, creds, err := s.Prov.CreateUser(a, nu, now)
	if err != nil {
		return err
	}
	s.log.Info("user created", "account", a.ID, "user", u.ID, "public_key", u.PublicKey)
	out := userOut(u)
	out.Creds = string(creds)
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) listUsers(c echo.Context) error {
	a, err := s.account(c)
	if err != nil {
		return err
	}
	users, err := s.Repo.Users(a.ID)
	if err != nil {
		return err
	}
	out := make([]natsUserView, 0, len(users))
	for i := range users {
		out = append(out, userOut(&users[i]))
	}
	return c.JSON(http.StatusOK, list(out))
}

// deleteUser revokes the user in the account JWT and pushes it, which
// makes the cell close the user's connections.
func (s *Server) deleteUser(c echo.Context) error {
	me := who(c)
	a, err := s.Repo.UpdateAccountAndDeleteUser(me.OrgID, c.Param("id"), c.Param("user_id"),
		func(a *records.Account, u *records.NatsUser) error {
			if a.Revocations == nil {
				a.Revocations = map[string]int64{}
			}
			a.Revocations[u.PublicKey] = s.Now().Unix()
			return s.Prov.Change(a)
		})
	if errors.Is(err, records.ErrNotFound) {
		return notFound("user")
	}
	if err != nil {
		return err
	}
	s.log.Info("user revoked", "account", a.ID, "user", c.Param("user_id"))
	s.sync(a.OrgID, a.ID)
	return c.NoContent(http.StatusNoContent)
}
