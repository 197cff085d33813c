package human

import (
	"strconv"
	"strings"
	"testing"
)

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.00 kB", 1076: "1.08 kB", 264_703: "265 kB",
		23_149_000: "23.1 MB", 812_000_000: "812 MB", 999_600_000: "1.00 GB", 1_750_000_000: "1.75 GB", 64 << 20: "67.1 MB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMB checks the unit's threshold and that the printed figure reads
// back as the count to within half the last decimal.
func TestMB(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0.0 MB"},
		{3_200_000, "3.2 MB"},
		{536_870_912, "536.9 MB"},
		{999_999_999, "1000.0 MB"},
		{1_000_000_000, "1.0 GB"},
		{1 << 30, "1.1 GB"},
	} {
		got := MB(c.n)
		if got != c.want {
			t.Errorf("MB(%d) = %q, want %q", c.n, got, c.want)
		}
		num, unit, _ := strings.Cut(got, " ")
		v, err := strconv.ParseFloat(num, 64)
		scale := map[string]float64{"MB": 1e6, "GB": 1e9}[unit]
		if err != nil || scale == 0 || abs(v*scale-float64(c.n)) > 0.05*scale {
			t.Errorf("MB(%d) = %q reads as another count", c.n, got)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
