//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// devChildAttrs puts a dev node in its own process group, so a terminal
// Ctrl-C reaches only `contrail dev` (which then stops the nodes), and
// has the kernel stop it if `contrail dev` dies without doing so.
func devChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
