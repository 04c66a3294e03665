//go:build linux || darwin

package main

import (
	"fmt"
	"syscall"
)

// raiseOpenFileLimit raises the soft RLIMIT_NOFILE to at least want:
// to max(want, 65536) capped at the hard limit, or, if the hard limit is
// below want, both to want (which needs privileges). It returns the new
// soft limit. Setting it explicitly matters: Go raises its own soft limit
// at startup but restores the original one in children unless the program
// calls Setrlimit itself; this way the servers inherit the raised limit.
func raiseOpenFileLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	next := lim
	next.Cur = max(lim.Cur, min(max(want, 1<<16), lim.Max))
	if want > lim.Max {
		next.Cur, next.Max = want, want
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		if want > lim.Max {
			return lim.Cur, fmt.Errorf("need %d open files, the hard limit is %d and raising it failed: %w (raise it with ulimit -Hn)", want, lim.Max, err)
		}
		return lim.Cur, err
	}
	return next.Cur, nil
}
