package controlplane

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/contrail/contrail/controlplane/records"
	"github.com/contrail/contrail/controlplane/state"
)

// TestPruneTokensSweeps: the sweep removes expired tokens by its clock,
// more than one batch of them, and keeps the valid ones.
func TestPruneTokensSweeps(t *testing.T) {
	repo := records.New(state.NewMem())
	cp := &ControlPlane{Repo: repo, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	put := func(id string, exp time.Time) {
		// Written with a clock before anything expires, so nothing is
		// swept on write.
		if err := repo.PutToken(&records.Token{ID: id, Kind: records.KindSession, PersonID: "usr_1", OrgID: "org_1",
			CreatedAt: t0, ExpiresAt: exp}, t0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1100 {
		put(records.NewID("tok"), t0.Add(time.Duration(i%60+1)*time.Second))
	}
	put("tok_valid", t0.Add(24*time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cp.pruneTokens(ctx, time.Millisecond, func() time.Time { return t0.Add(time.Hour) })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		toks, err := repo.Tokens("usr_1", records.KindSession)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) == 1 && toks[0].ID == "tok_valid" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens left after the sweeps", len(toks))
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
