package monitor

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/jetstream"
	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/server"
)

func newTestMonitor(t *testing.T) *Monitor {
	t.Helper()
	srv, err := server.New(config.Default(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return New(srv, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Options a request cannot have are the requester's fault (400); options
// the node cannot serve are not.
func TestMonitorDocOptions(t *testing.T) {
	m := newTestMonitor(t)
	for _, c := range []struct {
		endpoint, opts string
		bad            bool
	}{
		{"CONNZ", `{"limit":"ten"}`, true},
		{"CONNZ", `{"state":1}`, true},
		{"SUBSZ", `{"test":"a.*"}`, true},
		{"JSZ", `[1]`, true},
		{"CONNZ", `{"sort":"nonsense"}`, false},
		{"NOPE", ``, false},
	} {
		_, err := m.MonitorDoc(c.endpoint, []byte(c.opts), "")
		if err == nil {
			t.Errorf("%s %s: no error", c.endpoint, c.opts)
			continue
		}
		if errors.Is(err, server.ErrBadOptions) != c.bad {
			t.Errorf("%s %s: %v, bad options %v", c.endpoint, c.opts, err, c.bad)
		}
	}
	for _, endpoint := range []string{"VARZ", "STATSZ", "HEALTHZ", "CONNZ", "SUBSZ", "JSZ"} {
		if _, err := m.MonitorDoc(endpoint, nil, ""); err != nil {
			t.Errorf("%s with defaults: %v", endpoint, err)
		}
	}
	if _, err := m.MonitorDoc("JSZ", nil, "ACCOUNT"); err == nil {
		t.Error("account JSZ without JetStream: no error")
	}
}

func TestUntieredLimits(t *testing.T) {
	for _, c := range []struct {
		lim        *jetstream.AccountLimits
		mem, store uint64
	}{
		{nil, ^uint64(0), ^uint64(0)},
		{&jetstream.AccountLimits{Tiers: map[string]api.AccountLimits{"": {MaxMemory: 5, MaxStore: 7}}}, 5, 7},
		{&jetstream.AccountLimits{Tiers: map[string]api.AccountLimits{"R1": {MaxMemory: 5, MaxStore: 7}}}, 0, 0},
	} {
		if mem, store := untieredLimits(c.lim); mem != c.mem || store != c.store {
			t.Errorf("%+v: %d/%d, want %d/%d", c.lim, mem, store, c.mem, c.store)
		}
	}
}

func TestRedactBearer(t *testing.T) {
	akp, _ := nkeys.CreateAccount()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	plain, err := uc.Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	uc.BearerToken = true
	bearer, err := uc.Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	if redactBearer(plain) != plain || redactBearer(bearer) != "" || redactBearer("") != "" {
		t.Fatal("only bearer JWTs are hidden")
	}
}
