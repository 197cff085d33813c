//go:build !race

package cpu

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
