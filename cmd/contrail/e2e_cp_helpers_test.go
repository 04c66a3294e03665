package main

// Control plane end-to-end helpers (tests in e2e_cp_*_test.go, named
// TestCP…, TestDev… and TestReadme…): starting `contrail controlplane` with
// a reference nats-server cell or `contrail dev`, and an API client whose
// every request and response is validated against openapi/openapi.yaml.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contrail/contrail/openapi/spectest"
)

// ---------------------------------------------------------------------
// OpenAPI validation

// specTransport is an http.RoundTripper that validates each request and
// response against the OpenAPI document and fails the test on any
// mismatch, so the spec cannot drift from the server.
type specTransport struct {
	t     testing.TB
	check *spectest.Checker
}

type skipRequestCheck struct{}

// badRequest marks a request the test sends malformed on purpose: its
// response is still validated, the request is not.
func badRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, skipRequestCheck{}, true)
}

func newSpecTransport(t testing.TB, baseURL string) *specTransport {
	t.Helper()
	c, err := spectest.New(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return &specTransport{t: t, check: c}
}

func (s *specTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	for _, err := range s.check.Check(spectest.Exchange{Request: req, RequestBody: reqBody,
		SkipRequest: req.Context().Value(skipRequestCheck{}) != nil, Status: resp.StatusCode, Header: resp.Header, Body: body}) {
		s.t.Errorf("openapi: %v", err)
	}
	return resp, nil
}

// ---------------------------------------------------------------------
// API client

// api calls the REST API as one caller (token may be empty), through the
// validating transport.
type api struct {
	t     testing.TB
	base  string
	token string
	http  *http.Client
}

func newAPI(t testing.TB, base string) *api {
	return &api{t: t, base: base, http: &http.Client{Transport: newSpecTransport(t, base), Timeout: ioTimeout}}
}

// as returns a client for the same server with another token.
func (a *api) as(token string) *api {
	c := *a
	c.token = token
	return &c
}

// call sends a request (body marshalled unless it is a string, sent
// raw) and returns the status and body.
func (a *api) call(ctx context.Context, method, path string, body any) (int, http.Header, []byte) {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// do sends a request, requires the status, and decodes the body into out
// (if not nil).
func (a *api) do(method, path string, body any, want int, out any) {
	a.t.Helper()
	code, _, data := a.call(context.Background(), method, path, body)
	if code != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

// problemOf sends a request that must fail with status and returns the
// problem. bad marks a request malformed on purpose.
func (a *api) problemOf(method, path string, body any, status int, bad bool) cpProblem {
	a.t.Helper()
	ctx := context.Background()
	if bad {
		ctx = badRequest(ctx)
	}
	code, hdr, data := a.call(ctx, method, path, body)
	if code != status {
		a.t.Fatalf("%s %s %v: status %d, want %d: %s", method, path, body, code, status, data)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/problem+json" {
		a.t.Fatalf("%s %s: Content-Type %q, want application/problem+json", method, path, ct)
	}
	var p cpProblem
	if err := json.Unmarshal(data, &p); err != nil {
		a.t.Fatalf("problem %s: %v", data, err)
	}
	p.header = hdr
	return p
}

type cpProblem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
	header http.Header
}

// Shapes the tests read.
type (
	cpSignup struct {
		Token string `json:"token"`
		User  struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"user"`
		Organization struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"organization"`
	}
	cpLimits struct {
		MaxConnections int64 `json:"max_connections"`
		MaxPayload     int64 `json:"max_payload"`
		JetStream      struct {
			MaxMemory     int64 `json:"max_memory"`
			MaxStorage    int64 `json:"max_storage"`
			MaxStreams    int64 `json:"max_streams"`
			MaxConsumers  int64 `json:"max_consumers"`
			MaxAckPending int64 `json:"max_ack_pending"`
		} `json:"jetstream"`
	}
	cpAccount struct {
		ID        string   `json:"id"`
		Name      string   `json:"name"`
		PublicKey string   `json:"public_key"`
		NatsURL   string   `json:"nats_url"`
		Limits    cpLimits `json:"limits"`
	}
	cpUser struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		PublicKey string `json:"public_key"`
		Creds     string `json:"creds"`
	}
	cpToken struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Token string `json:"token"`
	}
	cpUsage struct {
		Connections  int    `json:"connections"`
		Streams      int    `json:"streams"`
		Consumers    int    `json:"consumers"`
		Messages     uint64 `json:"messages"`
		StorageBytes uint64 `json:"storage_bytes"`
	}
)

// signup signs a new person up and returns a client acting for them.
func (a *api) signup(email, org string) (*api, cpSignup) {
	a.t.Helper()
	var s cpSignup
	a.as("").do("POST", "/v1/signup", map[string]string{"email": email, "password": "correct horse battery", "organization": org}, 201, &s)
	return a.as(s.Token), s
}

func (a *api) createAccount(name string, limits map[string]any) cpAccount {
	a.t.Helper()
	body := map[string]any{"name": name}
	if limits != nil {
		body["limits"] = limits
	}
	var acc cpAccount
	a.do("POST", "/v1/accounts", body, 201, &acc)
	return acc
}

