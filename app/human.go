package app

import (
	"fmt"
	"math"
)

// FormatBytes writes a byte count in binary units: "0 B", "512 B",
// "1.5 KiB", "12 MiB", "2.0 GiB" — one decimal below 10 of a unit, none
// above.
func FormatBytes(n int64) string {
	if n < 0 {
		return "-" + FormatBytes(-n)
	}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v < 10 {
		// Round first so 9.96 KiB shows as "10 KiB", not "10.0 KiB".
		if r := math.Round(v*10) / 10; r < 10 {
			return fmt.Sprintf("%.1f %s", r, units[i])
		}
	}
	r := math.Round(v)
	if r >= 1024 && i < len(units)-1 {
		return fmt.Sprintf("%.1f %s", r/1024, units[i+1])
	}
	return fmt.Sprintf("%.0f %s", r, units[i])
}
