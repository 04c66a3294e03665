//go:build !linux

package main

import "os"

// datasync flushes f with fsync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }
