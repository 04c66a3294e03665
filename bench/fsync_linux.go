//go:build linux

package main

import (
	"os"
	"syscall"
)

// datasync flushes f's data (and only the metadata needed to read it
// back), as a database's log sync does.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