// createUser creates a user and writes its creds file into dir.
func (a *api) createUser(accID, name, dir string) (cpUser, string) {
	a.t.Helper()
	var u cpUser
	a.do("POST", "/v1/accounts/"+accID+"/users", map[string]any{"name": name}, 201, &u)
	return u, writeFile(a.t, dir, name+".creds", u.Creds)
}

// ---------------------------------------------------------------------
// Processes

// cpProc is a running `contrail controlplane`.
type cpProc struct {
	*proc
	HTTPAddr string
	URL      string
	DataDir  string
	config   string
}

// startControlplane starts the control plane serving one cell at
// cellURL, on httpAddr (a free one if empty), with dataDir and any extra
// flags.
func startControlplane(t testing.TB, httpAddr, dataDir, cellURL string, extra ...string) *cpProc {
	t.Helper()
	if httpAddr == "" {
		httpAddr = freeAddr(t)
	}
	cfgDir := dataDir + "-cfg"
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, cfgDir, "cells.yaml", fmt.Sprintf("cells:\n  - name: test\n    nats_url: %s\n", cellURL))
	c := &cpProc{HTTPAddr: httpAddr, URL: "http://" + httpAddr, DataDir: dataDir, config: cfg}
	p, err := startProc(t, "contrail controlplane", contrailBin, append([]string{"controlplane",
		"--http-addr", httpAddr, "--data-dir", dataDir, "--config", cfg, "--log-level", "debug"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	p.cleanExit = true
	c.proc = p
	if err := waitHealthy(p, c.URL); err != nil {
		p.stop()
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return c
}

// refCell is a reference nats-server in operator mode trusting a
// control plane.
type refCell struct {
	*proc
	URL, MonURL string
}

// startRefCell starts nats-server on addr (from freeAddr) trusting the
// control plane whose data dir and resolver are given.
func startRefCell(t testing.TB, addr, cpDataDir, resolverURL string) *refCell {
	t.Helper()
	bin := findTool(t, "nats-server", "github.com/nats-io/nats-server/v2", "v2.15.2")
	sys := strings.TrimSpace(string(mustRead(t, filepath.Join(cpDataDir, "system_account.pub"))))
	dir := t.TempDir()
	mon := freeAddr(t)
	conf := fmt.Sprintf("listen: %s\nhttp: %s\noperator: %s\nsystem_account: %s\nresolver: URL(%s)\njetstream {store_dir: %q}\n",
		addr, mon, filepath.Join(cpDataDir, "operator.jwt"), sys, resolverURL, filepath.Join(dir, "js"))
	p, err := startProc(t, "nats-server", bin, "-c", writeFile(t, dir, "ref.conf", conf))
	if err != nil {
		t.Fatal(err)
	}
	r := &refCell{proc: p, URL: "nats://" + addr, MonURL: "http://" + mon}
	if err := waitHealthy(p, r.MonURL); err != nil {
		p.stop()
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return r
}

// cpWorld is a control plane with a reference nats-server cell.
type cpWorld struct {
	cp   *cpProc
	cell *refCell
	api  *api
	dir  string
}

func startCPWorld(t testing.TB) *cpWorld {
	t.Helper()
	dir := t.TempDir()
	cellAddr := freeAddr(t)
	cp := startControlplane(t, "", filepath.Join(dir, "cp"), "nats://"+cellAddr)
	cell := startRefCell(t, cellAddr, cp.DataDir, cp.URL+"/jwt/v1/accounts/")
	return &cpWorld{cp: cp, cell: cell, api: newAPI(t, cp.URL), dir: dir}
}

// devProc is a running `contrail dev`.
type devProc struct {
	*proc
	URL, NatsURL, DataDir string
	httpAddr, natsAddr    string
	args                  []string // more flags for `contrail dev`
}

// startDev runs `contrail dev` on free ports with dataDir and waits
// until it says it is ready.
func startDev(t testing.TB, dataDir string) *devProc {
	t.Helper()
	d := &devProc{DataDir: dataDir, httpAddr: freeAddr(t), natsAddr: freeAddr(t)}
	d.URL, d.NatsURL = "http://"+d.httpAddr, "nats://"+d.natsAddr
	d.start(t)
	return d
}

func (d *devProc) start(t testing.TB) {
	t.Helper()
	p, err := startProc(t, "contrail dev", contrailBin, append([]string{"dev", "--http-addr", d.httpAddr, "--nats-addr", d.natsAddr,
		"--monitor-addr", "", "--data-dir", d.DataDir, "--log-level", "debug"}, d.args...)...)
	if err != nil {
		t.Fatal(err)
	}
	p.cleanExit = true
	d.proc = p
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(p.out.String(), "Contrail dev is ready") {
		if !p.running() || time.Now().After(deadline) {
			p.stop()
			t.Fatalf("contrail dev did not become ready:\n%s", p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(p.stop)
}

// waitDisconnected waits for a NATS connection to be closed by the server.
func waitDisconnected(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(ioTimeout):
		t.Fatalf("timed out after %v waiting for %s", ioTimeout, what)
	}
}
