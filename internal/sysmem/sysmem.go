// Package sysmem tells how much memory the machine gives this process: the
// physical memory, or a smaller limit of the control group it runs in.
package sysmem

// Total returns the bytes of memory available to the process in all (not
// what is free now): physical memory, lowered to the cgroup's memory limit
// where one is set. ok is false when it cannot be told.
func Total() (bytes int64, ok bool) { return total() }
