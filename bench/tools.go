package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// tool is an external binary the harness needs at a pinned version.
type tool struct {
	name    string // binary name, e.g. "nats"
	pkg     string // go install path, e.g. "github.com/nats-io/natscli/nats"
	version string // e.g. "v0.5.0"
}

var (
	natsCLI    = tool{name: "nats", pkg: "github.com/nats-io/natscli/nats", version: "v0.5.0"}
	natsServer = tool{name: "nats-server", pkg: "github.com/nats-io/nats-server/v2", version: "v2.15.2"}
)

// goEnv returns the value of `go env NAME`.
func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// goBinDirs returns where `go install` puts binaries: $GOBIN if set,
// otherwise bin/ under each $GOPATH entry.
func goBinDirs(ctx context.Context) ([]string, error) {
	gobin, err := goEnv(ctx, "GOBIN")
	if err != nil {
		return nil, err
	}
	if gobin != "" {
		return []string{gobin}, nil
	}
	gopath, err := goEnv(ctx, "GOPATH")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, p := range filepath.SplitList(gopath) {
		dirs = append(dirs, filepath.Join(p, "bin"))
	}
	return dirs, nil
}

// binaryVersionOK reports whether `bin --version` prints t.version as a
// whitespace-separated token ("v0.5.0", "nats-server: v2.15.2").
func (t tool) binaryVersionOK(ctx context.Context, bin string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	got := strings.TrimSpace(string(out))
	if err != nil {
		return false, got
	}
	return slices.Contains(strings.Fields(got), t.version), got
}

// ensure returns the path of a binary of t at the pinned version. With a
// non-empty override it only checks that binary (a version mismatch is an
// error). Otherwise it looks in the go install directories, then PATH,
// and falls back to `go install pkg@version`.
func (t tool) ensure(ctx context.Context, override string) (string, error) {
	if override != "" {
		ok, got := t.binaryVersionOK(ctx, override)
		if !ok {
			return "", fmt.Errorf("%s: want version %s, `%s --version` said %q", override, t.version, override, got)
		}
		return override, nil
	}
	dirs, err := goBinDirs(ctx)
	if err != nil {
		return "", err
	}
	var candidates []string
	for _, d := range dirs {
		candidates = append(candidates, filepath.Join(d, t.name))
	}
	if p, err := exec.LookPath(t.name); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err != nil {
			continue
		}
		if ok, _ := t.binaryVersionOK(ctx, c); ok {
			return c, nil
		}
	}

	target := t.pkg + "@" + t.version
	fmt.Fprintf(os.Stderr, "bench: %s %s not found, running go install %s\n", t.name, t.version, target)
	cmd := exec.CommandContext(ctx, "go", "install", target)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install %s: %w", target, err)
	}
	for _, d := range dirs {
		c := filepath.Join(d, t.name)
		if ok, _ := t.binaryVersionOK(ctx, c); ok {
			return c, nil
		}
	}
	return "", fmt.Errorf("go install %s succeeded but no %s %s found in %s", target, t.name, t.version, strings.Join(dirs, ", "))
}

// buildContrail builds ./cmd/contrail of the enclosing module into dir.
func buildContrail(ctx context.Context, dir string) (string, error) {
	gomod, err := goEnv(ctx, "GOMOD")
	if err != nil {
		return "", err
	}
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the contrail module (go env GOMOD is empty); run from the repository or pass -contrail-bin")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	out := filepath.Join(dir, "contrail")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/contrail")
	cmd.Dir = filepath.Dir(gomod)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/contrail: %w\n%s", err, strings.TrimSpace(string(msg)))
	}
	return out, nil
}
