package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startDevCluster runs `contrail dev --nodes 3` on free ports: the
// addresses are given one per node, as a list; extra flags follow.
func startDevCluster(t *testing.T, dataDir string, extra ...string) (d *devProc, natsURLs, clusterAddrs []string) {
	t.Helper()
	var nats, mon []string
	for range 3 {
		a := freeAddr(t)
		nats, natsURLs = append(nats, a), append(natsURLs, "nats://"+a)
		mon, clusterAddrs = append(mon, freeAddr(t)), append(clusterAddrs, freeAddr(t))
	}
	d = &devProc{DataDir: dataDir, httpAddr: freeAddr(t), natsAddr: strings.Join(nats, ",")}
	d.URL, d.NatsURL = "http://"+d.httpAddr, strings.Join(natsURLs, ",")
	d.args = append([]string{"--nodes", "3", "--monitor-addr", strings.Join(mon, ","), "--cluster-addr", strings.Join(clusterAddrs, ",")}, extra...)
	d.start(t)
	return d, natsURLs, clusterAddrs
}

// natsJSON runs the nats CLI with args and decodes its JSON output.
func natsJSON(t *testing.T, v any, args ...string) error {
	t.Helper()
	out, err := exec.Command(natsCLI(t), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nats %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("nats %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// TestDevCluster: `contrail dev --nodes 3` prints every node's URLs, the
// nats CLI creates an R3 stream through one node with the dev creds and
// publishes to it through another, stream info shows three replicas,
// and a restart on the same data dir brings the stream back.
func TestDevCluster(t *testing.T) {
	d, urls, clusterAddrs := startDevCluster(t, filepath.Join(t.TempDir(), "data"))
	out := d.out.String()
	creds := filepath.Join(d.DataDir, "dev.creds")
	for i, want := range []string{d.NatsURL, urls[0], urls[1], urls[2], clusterAddrs[0], clusterAddrs[2], creds} {
		if !strings.Contains(out, want) {
			t.Fatalf("dev output lacks %q (%d):\n%s", want, i, out)
		}
	}
	cli := natsCLI(t)
	if o, err := exec.Command(cli, "--server", urls[1], "--creds", creds, "stream", "add", "R3",
		"--subjects", "r3.>", "--replicas", "3", "--defaults").CombinedOutput(); err != nil {
		t.Fatalf("nats stream add --replicas 3: %v\n%s", err, o)
	}
	// Acknowledged publishes, each sent again under its message id if
	// the first try falls into a leadership move (the balancer spreads
	// partitions right after start): a core publish then may be dropped.
	for i := range 3 {
		id := fmt.Sprintf("Nats-Msg-Id:dev-%d", i)
		for try := 0; ; try++ {
			o, err := exec.Command(cli, "--server", urls[2], "--creds", creds, "pub", "--jetstream", "-H", id, "r3.x", "hello").CombinedOutput()
			if err == nil {
				break
			}
			if try == 4 {
				t.Fatalf("nats pub --jetstream: %v\n%s", err, o)
			}
		}
	}
	type info struct {
		Config struct {
			Replicas int `json:"num_replicas"`
		} `json:"config"`
		State struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
		Cluster struct {
			Leader   string `json:"leader"`
			Replicas []struct {
				Name    string `json:"name"`
				Current bool   `json:"current"`
			} `json:"replicas"`
		} `json:"cluster"`
	}
	// After a restart the stream answers once its partition has a leader.
	check := func(when string) {
		t.Helper()
		var si info
		var err error
		waitFor(t, startTimeout, "stream info "+when, func() bool {
			si = info{}
			err = natsJSON(t, &si, "--server", urls[0], "--creds", creds, "stream", "info", "R3", "--json")
			// Core publishes are not acknowledged: the stream
			// holds them once its leader has applied them.
			return err == nil && si.Cluster.Leader != "" && si.State.Msgs == 3
		})
		if si.Config.Replicas != 3 || len(si.Cluster.Replicas) != 2 || si.State.Msgs != 3 {
			t.Fatalf("%s: stream info: %+v", when, si)
		}
	}
	check("after publishing")

	d.stop()
	d.start(t)
	check("after a restart")
}

// TestDevNodesRefused: node counts that make no working cluster are
// refused before anything starts.
func TestDevNodesRefused(t *testing.T) {
	for _, c := range []struct{ n, want string }{{"2", "majority"}, {"0", "want 1"}, {"6", "want 1"}} {
		code, _, stderr := runContrail(t, "dev", "--nodes", c.n, "--data-dir", t.TempDir())
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Fatalf("--nodes %s: exit %d, stderr %q", c.n, code, stderr)
		}
	}
}
