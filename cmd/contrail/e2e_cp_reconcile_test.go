package main

// The reconcile loop end to end: pushes that failed because a cell was
// down or cut off reach it once it is back, and reconciling accounts that
// are in sync pushes nothing, across control plane restarts too.

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Provisioning metrics the control plane serves on /metrics.
const (
	mPasses   = "contrail_controlplane_reconcile_passes_total"
	mPushes   = "contrail_controlplane_pushes_total"
	mFailures = "contrail_controlplane_push_failures_total"
	mBehind   = "contrail_controlplane_accounts_behind"
)

// TestCPReconcileCellDown: an account is created, its limits changed and
// a user revoked while its cell is down; the API answers all of it. When
// the cell starts, the reconcile loop pushes the account once and the
// cell holds the latest limits and revocation. A restarted control plane
// finds everything in sync and pushes nothing, and later changes still
// reach the cell.
func TestCPReconcileCellDown(t *testing.T) {
	dir := t.TempDir()
	cellAddr := freeAddr(t)
	cp := startControlplane(t, "", filepath.Join(dir, "cp"), "nats://"+cellAddr)
	anon := newAPI(t, cp.URL)
	waitReadyz(t, anon, 503)

	a, _ := anon.signup("down@example.com", "Down")
	acc := a.createAccount("orders", map[string]any{"jetstream": map[string]any{"max_streams": 1}})
	alice, aliceCreds := a.createUser(acc.ID, "alice", dir)
	_, bobCreds := a.createUser(acc.ID, "bob", dir)
	a.do("PATCH", "/v1/accounts/"+acc.ID, map[string]any{"limits": map[string]any{"jetstream": map[string]any{"max_streams": 2}}}, 200, nil)
	a.do("DELETE", "/v1/accounts/"+acc.ID+"/users/"+alice.ID, nil, 204, nil)
	waitMetric(t, anon, mBehind, 1, "a reconcile pass to find the account behind its cell")
	if n := cpMetric(t, anon, mPushes); n != 0 {
		t.Fatalf("%v pushes acknowledged with the cell down", n)
	}
	if n := cpMetric(t, anon, mFailures); n < 3 {
		t.Fatalf("%v failed pushes, want at least the three changes'", n)
	}

	cell := startRefCell(t, cellAddr, cp.DataDir, cp.URL+"/jwt/v1/accounts/")
	waitReadyz(t, anon, 200)
	waitMetric(t, anon, mBehind, 0, "the reconcile loop to bring the cell up to date")
	if n := cpMetric(t, anon, mPushes); n != 1 {
		t.Fatalf("%v pushes once the cell was back, want 1 (the latest JWT, once)", n)
	}

	nc := connectCreds(t, cell.URL, bobCreds)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	checkStreamLimit(t, js, 2)
	checkRevoked(t, cell.URL, aliceCreds)

	// Restart: the new process reconciles (at start, and when the cell
	// connects) and finds nothing to push.
	cp.stop()
	cp2 := startControlplane(t, cp.HTTPAddr, cp.DataDir, "nats://"+cellAddr)
	api2 := newAPI(t, cp2.URL)
	a2 := api2.as(a.token)
	waitReadyz(t, api2, 200)
	// A pass may be running as readiness is seen; the one after it
	// started with the cell connected.
	passes := cpMetric(t, api2, mPasses)
	waitFor(t, ioTimeout, "two reconcile passes after the restart", func() bool { return cpMetric(t, api2, mPasses) >= passes+2 })
	for name, want := range map[string]float64{mPushes: 0, mFailures: 0, mBehind: 0} {
		if got := cpMetric(t, api2, name); got != want {
			t.Errorf("after the restart %s = %v, want %v: an account in sync was pushed again", name, got, want)
		}
	}
	roundTrip(t, nc)
	checkStreamLimit(t, js, 2)
	checkRevoked(t, cell.URL, aliceCreds)
	roundTrip(t, connectCreds(t, cell.URL, bobCreds))

	// The bookkeeping survived the restart: a new change is pushed once
	// and applies to the live connection.
	a2.do("PATCH", "/v1/accounts/"+acc.ID, map[string]any{"limits": map[string]any{"jetstream": map[string]any{"max_streams": 3}}}, 200, nil)
	waitFor(t, ioTimeout, "the raised stream limit on the live connection", func() bool {
		_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S3", Subjects: []string{"s3.>"}})
		return err == nil
	})
	if n := cpMetric(t, api2, mPushes); n != 1 {
		t.Fatalf("%v pushes for one change after the restart, want 1", n)
	}
}

