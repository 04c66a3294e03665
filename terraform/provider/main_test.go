package provider_test

// Acceptance tests: a real terraform binary (TF_ACC_TERRAFORM_PATH,
// installed by `make tools`) drives the provider, served in-process
// (ProtoV6ProviderFactories, so nothing is downloaded), against a real
// `contrail dev` that TestMain builds and starts on free ports with its
// own data directory. Each test signs up its own organization. Every
// exchange with the control plane passes a proxy that holds it to
// openapi/openapi.yaml (spec_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/contrail/contrail/terraform/client"
	"github.com/contrail/contrail/terraform/provider"
)

// dev is the `contrail dev` the tests share.
var dev struct {
	URL     string // control plane base URL
	NatsURL string
}

// natsCLI is the stock nats CLI (natscli), which `make tools` installs.
var natsCLI string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	gopath := goEnv("GOPATH")
	// The tests run in plain `go test ./...`: they need a terraform
	// binary, and say so rather than skip or download one.
	if os.Getenv("TF_ACC") == "" {
		os.Setenv("TF_ACC", "1")
	}
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		os.Setenv("TF_ACC_TERRAFORM_PATH", filepath.Join(gopath, "bin", "terraform"))
	}
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if _, err := os.Stat(tf); err != nil {
		fmt.Fprintf(os.Stderr, "terraform acceptance tests need terraform 1.5.7 at TF_ACC_TERRAFORM_PATH=%s "+
			"(make tools installs it: go install github.com/hashicorp/terraform@v1.5.7): %v\n", tf, err)
		return 1
	}
	natsCLI = filepath.Join(gopath, "bin", "nats")
	if _, err := os.Stat(natsCLI); err != nil {
		fmt.Fprintf(os.Stderr, "the acceptance tests need the nats CLI (make tools installs it): %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "contrail-tfacc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// A developer's ~/.terraformrc (mirrors, credentials) must not
	// change what the tests do; no checkpoint calls either.
	cliConfig := filepath.Join(dir, "terraformrc")
	if err := os.WriteFile(cliConfig, nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("TF_CLI_CONFIG_FILE", cliConfig)
	os.Setenv("CHECKPOINT_DISABLE", "1")

	stop, err := startDev(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	// Everything the tests and the provider send goes through the spec
	// check; the tests read dev.URL, so they all do.
	proxy, err := startSpecProxy(dev.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer proxy.Close()
	dev.URL = proxy.URL()
	code := m.Run()
	if bad := proxy.violations(); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d exchange(s) do not match openapi/openapi.yaml:\n", len(bad))
		for _, b := range bad {
			fmt.Fprintln(os.Stderr, "  "+b)
		}
		return 1
	}
	return code
}

func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startDev builds ./cmd/contrail into dir and runs `contrail dev` on free
// loopback ports until stop is called.
func startDev(dir string) (stop func(), err error) {
	bin := filepath.Join(dir, "contrail")
	build := exec.Command("go", "build", "-o", bin, "github.com/contrail/contrail/cmd/contrail")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building contrail: %v\n%s", err, out)
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "contrail-dev.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "dev", "--http-addr", httpAddr, "--nats-addr", natsAddr, "--monitor-addr", "",
		"--data-dir", filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	dev.URL, dev.NatsURL = "http://"+httpAddr, "nats://"+natsAddr
	// Ready once /readyz says the control plane reaches its cell.
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get(dev.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		select {
		case <-exited:
		case <-tick.C:
			if time.Now().Before(deadline) {
				continue
			}
			stop()
		}
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("contrail dev did not become ready:\n%s", log)
	}
}

// factories serve the provider in-process to the terraform binary.
var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"contrail": providerserver.NewProtocol6WithError(provider.New("test")()),
}

// tenant is one test's organization: its token, a client, and the
// provider block that acts for it.
type tenant struct {
	Token    string
	Client   *client.Client
	Provider string
}

var signups sync.Mutex
var signupN int

// signup makes a new person and organization on the shared dev.
func signup(t *testing.T) *tenant {
	t.Helper()
	signups.Lock()
	signupN++
	email := fmt.Sprintf("tf%d-%d@example.com", signupN, time.Now().UnixNano())
	signups.Unlock()
	body, _ := json.Marshal(map[string]string{"email": email, "password": "correct horse battery", "organization": t.Name()})
	resp, err := http.Post(dev.URL+"/v1/signup", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		t.Fatalf("signup: %d %s", resp.StatusCode, data)
	}
	var out struct{ Token string }
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(dev.URL, out.Token)
	if err != nil {
		t.Fatal(err)
	}
	return &tenant{Token: out.Token, Client: c,
		Provider: fmt.Sprintf("provider \"contrail\" {\n  endpoint = %q\n  token    = %q\n}\n", dev.URL, out.Token)}
}

// ctx is a bounded context for a test's own API calls.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
