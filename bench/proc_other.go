//go:build !linux

package main

import "os/exec"

// isolate is a no-op outside Linux: children keep the harness's process
// group, and the harness stops them itself.
func isolate(cmd *exec.Cmd) {}