// TestCPReconcileAfterPartition: the control plane loses its link to a
// cell that keeps running with the account loaded and a client
// connected. Limits raised and a user revoked meanwhile cannot reach the
// cell (nothing else would tell it: it does not ask the resolver again
// for an account it has); once the link is back the reconcile loop
// pushes them, the raised limit applies to the live connection and the
// revoked user is cut off.
func TestCPReconcileAfterPartition(t *testing.T) {
	dir := t.TempDir()
	cellAddr := freeAddr(t)
	link := startTCPProxy(t, cellAddr)
	cp := startControlplane(t, "", filepath.Join(dir, "cp"), "nats://"+link.addr)
	cell := startRefCell(t, cellAddr, cp.DataDir, cp.URL+"/jwt/v1/accounts/")
	anon := newAPI(t, cp.URL)
	waitReadyz(t, anon, 200)

	a, _ := anon.signup("split@example.com", "Split")
	acc := a.createAccount("orders", map[string]any{"jetstream": map[string]any{"max_streams": 1}})
	alice, aliceCreds := a.createUser(acc.ID, "alice", dir)
	_, bobCreds := a.createUser(acc.ID, "bob", dir)
	aliceClosed := make(chan struct{})
	aliceNC := connectCreds(t, cell.URL, aliceCreds, nats.ClosedHandler(func(*nats.Conn) { close(aliceClosed) }))
	nc := connectCreds(t, cell.URL, bobCreds)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	checkStreamLimit(t, js, 1)

	link.cut()
	waitReadyz(t, anon, 503)
	failures := cpMetric(t, anon, mFailures)
	a.do("PATCH", "/v1/accounts/"+acc.ID, map[string]any{"limits": map[string]any{"jetstream": map[string]any{"max_streams": 2}}}, 200, nil)
	a.do("DELETE", "/v1/accounts/"+acc.ID+"/users/"+alice.ID, nil, 204, nil)
	if n := cpMetric(t, anon, mFailures); n < failures+2 {
		t.Fatalf("push failures went from %v to %v; the two changes must have failed to push", failures, n)
	}
	// The cell has not heard of either change.
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S2", Subjects: []string{"s2.>"}}); err == nil {
		t.Fatal("the raised limit reached the cell with the control plane cut off")
	}
	roundTrip(t, aliceNC)

	link.restore()
	waitReadyz(t, anon, 200)
	waitDisconnected(t, "the revoked user's connection to close", aliceClosed)
	waitFor(t, ioTimeout, "the raised stream limit on the live connection", func() bool {
		_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S2", Subjects: []string{"s2.>"}})
		return err == nil
	})
	checkStreamLimit(t, js, 2)
	checkRevoked(t, cell.URL, aliceCreds)
	waitMetric(t, anon, mBehind, 0, "no account left behind")
}

// checkStreamLimit creates streams S1…S<limit> (if missing) and checks one
// more is refused as over the account's max_streams.
func checkStreamLimit(t *testing.T, js jetstream.JetStream, limit int) {
	t.Helper()
	for i := 1; i <= limit; i++ {
		name := fmt.Sprintf("S%d", i)
		if _, err := js.CreateOrUpdateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}}); err != nil {
			t.Fatalf("stream %s of max_streams %d: %v", name, limit, err)
		}
	}
	name := fmt.Sprintf("S%d", limit+1)
	_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}})
	if err == nil || !strings.Contains(err.Error(), "maximum number of streams") {
		t.Fatalf("stream %s over max_streams %d: %v, want maximum number of streams reached", name, limit, err)
	}
}

// checkRevoked checks a revoked user's creds no longer connect.
func checkRevoked(t *testing.T, url, creds string) {
	t.Helper()
	if nc, err := dialCreds(url, creds, nil); err == nil {
		nc.Close()
		t.Fatal("a revoked user's creds still connect")
	}
}

// waitReadyz polls /readyz until it answers status.
func waitReadyz(t *testing.T, a *api, status int) {
	t.Helper()
	waitFor(t, startTimeout, fmt.Sprintf("/readyz to answer %d", status), func() bool {
		code, _, _ := a.call(context.Background(), "GET", "/readyz", nil)
		return code == status
	})
}

// cpMetric reads an unlabelled metric from the control plane's /metrics.
func cpMetric(t *testing.T, a *api, name string) float64 {
	t.Helper()
	code, _, body := a.call(context.Background(), "GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// waitMetric polls a metric until it equals want.
func waitMetric(t *testing.T, a *api, name string, want float64, what string) {
	t.Helper()
	waitFor(t, ioTimeout, fmt.Sprintf("%s (%s = %v)", what, name, want), func() bool { return cpMetric(t, a, name) == want })
}

// tcpProxy forwards connections from addr to target; cut drops every
// connection and refuses new ones until restore, as a partition would.
type tcpProxy struct {
	t            *testing.T
	addr, target string
	wg           sync.WaitGroup
	mu           struct {
		sync.Mutex
		ln    net.Listener          // nil while cut
		conns map[net.Conn]struct{} // open connections, both sides
	}
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: freeAddr(t), target: target}
	p.mu.conns = map[net.Conn]struct{}{}
	p.restore()
	t.Cleanup(p.cut)
	return p
}

// restore listens again on the same address.
func (p *tcpProxy) restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listen %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.mu.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *tcpProxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.mu.ln != ln { // cut meanwhile
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.mu.conns[c], p.mu.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cut closes the listener and every connection, and waits for the
// forwarding goroutines to end.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	if p.mu.ln != nil {
		p.mu.ln.Close()
		p.mu.ln = nil
	}
	for c := range p.mu.conns {
		c.Close()
	}
	clear(p.mu.conns)
	p.mu.Unlock()
	p.wg.Wait()
}
