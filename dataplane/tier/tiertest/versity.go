// Package tiertest runs versitygw, a real S3 server, on loopback: the
// object store the tiered-storage tests and the -tier benchmark talk to.
// One helper for all of them, so they start it, wait for it and set up
// the AWS environment the same way.
package tiertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the versitygw release the tests pin; Package is what `go
// install` takes (make tools installs it).
const (
	Version = "v1.8.0"
	Package = "github.com/versity/versitygw/cmd/versitygw"
)

// The static credentials the server accepts.
const (
	AccessKey = "K"
	SecretKey = "S"
)

// ErrMissing is versitygw not installed at Version.
var ErrMissing = errors.New("versitygw " + Version + " not installed (`make tools` or `go install " + Package + "@" + Version + "`)")

// Find returns the versitygw binary at Version: on PATH, else in a
// GOPATH bin directory. Its --version does not say the release; the
// build info does.
func Find() (string, error) {
	var cands []string
	if p, err := exec.LookPath("versitygw"); err == nil {
		cands = append(cands, p)
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
			cands = append(cands, filepath.Join(d, "bin", "versitygw"))
		}
	}
	for _, bin := range cands {
		if out, err := exec.Command("go", "version", "-m", bin).Output(); err == nil && strings.Contains(string(out), Version) {
			return bin, nil
		}
	}
	return "", ErrMissing
}

// Options configure Start.
type Options struct {
	// Bin is the versitygw binary; empty: Find's.
	Bin string
	// Root is the directory the server serves: each bucket is a
	// subdirectory, made by Start.
	Root    string
	Buckets []string
	// Log receives the server's output (it is also kept for Start's
	// error if the server exits early).
	Log io.Writer
	// Setup adjusts the command before it starts (a process group, say).
	Setup func(*exec.Cmd)
	// Timeout bounds the wait for the server to listen; 0 means 15 s.
	Timeout time.Duration
}

// Server is a running versitygw.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:PORT), for --tier-endpoint.
	Endpoint string
	root     string
	cmd      *exec.Cmd
	exited   chan struct{}
	once     sync.Once
}

// tail keeps the start of what a process wrote, for an error message,
// and copies it to log. It never fails a write: the process would get
// a broken pipe and die with the log closed under it.
type tail struct {
	mu  sync.Mutex
	b   bytes.Buffer
	log io.Writer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.b.Len() < 64<<10 {
		t.b.Write(p)
	}
	if t.log != nil {
		if _, err := t.log.Write(p); err != nil {
			t.log = nil
		}
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

// Start runs versitygw over o.Root on a free loopback port and returns
// once it accepts connections.
func Start(o Options) (*Server, error) {
	bin := o.Bin
	if bin == "" {
		var err error
		if bin, err = Find(); err != nil {
			return nil, err
		}
	}
	for _, b := range o.Buckets {
		if err := os.MkdirAll(filepath.Join(o.Root, b), 0o755); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("versitygw: picking a port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := &tail{log: o.Log}
	var w io.Writer = out
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "posix", o.Root)
	cmd.Stdout, cmd.Stderr = w, w
	if o.Setup != nil {
		o.Setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting versitygw: %w", err)
	}
	s := &Server{Endpoint: "http://" + addr, root: o.Root, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("versitygw exited:\n%s", out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw not listening on %s after %v:\n%s", addr, timeout, out)
		}
	}
}

// BucketDir is the directory holding bucket's objects.
func (s *Server) BucketDir(bucket string) string { return filepath.Join(s.root, bucket) }

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Env is the AWS environment a client of the server needs: its static
// credentials and a region, and no config files (scratch names files
// that do not exist) or instance metadata to look at.
func Env(scratch string) map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           AccessKey,
		"AWS_SECRET_ACCESS_KEY":       SecretKey,
		"AWS_REGION":                  "us-east-1",
		"AWS_CONFIG_FILE":             filepath.Join(scratch, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(scratch, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
}

// StartT is Start for a test: the server serves a temporary directory
// with the buckets, stops when the test ends, and the test's environment
// (so the SDK in the test and any node it starts) gets Env. A missing
// versitygw fails the test.
func StartT(t testing.TB, buckets ...string) *Server {
	t.Helper()
	s, err := Start(Options{Root: t.TempDir(), Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	for k, v := range Env(t.TempDir()) {
		t.Setenv(k, v)
	}
	return s
}
