package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contrail/contrail/dataplane/tier/tiertest"
)

// Tiered-storage scenario (-tier): with versitygw on loopback as the S3
// server, Contrail publishes -tier-mib of 16 KiB messages with a small
// local budget (upload throughput while publishing), then an ordered
// consumer replays them from sequence 1, nearly all cold (MB/s);
// nats-server, which has no tiering, replays the same data from its
// disk. Then `nats bench js pub async` runs against Contrail with
// tiering on (a budget it passes within the run) and off.
const (
	tierMsgSize     = 16 << 10
	tierSegment     = "16MiB"
	tierLocalBudget = 128 << 20
)

// ensureVersity finds versitygw at the pinned version, or installs it.
func ensureVersity(ctx context.Context) (string, error) {
	if bin, err := tiertest.Find(); err == nil {
		return bin, nil
	}
	dirs, err := goBinDirs(ctx)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "bench: versitygw %s not found, running go install\n", tiertest.Version)
	cmd := exec.CommandContext(ctx, "go", "install", tiertest.Package+"@"+tiertest.Version)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install versitygw: %w", err)
	}
	return filepath.Join(dirs[0], "versitygw"), nil
}

// startVersity runs versitygw over root (bucket "tier"), and sets the
// AWS environment the Contrail server started after it inherits.
func startVersity(ctx context.Context, root string) (endpoint string, stop func(), err error) {
	bin, err := ensureVersity(ctx)
	if err != nil {
		return "", nil, err
	}
	logf, err := os.Create(filepath.Join(root, "versitygw.log"))
	if err != nil {
		return "", nil, err
	}
	srv, err := tiertest.Start(tiertest.Options{Bin: bin, Root: filepath.Join(root, "s3"), Buckets: []string{"tier"}, Log: logf, Setup: isolate})
	if err != nil {
		logf.Close()
		return "", nil, err
	}
	for k, v := range tiertest.Env(root) {
		os.Setenv(k, v)
	}
	return srv.Endpoint, func() { srv.Stop(); logf.Close() }, nil
}

// tieredArgs runs the Contrail dataplane tiering to endpoint's bucket;
// with pprof set, it also serves Go's profiler there.
func tieredArgs(endpoint, segment string, budget int64, pprof string) serverArgs {
	return withPprof(func(port, monitorPort int, dataDir string) []string {
		return append(contrailArgs(port, monitorPort, dataDir), "--tier-url", "s3://tier/bench", "--tier-endpoint", endpoint,
			"--tier-segment-bytes", segment, "--tier-local-bytes", strconv.FormatInt(budget, 10))
	}, pprof)
}

// withPprof adds Go's profiler at addr to a Contrail server's arguments
// (none when addr is empty).
func withPprof(args serverArgs, addr string) serverArgs {
	if addr == "" {
		return args
	}
	return func(port, monitorPort int, dataDir string) []string {
		return append(args(port, monitorPort, dataDir), "--pprof-addr", addr)
	}
}

// settleDir waits until dir's size has not changed for quiet (the node
// has compacted what tiering replaced, as for data tiered a while ago),
// or limit passes; it returns the time taken and the size.
func settleDir(ctx context.Context, dir string, quiet, limit time.Duration) (time.Duration, int64, error) {
	began := time.Now()
	last, since := int64(-1), time.Now()
	for {
		n, err := dirSize(dir)
		if err != nil {
			return 0, 0, err
		}
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) >= quiet || time.Since(began) >= limit {
			return time.Since(began), n, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// cpuProfile fetches a CPU profile of secs seconds from the profiler at
// addr into path.
func cpuProfile(ctx context.Context, addr string, secs int, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	return f.Close()
}

type tierStatus struct {
	Tier *struct {
		LocalBytes  int64 `json:"local_bytes"`
		ColdBytes   int64 `json:"cold_bytes"`
		UploadBytes int64 `json:"upload_bytes"`
		Segments    int   `json:"segments"`
		GetBytes    int64 `json:"get_bytes"`
	} `json:"tier"`
}

func readTier(monitor string) (tierStatus, error) {
	var ts tierStatus
	resp, err := http.Get(monitor + "/jsz")
	if err != nil {
		return ts, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ts); err != nil || ts.Tier == nil {
		return ts, fmt.Errorf("/jsz has no tier state (%v)", err)
	}
	return ts, nil
}

// publishMiB publishes n messages of tierMsgSize to stream T (created
// here) with async publishes, and returns the MB/s acknowledged.
func publishMiB(ctx context.Context, url string, n int) (float64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		return 0, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Storage: jetstream.FileStorage}); err != nil {
		return 0, err
	}
	data := make([]byte, tierMsgSize)
	began := time.Now()
	for i := range n {
		copy(data, strconv.Itoa(i))
		for {
			_, err := js.PublishAsync("t", data)
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return 0, err
			}
			// The server paces publishers: wait for the window to drain.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(n*tierMsgSize) / time.Since(began).Seconds() / 1e6, nil
}

// replay reads stream T from sequence 1 with an ordered consumer and
// returns MB/s.
func replay(ctx context.Context, url string, n int) (float64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		return 0, err
	}
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, err
	}
	it, err := oc.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	began := time.Now()
	var bytes int
	for i := range n {
		m, err := it.Next()
		if err != nil {
			return 0, fmt.Errorf("replay at message %d: %w", i+1, err)
		}
		bytes += len(m.Data())
	}
	return float64(bytes) / time.Since(began).Seconds() / 1e6, nil
}

