//go:build !linux

package main

import "os/exec"

// isolate is a no-op outside Linux.
func isolate(cmd *exec.Cmd) {}
