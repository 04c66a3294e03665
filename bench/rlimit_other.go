//go:build !linux && !darwin

package main

import (
	"errors"
	"fmt"
)

// raiseOpenFileLimit is written for Linux and macOS only (the rlimit
// types differ elsewhere), so on this system -tenants cannot promise the
// servers their connections: it says so instead of running into the
// limit halfway.
func raiseOpenFileLimit(want uint64) (uint64, error) {
	return 0, fmt.Errorf("need %d open files: %w", want, errors.ErrUnsupported)
}
