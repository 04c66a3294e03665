package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeQuickStart returns the first ```sh block after "## Quick start"
// in README.md.
func readmeQuickStart(t *testing.T) string {
	t.Helper()
	readme := string(mustRead(t, filepath.Join("..", "..", "README.md")))
	_, after, ok := strings.Cut(readme, "## Quick start")
	if !ok {
		t.Fatal(`README.md has no "## Quick start"`)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("README quick start has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README quick start block is not closed")
	}
	return block
}

// TestReadmeQuickStart runs the README's quick start as written, with
// bash, against the freshly built binary: only the ports and the binary
// are substituted, so the README stays true.
func TestReadmeQuickStart(t *testing.T) {
	block := readmeQuickStart(t)
	if !strings.Contains(block, "go run ./cmd/contrail dev &") || !strings.Contains(block, "localhost:8080") {
		t.Fatalf("the quick start no longer starts with `go run ./cmd/contrail dev &` on localhost:8080:\n%s", block)
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed; `make tools` installs it", tool)
		}
	}
	cli := natsCLI(t)
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	script := strings.ReplaceAll(block, "go run ./cmd/contrail dev &",
		contrailBin+" dev --http-addr "+httpAddr+" --nats-addr "+natsAddr+" --monitor-addr '' > dev.log 2>&1 &")
	script = strings.ReplaceAll(script, "localhost:8080", httpAddr)
	script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + script
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "NATS_URL=nats://"+natsAddr, "PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the quick start did not finish in 2 minutes:\n%s", out)
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
		t.Fatalf("the README quick start failed: %v\n%s\ncontrail dev log:\n%s", err, out, tail(string(log), 8<<10))
	}
	if !strings.Contains(string(out), "ORDERS") || !strings.Contains(string(out), "Messages: 1") {
		t.Fatalf("stream info does not show the published message:\n%s", out)
	}
	if !strings.Contains(string(mustRead(t, filepath.Join(dir, "app.creds"))), "NATS USER JWT") {
		t.Fatal("app.creds is not a creds file")
	}
}
