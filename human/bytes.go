package human

import (
	"fmt"
	"strconv"
)

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
