package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverArgs builds a server's command line from its ports and data dir.
type serverArgs func(port, monitorPort int, dataDir string) []string

// natsServerArgs runs nats-server with JetStream on, loopback only.
func natsServerArgs(port, monitorPort int, dataDir string) []string {
	return []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"-m", strconv.Itoa(monitorPort), "-sd", dataDir}
}

// contrailArgs runs the Contrail dataplane, loopback only.
func contrailArgs(port, monitorPort int, dataDir string) []string {
	return []string{"dataplane",
		"--nats-addr", "127.0.0.1:" + strconv.Itoa(port),
		"--monitor-addr", "127.0.0.1:" + strconv.Itoa(monitorPort),
		"--data-dir", dataDir}
}

// server is a running server process under test.
type server struct {
	name    string // "contrail" or "nats-server"
	url     string // nats://127.0.0.1:PORT
	monitor string // http://127.0.0.1:PORT
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed
}

// freePorts returns n distinct free loopback TCP ports. All listeners are
// held until every port is chosen, so the ports are distinct.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("picking a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// serverDataDir is the data dir startServer gives the server name.
func serverDataDir(root, name string) string {
	return filepath.Join(root, name, "data")
}

// startServer starts bin with a fresh data dir under root and waits until
// it is ready (see waitReady).
func startServer(ctx context.Context, name, bin string, args serverArgs, root string) (*server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, name)
	dataDir := serverDataDir(root, name)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data dir for %s: %w", name, err)
	}
	s := &server{
		name:    name,
		url:     fmt.Sprintf("nats://127.0.0.1:%d", ports[0]),
		monitor: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		logPath: filepath.Join(dir, "server.log"),
		done:    make(chan struct{}),
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log for %s: %w", name, err)
	}
	if err := s.launch(ctx, logf, bin, args(ports[0], ports[1], dataDir), 30*time.Second); err != nil {
		return nil, err
	}
	return s, nil
}

// launch runs bin with argv, its output going to logf (closed on return:
// the child has its own copy of the descriptor), and waits until it is
// ready (see waitReady); a server that does not become ready is stopped.
func (s *server) launch(ctx context.Context, logf *os.File, bin string, argv []string, timeout time.Duration) error {
	defer logf.Close()
	s.cmd = exec.Command(bin, argv...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	isolate(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s (%s): %w", s.name, bin, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx, timeout); err != nil {
		s.stop()
		return fmt.Errorf("%s did not become ready: %w\n%s", s.name, err, s.logTail(20))
	}
	return nil
}

// waitReady polls until the server greets a client with INFO on its NATS
// port and /healthz answers 200 (404 is accepted: endpoint not
// implemented). If the monitor port refuses connections for 3s after the
// NATS port is up, the server is considered ready anyway, with a warning.
func (s *server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	var natsUp time.Time
	var last error
	for {
		if !s.alive() {
			return fmt.Errorf("process exited: %v", s.waitErr)
		}
		if natsUp.IsZero() {
			if last = s.probeINFO(); last == nil {
				natsUp = time.Now()
			}
		}
		if !natsUp.IsZero() {
			code, err := httpStatus(ctx, client, s.monitor+"/healthz")
			switch {
			case err == nil && (code == http.StatusOK || code == http.StatusNotFound):
				return nil
			case err == nil:
				last = fmt.Errorf("GET /healthz: HTTP %d", code)
			case time.Since(natsUp) > 3*time.Second:
				fmt.Fprintf(os.Stderr, "bench: warning: %s monitor %s unreachable (%v); continuing without it\n", s.name, s.monitor, err)
				return nil
			default:
				last = err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeINFO dials the NATS port and expects the INFO greeting.
func (s *server) probeINFO() error {
	addr := strings.TrimPrefix(s.url, "nats://")
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading INFO from %s: %w", addr, err)
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("%s greeted with %q, want INFO", addr, strings.TrimSpace(line))
	}
	return nil
}

// httpStatus GETs url and returns the status code.
func httpStatus(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// pid is the server's process ID.
func (s *server) pid() int { return s.cmd.Process.Pid }

// alive reports whether the server process is still running.
func (s *server) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// stop terminates the server: SIGTERM, then SIGKILL after 5s.
func (s *server) stop() {
	if !s.alive() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// logTail returns the last n lines of the server's combined output.
func (s *server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s log: %v)", s.name, err)
	}
	return tailLines(string(b), n)
}

// tailLines returns the last n lines of text.
func tailLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