func tierBenchmark(ctx context.Context, cfg config) error {
	root, cleanup, err := benchDir("contrail-bench-tier-", cfg.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	contrailBin, serverBin, err := serverBinaries(ctx, cfg, root)
	if err != nil {
		return err
	}
	natsBin, err := natsCLI.ensure(ctx, cfg.natsBin)
	if err != nil {
		return err
	}
	endpoint, stopS3, err := startVersity(ctx, root)
	if err != nil {
		return err
	}
	defer stopS3()
	n := int(cfg.tierMiB << 20 / tierMsgSize)
	fmt.Printf("tiered storage: %d MiB in %d messages of %d KiB, versitygw %s at %s, segments %s, local budget %d MiB\n",
		cfg.tierMiB, n, tierMsgSize>>10, tiertest.Version, endpoint, tierSegment, tierLocalBudget>>20)

	parts := map[string]bool{}
	for _, p := range strings.Split(cfg.tierParts, ",") {
		switch p = strings.TrimSpace(p); p {
		case "replay", "nats", "pub":
			parts[p] = true
		default:
			return fmt.Errorf("-tier-parts: unknown part %q (replay, nats, pub)", p)
		}
	}

	var pubOn, upload, cold, local float64
	if parts["replay"] {
		pprof := ""
		if cfg.tierProfile != "" {
			ports, err := freePorts(1)
			if err != nil {
				return err
			}
			pprof = "127.0.0.1:" + strconv.Itoa(ports[0])
		}
		err = onServer(ctx, "contrail-tier", contrailBin, tieredArgs(endpoint, tierSegment, tierLocalBudget, pprof), root, func(srv *server) error {
			began := time.Now()
			if pubOn, err = publishMiB(ctx, srv.url, n); err != nil {
				return err
			}
			var ts tierStatus
			for {
				if ts, err = readTier(srv.monitor); err != nil {
					return err
				}
				if ts.Tier.LocalBytes <= tierLocalBudget {
					break
				}
				if ctx.Err() != nil || time.Since(began) > 30*time.Minute {
					return fmt.Errorf("tiering did not reach the budget: %+v", *ts.Tier)
				}
				time.Sleep(100 * time.Millisecond)
			}
			upload = float64(ts.Tier.UploadBytes) / time.Since(began).Seconds() / 1e6
			fmt.Printf("  contrail: published at %.0f MB/s with tiering; %.0f MiB cold in %d segments, uploads %.0f MB/s over publish and drain\n",
				pubOn, float64(ts.Tier.ColdBytes)/(1<<20), ts.Tier.Segments, upload)
			settled, size, err := settleDir(ctx, serverDataDir(root, "contrail-tier"), 3*time.Second, 2*time.Minute)
			if err != nil {
				return err
			}
			fmt.Printf("  contrail: data dir %.0f MiB after the store compacted what tiering replaced (%s)\n", float64(size)/(1<<20), settled.Round(time.Second))
			var runs []float64
			for i := range cfg.tierReplays {
				prof := make(chan error, 1)
				if i == 0 && pprof != "" {
					// Profile most of the replay: it runs at least a few seconds.
					go func() { prof <- cpuProfile(ctx, pprof, 4, cfg.tierProfile) }()
				} else {
					prof <- nil
				}
				before, _ := readTier(srv.monitor)
				r, err := replay(ctx, srv.url, n)
				if err != nil {
					return err
				}
				after, _ := readTier(srv.monitor)
				fmt.Printf("  contrail: ordered replay %d/%d from seq 1 at %.0f MB/s (%.0f MiB fetched from S3)\n",
					i+1, cfg.tierReplays, r, float64(after.Tier.GetBytes-before.Tier.GetBytes)/(1<<20))
				if err := <-prof; err != nil {
					return err
				}
				runs = append(runs, r)
			}
			slices.Sort(runs)
			cold = runs[len(runs)/2]
			return nil
		})
		if err != nil {
			return err
		}
	}
	if parts["nats"] {
		err = onServer(ctx, sideNatsServer, serverBin, natsServerArgs, root, func(srv *server) error {
			if _, err := publishMiB(ctx, srv.url, n); err != nil {
				return err
			}
			local, err = replay(ctx, srv.url, n)
			fmt.Printf("  nats-server: ordered replay from its disk at %.0f MB/s\n", local)
			return err
		})
		if err != nil {
			return err
		}
	}

	fmt.Printf("\n%-46s %12s\n", "tiered storage", "figure")
	if parts["replay"] {
		fmt.Printf("%-46s %9.0f MB/s  (target ≥ 200; median of %d)\n", "cold replay, ordered consumer from seq 1", cold, cfg.tierReplays)
	}
	if parts["nats"] {
		fmt.Printf("%-46s %9.0f MB/s\n", "nats-server replay of the same data from disk", local)
	}
	if parts["replay"] {
		fmt.Printf("%-46s %9.0f MB/s\n", "publish with tiering (16 KiB, async)", pubOn)
		fmt.Printf("%-46s %9.0f MB/s\n", "uploads while publishing", upload)
	}
	if !parts["pub"] {
		return nil
	}

	// js pub async (natscli, 128 B messages) with tiering on and off. The
	// budget is the smallest with the store's full memtable (a smaller
	// one shrinks it to the budget), passed about 40 % into the run.
	runner, err := newNatsRunner(natsBin, root, cfg.timeout, cfg.subGrace, cfg.verbose)
	if err != nil {
		return err
	}
	w, _ := selectWorkloads("js pub async")
	msgs := w[0].msgs(cfg.msgs)
	rates := &result{w: w[0], msgs: msgs, rounds: map[string][][]float64{}, errs: map[string]error{}}
	// The server's CPU time during each round: on these shared machines
	// it varies less than the rate, and what tiering costs is CPU.
	cpu := map[string][]float64{}
	for round := range cfg.rounds {
		var pprofOn, pprofOff string
		if round == 0 && cfg.tierProfile != "" {
			ports, err := freePorts(2)
			if err != nil {
				return err
			}
			pprofOn, pprofOff = "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
		}
		for _, side := range []struct {
			name  string
			args  serverArgs
			pprof string
			file  string
		}{
			{"tiering on", tieredArgs(endpoint, "1MiB", 32<<20, pprofOn), pprofOn, cfg.tierProfile + "-pub"},
			{"tiering off", withPprof(contrailArgs, pprofOff), pprofOff, cfg.tierProfile + "-pub-off"},
		} {
			err := onServer(ctx, "contrail-"+strings.ReplaceAll(side.name, " ", "-"), contrailBin, side.args, root, func(srv *server) error {
				prof := make(chan error, 1)
				if side.pprof != "" {
					// The first round of each side, into <file>-pub and
					// <file>-pub-off, so the two can be compared; long enough
					// to cover the round.
					go func() { prof <- cpuProfile(ctx, side.pprof, 6, side.file) }()
				} else {
					prof <- nil
				}
				before, err := cpuTicks(srv.pid())
				if err != nil {
					return err
				}
				vals, _, err := runner.runRound(ctx, w[0], srv, msgs, fmt.Sprintf("tier-%s-r%d", strings.ReplaceAll(side.name, " ", "-"), round+1))
				after, cerr := cpuTicks(srv.pid())
				if perr := <-prof; err == nil {
					err = perr
				}
				if err == nil {
					err = cerr
				}
				if err == nil {
					secs := float64(after-before) / clockTicksPerSec
					rates.rounds[side.name] = append(rates.rounds[side.name], vals)
					cpu[side.name] = append(cpu[side.name], secs)
					fmt.Printf("  round %d/%d  js pub async, %-11s %s msgs/s, server CPU %.2f s\n", round+1, cfg.rounds, side.name, commas(int64(vals[0])), secs)
				}
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	on, off := rates.median("tiering on", 0), rates.median("tiering off", 0)
	fmt.Printf("%-46s %9.2fx (target ≥ 0.9)  %s vs %s msgs/s\n", "js pub async, tiering on / off", on/off, commas(int64(on)), commas(int64(off)))
	cpuOn, cpuOff := medianOf(cpu["tiering on"]), medianOf(cpu["tiering off"])
	fmt.Printf("%-46s %9.2fx  %.2f vs %.2f s (median of %d)\n", "server CPU per round, tiering on / off", cpuOn/cpuOff, cpuOn, cpuOff, len(cpu["tiering on"]))
	return nil
}
