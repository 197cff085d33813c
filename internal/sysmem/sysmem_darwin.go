package sysmem

import "golang.org/x/sys/unix"

// total reads hw.memsize.
func total() (int64, bool) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil || n == 0 || n >= 1<<62 {
		return 0, false
	}
	return int64(n), true
}
