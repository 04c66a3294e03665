package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// defaultMaxMemory is what JetStream may use for memory streams when the
// config sets no limit: three quarters of the machine's memory, as
// nats-server sizes it.
func defaultMaxMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb * 1024 / 4 * 3
			}
		}
	}
	return 0
}

// defaultMaxStore is the file-storage limit without a configured one:
// three quarters of the space available where the store lives.
func defaultMaxStore(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize / 4 * 3
}
