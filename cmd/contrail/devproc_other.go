//go:build !linux

package main

import "os/exec"

// devChildAttrs leaves a dev node's process attributes as they are:
// outside Linux a node may outlive a `contrail dev` that is killed.
func devChildAttrs(*exec.Cmd) {}
