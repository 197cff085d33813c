// Package sysmem tells how much memory the machine gives this process: the
// physical memory, or a smaller limit of the control group it runs in; how
// much of it the process could still take now; and how much it holds.
package sysmem

// Total returns the bytes of memory available to the process in all (not
// what is free now): physical memory, lowered to the cgroup's memory limit
// where one is set. ok is false when it cannot be told.
func Total() (bytes int64, ok bool) { return total() }

// Available returns the bytes of memory the process could still take now
// without pushing other processes' memory out: physical memory less what
// other processes (and this one) hold, counting memory the system reclaims
// at once (file cache, purgeable memory) as available. On Linux it is
// MemAvailable, lowered to what the cgroup's limit leaves; on macOS the
// physical memory less wired, compressed and anonymous (app) memory, as
// Activity Monitor counts "Memory Used". ok is false when it cannot be told.
func Available() (bytes int64, ok bool) { return available() }

// Resident returns the bytes of this process's resident memory (its RSS:
// heap, stacks and the mapped file pages it has touched). ok is false when
// it cannot be told.
func Resident() (bytes int64, ok bool) { return resident() }
