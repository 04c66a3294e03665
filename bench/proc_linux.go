//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// isolate puts a child in its own process group, so a terminal Ctrl-C
// reaches only the harness (which then shuts children down in order), and
// has the kernel kill it if the harness dies without cleaning up.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
