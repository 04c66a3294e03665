package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Claim update and lookup subjects in the system account, as nats-server
// serves them: the control plane pushes every account change here.
const (
	subjClaimsUpdate    = "$SYS.REQ.CLAIMS.UPDATE"
	subjAccClaimsUpdate = "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"
	subjAccClaimsOld    = "$SYS.ACCOUNT.*.CLAIMS.UPDATE"
	subjAccClaimsLookup = "$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP"
)

// claimUpdateReply is nats-server's answer to a claim update.
type claimUpdateReply struct {
	Server *sysServerInfo     `json:"server"`
	Data   *claimUpdateStatus `json:"data,omitempty"`
	Error  *claimUpdateError  `json:"error,omitempty"`
}

type claimUpdateStatus struct {
	Account string `json:"account,omitempty"`
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

type claimUpdateError struct {
	Account     string `json:"account,omitempty"`
	Code        int    `json:"code"`
	Description string `json:"description,omitempty"`
}

// sysServerInfo identifies the answering server in system replies.
type sysServerInfo struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	Cluster   string    `json:"cluster,omitempty"`
	ID        string    `json:"id"`
	Version   string    `json:"ver"`
	JetStream bool      `json:"jetstream"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
}

func (s *Server) sysInfo() *sysServerInfo {
	return &sysServerInfo{
		Name: s.name, Host: s.opts.Host, Cluster: s.ClusterName(), ID: s.id, Version: Version,
		JetStream: s.jetstream.Load() != nil, Seq: s.sysSeq.Add(1), Time: time.Now().UTC(),
	}
}

// sysReply answers a system request with v as JSON.
func (s *Server) sysReply(reply string, v any) { s.replyIn(s.sys, reply, v) }

// replyIn answers a request made in account a with v as JSON.
func (s *Server) replyIn(a *Account, reply string, v any) {
	if reply == "" || a == nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("system reply", "err", err)
		return
	}
	a.Publish(reply, "", nil, b)
}

// startClaimServices subscribes the claim update and lookup services in
// the system account. Only system users can reach them: every other
// account's $SYS subjects are its own and lead nowhere.
func (s *Server) startClaimServices() error {
	update := func(subject, reply, _ []byte, msg []byte) {
		token := strings.TrimSpace(string(msg))
		want := ""
		if parts := strings.Split(string(subject), "."); len(parts) == 6 {
			want = parts[3] // $SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE
		} else if len(parts) == 5 && parts[1] == "ACCOUNT" {
			want = parts[2] // $SYS.ACCOUNT.<key>.CLAIMS.UPDATE
		}
		r := string(reply)
		// Applying claims closes connections and updates JetStream: not
		// on the publisher's goroutine.
		go s.handleClaimUpdate(want, token, r)
	}
	for _, subj := range []string{subjClaimsUpdate, subjAccClaimsUpdate, subjAccClaimsOld} {
		if _, err := s.sys.SubscribeInternal(subj, update); err != nil {
			return err
		}
	}
	_, err := s.sys.SubscribeInternal(subjAccClaimsLookup, func(subject, reply, _, _ []byte) {
		parts := strings.Split(string(subject), ".")
		r := string(reply)
		go s.handleClaimLookup(parts[3], r)
	})
	return err
}

func (s *Server) handleClaimUpdate(want, token, reply string) {
	acc, err := s.UpdateAccountClaims(token, want)
	if acc == "" {
		acc = want
	}
	if err != nil {
		s.log.Warn("claim update refused", "account", acc, "err", err)
		s.sysReply(reply, &claimUpdateReply{Server: s.sysInfo(), Error: &claimUpdateError{
			Account: acc, Code: http.StatusInternalServerError, Description: "jwt update resulted in error - " + err.Error(),
		}})
		return
	}
	s.sysReply(reply, &claimUpdateReply{Server: s.sysInfo(), Data: &claimUpdateStatus{
		Account: acc, Code: http.StatusOK, Message: "jwt updated",
	}})
}

// handleClaimLookup answers with the account's JWT as the node knows it.
func (s *Server) handleClaimLookup(account, reply string) {
	if reply == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	token, err := s.op.Resolver.Fetch(ctx, account)
	if err != nil {
		token = ""
	}
	s.sys.Publish(reply, "", nil, []byte(token))
}

// subjClaimsDelete deletes accounts: the payload is a generic JWT the
// operator signs about itself, listing the accounts in data.accounts.
const subjClaimsDelete = "$SYS.REQ.CLAIMS.DELETE"

func (s *Server) startDeleteService() error {
	_, err := s.sys.SubscribeInternal(subjClaimsDelete, func(_, reply, _, msg []byte) {
		token, r := strings.TrimSpace(string(msg)), string(reply)
		go s.handleClaimsDelete(token, r)
	})
	if err != nil {
		return err
	}
	// $SYS.REQ.CLAIMS.LIST: the accounts whose JWTs the node holds, as a
	// full directory resolver answers it (nsc uses it).
	_, err = s.sys.SubscribeInternal(subjClaimsList, func(_, reply, _, _ []byte) {
		r := string(reply)
		go func() {
			keys := s.op.Resolver.Stored()
			sort.Strings(keys)
			s.sysReply(r, map[string]any{"server": s.sysInfo(), "data": keys})
		}()
	})
	return err
}

// subjClaimsList lists the account JWTs a node holds.
const subjClaimsList = "$SYS.REQ.CLAIMS.LIST"

func (s *Server) handleClaimsDelete(token, reply string) {
	if !s.op.AllowDelete {
		s.sysReply(reply, &claimUpdateReply{Server: s.sysInfo(), Error: &claimUpdateError{
			Code: http.StatusInternalServerError, Description: "delete accounts request failed - delete must be enabled in server config",
		}})
		return
	}
	accounts, err := s.op.Trust.VerifyDelete(token)
	if err == nil {
		for _, a := range accounts {
			if a == s.op.SystemAccount {
				err = errors.New("not allowed to delete the system account")
			}
		}
	}
	if err != nil {
		s.log.Warn("account delete refused", "err", err)
		s.sysReply(reply, &claimUpdateReply{Server: s.sysInfo(), Error: &claimUpdateError{
			Code: http.StatusInternalServerError, Description: "delete accounts request failed - " + err.Error(),
		}})
		return
	}
	var errs []string
	for _, name := range accounts {
		if err := s.DeleteAccount(name); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		s.sysReply(reply, &claimUpdateReply{Server: s.sysInfo(), Error: &claimUpdateError{
			Code: http.StatusInternalServerError, Description: fmt.Sprintf("deleted %d accounts, failed for %d - %s",
				len(accounts)-len(errs), len(errs), strings.Join(errs, "; ")),
		}})
		return
	}
	s.sysReply(reply, &claimUpdateReply{Server: s.sysInfo(), Data: &claimUpdateStatus{
		Code: http.StatusOK, Message: fmt.Sprintf("deleted %d accounts", len(accounts)),
	}})
}

// DeleteAccount withdraws an account: its stored JWT is removed, its
// users are disconnected, and JetStream stops serving it (its data stays
// on disk). A later claim update brings it back.
func (s *Server) DeleteAccount(name string) error {
	if err := s.op.Resolver.Delete(name); err != nil {
		return fmt.Errorf("account %s: %w", name, err)
	}
	s.accts.mu.Lock()
	a := s.accts.m[name]
	delete(s.accts.m, name)
	s.accts.mu.Unlock()
	if a == nil {
		return nil
	}
	n := s.withdrawAccount(a, errTextAuthViolation, reasonAccountDeleted)
	s.log.Info("account deleted", "account", name, "disconnected", n)
	return nil
}
