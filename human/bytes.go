package human

import (
	"fmt"
	"math"
	"strconv"
)

// Bytes writes a byte count in binary units, as the menu shows memory:
// "0 B", "512 B", "1.5 KiB", "12 MiB", "2.0 GiB" — one decimal below 10
// of a unit, none above.
func Bytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-n)
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

// MB writes a byte count in megabytes, or gigabytes from 1 GB, with one
// decimal: "3.2 MB", "536.9 MB", "1.1 GB" (the memory lines of status).
func MB(n int64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// Size writes n with three significant digits in decimal units, as the
// Hugging Face Hub's pages show sizes: "999 B", "1.08 kB", "23.1 MB",
// "812 MB", "1.75 GB".
func Size(n int64) string {
	if n < 1000 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n), 0
	for v >= 999.5 && unit < 5 {
		v /= 1000
		unit++
	}
	prec := 0
	switch {
	case v < 9.995:
		prec = 2
	case v < 99.95:
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + " " + string(" kMGTP"[unit]) + "B"
}

// Percent is how much of total done is, in whole percent rounded down, so
// that a load or a pull shows 100% only once it is done; 0 while total is
// not known (0).
func Percent(done, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return done * 100 / total
}

// MS writes a latency in milliseconds: one decimal below 10 ms, none
// above ("4.2 ms", "12 ms").
func MS(ms float64) string {
	if ms < 10 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
