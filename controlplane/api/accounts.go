package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contrail/contrail/controlplane/provision"
	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/tenant"
)

// pushTimeout bounds the push a change makes before answering; a push
// that does not finish in time is left to the reconcile loop.
const pushTimeout = 3 * time.Second

type accountView struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	PublicKey string        `json:"public_key"`
	NatsURL   string        `json:"nats_url"`
	Limits    tenant.Limits `json:"limits"`
	CreatedAt time.Time     `json:"created_at"`
	// InSync says the account's cell has its latest JWT (limits and
	// revocations); until then the cell still applies the previous one.
	InSync bool `json:"in_sync"`
}

func (s *Server) view(a *records.Account) accountView {
	return accountView{ID: a.ID, Name: a.Name, PublicKey: a.PublicKey, NatsURL: s.NatsURLs[a.Cell],
		Limits: a.Limits, CreatedAt: a.CreatedAt, InSync: a.Pushed >= a.Generation}
}

// account loads the caller's account named in the path, or 404.
func (s *Server) account(c echo.Context) (*records.Account, error) {
	a, err := s.Repo.Account(who(c).OrgID, c.Param("id"))
	if errors.Is(err, records.ErrNotFound) {
		return nil, notFound("account")
	}
	return a, err
}

// sync pushes an account to its cell right away; failures are left to the
// reconcile loop, so the API answer does not depend on the cell being up.
func (s *Server) sync(orgID, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), pushTimeout)
	defer cancel()
	if err := s.Prov.Sync(ctx, orgID, id); err != nil {
		s.log.Warn("push failed; the reconcile loop will retry", "account", id, "err", err)
		s.Prov.Kick()
	}
}

func (s *Server) listAccounts(c echo.Context) error {
	accts, err := s.Repo.Accounts(who(c).OrgID)
	if err != nil {
		return err
	}
	out := make([]accountView, 0, len(accts))
	for i := range accts {
		out = append(out, s.view(&accts[i]))
	}
	return c.JSON(http.StatusOK, list(out))
}

type accountReq struct {
	Name   *string        `json:"name"`
	Limits *tenant.Limits `json:"limits"`
}

func (s *Server) createAccount(c echo.Context) error {
	req := accountReq{Limits: ptr(tenant.DefaultLimits())}
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return invalid("name", "is required")
	}
	if err := checkName("name", *req.Name); err != nil {
		return err
	}
	if req.Limits == nil {
		req.Limits = ptr(tenant.DefaultLimits())
	}
	if err := checkLimits(*req.Limits); err != nil {
		return err
	}
	a, err := s.Prov.CreateAccount(provision.NewAccount{OrgID: who(c).OrgID, Name: *req.Name, Cell: s.DefaultCell,
		Limits: *req.Limits}, s.Now().UTC().Truncate(time.Second))
	if err != nil {
		return err
	}
	s.log.Info("account created", "account", a.ID, "org", a.OrgID, "public_key", a.PublicKey, "cell", a.Cell)
	s.sync(a.OrgID, a.ID)
	return c.JSON(http.StatusCreated, s.view(a))
}

func (s *Server) getAccount(c echo.Context) error {
	a, err := s.account(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.view(a))
}

func (s *Server) patchAccount(c echo.Context) error {
	cur, err := s.account(c)
	if err != nil {
		return err
	}
	// Absent fields keep their current values, including each limit.
	req := accountReq{Limits: ptr(cur.Limits)}
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Name != nil {
		if err := checkName("name", *req.Name); err != nil {
			return err
		}
	}
	if req.Limits == nil {
		return invalid("limits", "must be an object")
	}
	if err := checkLimits(*req.Limits); err != nil {
		return err
	}
	me := who(c)
	a, err := s.Repo.UpdateAccount(me.OrgID, cur.ID, false, func(a *records.Account) error {
		if req.Name != nil {
			a.Name = *req.Name
		}
		a.Limits = *req.Limits
		return s.Prov.Change(a)
	})
	if errors.Is(err, records.ErrNotFound) {
		return notFound("account")
	}
	if err != nil {
		return err
	}
	s.log.Info("account updated", "account", a.ID, "generation", a.Generation)
	s.sync(a.OrgID, a.ID)
	return c.JSON(http.StatusOK, s.view(a))
}

func (s *Server) deleteAccount(c echo.Context) error {
	me := who(c)
	a, err := s.Repo.UpdateAccount(me.OrgID, c.Param("id"), false, func(a *records.Account) error {
		a.Deleted = true
		return s.Prov.Change(a)
	})
	if errors.Is(err, records.ErrNotFound) {
		return notFound("account")
	}
	if err != nil {
		return err
	}
	s.log.Info("account deleted", "account", a.ID, "public_key", a.PublicKey)
	s.sync(a.OrgID, a.ID)
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) usage(c echo.Context) error {
	a, err := s.account(c)
	if err != nil {
		return err
	}
	u, err := s.Cells.Usage(c.Request().Context(), a.Cell, a.PublicKey)
	if errors.Is(err, provision.ErrCellUnavailable) {
		return cellUnavailable("the account's cell did not answer; try again")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

func (s *Server) streams(c echo.Context) error {
	a, err := s.account(c)
	if err != nil {
		return err
	}
	// Paging is checked before the cell is asked.
	if _, err := paged(c, []provision.Stream(nil)); err != nil {
		return err
	}
	st, err := s.Cells.Streams(c.Request().Context(), a.Cell, a.PublicKey)
	if errors.Is(err, provision.ErrCellUnavailable) {
		return cellUnavailable("the account's cell did not answer; try again")
	}
	if err != nil {
		return err
	}
	p, err := paged(c, st)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// resolve serves an account JWT to data-plane nodes (the URL resolver
// protocol): the JWT as text, or 404 for a key the control plane does not
// know. A deleted account is a 404 from the moment it is deleted (and for
// good: the record goes, a tombstone stays), and nodes take a 404 as the
// account's deletion.
func (s *Server) resolve(c echo.Context) error {
	key := c.Param("key")
	if key == s.Keys.SystemPub {
		return c.String(http.StatusOK, s.Keys.SystemJWT)
	}
	a, err := s.Repo.AccountByKey(key)
	if errors.Is(err, records.ErrNotFound) || (err == nil && a.Deleted) {
		return c.NoContent(http.StatusNotFound)
	}
	if err != nil {
		return err
	}
	return c.String(http.StatusOK, a.JWT)
}

// resolverPing answers the resolver's base URL, which nats-server probes.
func (s *Server) resolverPing(c echo.Context) error { return c.NoContent(http.StatusOK) }

func ptr[T any](v T) *T { return &v }
