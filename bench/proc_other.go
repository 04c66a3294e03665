//go:build !linux

package main

import "os/exec"

// isolate is a no-op outside Linux.
func isolate(cmd *exec.Cmd) {}

// raiseOpenFileLimit is not implemented outside Linux; the current limit
// must suffice.
func raiseOpenFileLimit(want uint64) (uint64, error) { return want, nil }
