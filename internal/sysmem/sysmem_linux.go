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

// available reads MemAvailable from /proc/meminfo, lowered to what the
// cgroup v2 (memory.max − memory.current) or v1 (memory.limit_in_bytes −
// memory.usage_in_bytes) limit leaves.
func available() (int64, bool) {
	return availableIn("/proc/meminfo", [][2]string{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	})
}

// availableIn is available over the given meminfo file and cgroup (limit,
// usage) file pairs.
func availableIn(meminfo string, cgroups [][2]string) (int64, bool) {
	avail, ok := memField(meminfo, "MemAvailable:")
	for _, f := range cgroups {
		lim, found := cgroupLimit(f[0])
		if !found {
			continue
		}
		used, found := cgroupLimit(f[1])
		if !found {
			continue
		}
		if room := max(lim-used, 0); !ok || room < avail {
			avail, ok = room, true
		}
	}
	return avail, ok
}

// resident reads the resident pages of /proc/self/statm.
func resident() (int64, bool) {
	return statmResident("/proc/self/statm", os.Getpagesize())
}

// statmResident parses a statm file's second field (resident pages).
func statmResident(path string, page int) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n * int64(page), true
}

// memTotal parses the MemTotal line of a meminfo file.
func memTotal(path string) (int64, bool) {
	n, ok := memField(path, "MemTotal:")
	return n, ok && n > 0
}

// memField parses a "Name: N kB" line of a meminfo file.
func memField(path, name string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), name)
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err == nil && kb >= 0
	}
	return 0, false
}

// cgroupLimit reads a cgroup memory file: a limit ("max" or a huge number:
// none) or a usage.
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
