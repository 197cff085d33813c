package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// total reads MemTotal from /proc/meminfo and the cgroup v2 (memory.max)
// or v1 (memory.limit_in_bytes) limit.
func total() (int64, bool) {
	phys, ok := memTotal("/proc/meminfo")
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if lim, found := cgroupLimit(f); found && (!ok || lim < phys) {
			phys, ok = lim, true
		}
	}
	return phys, ok
}

// memTotal parses the MemTotal line of a meminfo file.
func memTotal(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err == nil && kb > 0
	}
	return 0, false
}

// cgroupLimit reads a cgroup memory limit file ("max" or a huge number:
// none).
func cgroupLimit(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
