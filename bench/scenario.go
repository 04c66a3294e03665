package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The steps every scenario shares: its temp dir, the two servers'
// binaries, one server per side whose log tail comes with a failure, and
// the run over the sides that keeps going when one of them fails.

// benchDir makes a scenario's temp dir. cleanup removes it, or with keep
// prints its path and leaves it (server logs, data, CSV files).
func benchDir(prefix string, keep bool) (root string, cleanup func(), err error) {
	root, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("creating temp dir: %w", err)
	}
	return root, func() {
		if keep {
			fmt.Printf("kept %s\n", root)
			return
		}
		if err := os.RemoveAll(root); err != nil {
			fmt.Fprintf(os.Stderr, "bench: removing %s: %v\n", root, err)
		}
	}, nil
}

// serverBinaries returns the binaries of both sides: Contrail's is
// -contrail-bin or else built from ./cmd/contrail into root/bin, and with
// -selftest it is nats-server's, which is always found or installed.
func serverBinaries(ctx context.Context, cfg config, root string) (contrailBin, serverBin string, err error) {
	if serverBin, err = natsServer.ensure(ctx, cfg.natsServerBin); err != nil {
		return "", "", err
	}
	switch contrailBin = cfg.contrailBin; {
	case cfg.selftest:
		contrailBin = serverBin
	case contrailBin == "":
		fmt.Println("building ./cmd/contrail ...")
		if contrailBin, err = buildContrail(ctx, filepath.Join(root, "bin")); err != nil {
			return "", "", err
		}
	}
	return contrailBin, serverBin, nil
}

// plainContrailArgs is the contrail side's command line in the scenarios
// without accounts: a second nats-server's under -selftest.
func plainContrailArgs(selftest bool) serverArgs {
	if selftest {
		return natsServerArgs
	}
	return contrailArgs
}

// onServer starts one side's server, runs measure against it and stops
// it. An error of measure comes with the tail of the server's log (one
// of startServer carries its own).
func onServer(ctx context.Context, name, bin string, args serverArgs, root string, measure func(*server) error) error {
	srv, err := startServer(ctx, name, bin, args, root)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := measure(srv); err != nil {
		return fmt.Errorf("%w\n  --- %s log (tail) ---\n%s", err, name, indent(srv.logTail(15)))
	}
	return nil
}

// sideOutcome is what every scenario's result for one server says
// besides its figures.
type sideOutcome struct {
	side   string
	failed error // nil if the side completed
}

func (o *sideOutcome) outcome() *sideOutcome { return o }

// sideResult is a scenario's result for one server.
type sideResult interface{ outcome() *sideOutcome }

// runSides runs a scenario on each side in turn; a side's failure is
// printed as it happens and the next side still runs. It returns ctx's
// error, and no results, once the run is interrupted.
func runSides[S any, R sideResult](ctx context.Context, sides []S, run func(S) R) ([]R, error) {
	var results []R
	for _, s := range sides {
		r := run(s)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := r.outcome().failed; err != nil {
			fmt.Printf("  FAILED: %v\n", err)
		}
		results = append(results, r)
	}
	return results, nil
}

// sidesError names the sides that failed, then the other problems
// given; nil if there are none.
func sidesError[R sideResult](results []R, problems ...string) error {
	var errs []string
	for _, r := range results {
		if o := r.outcome(); o.failed != nil {
			errs = append(errs, o.side+" failed")
		}
	}
	errs = append(errs, problems...)
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
