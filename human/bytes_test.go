package human

import (
	"fmt"
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

func TestBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{10*1024 - 1, "10 KiB"}, // 9.999 KiB rounds up past one decimal
		{10 * 1024, "10 KiB"},
		{512 << 20, "512 MiB"},
		{1023*1024*1024 + 1023*1024, "1.0 GiB"}, // 1023.999 MiB
		{3 << 30, "3.0 GiB"},
		{-2048, "-2.0 KiB"},
	}
	for _, tt := range tests {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestBytesMatchesValue checks, over many sizes, that the printed
// number times its unit is within rounding of the byte count.
func TestBytesMatchesValue(t *testing.T) {
	units := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
	for n := int64(1); n < 1<<42; n = n*7/3 + 1 {
		s := Bytes(n)
		var v float64
		var unit string
		if _, err := fmt.Sscanf(s, "%g %s", &v, &unit); err != nil {
			t.Fatalf("Bytes(%d) = %q: %v", n, s, err)
		}
		got := v * units[unit]
		step := units[unit] // integer display
		if strings.Contains(s, ".") {
			step /= 10
		}
		if d := got - float64(n); d > step/2+0.5 || d < -step/2-0.5 {
			t.Errorf("Bytes(%d) = %q reads as %.0f", n, s, got)
		}
	}
}

// TestPercent: whole percent rounded down, 100 only when done, 0 without
// a total.
func TestPercent(t *testing.T) {
	for _, c := range []struct{ done, total, want int64 }{
		{0, 0, 0}, {5, 0, 0}, {0, 4, 0}, {1, 4, 25}, {3, 4, 75}, {995, 1000, 99}, {1000, 1000, 100},
		{3 << 40, 4 << 40, 75},
	} {
		if got := Percent(c.done, c.total); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.done, c.total, got, c.want)
		}
	}
}

func TestMS(t *testing.T) {
	for ms, want := range map[float64]string{0: "0.0 ms", 4.25: "4.2 ms", 9.94: "9.9 ms", 10: "10 ms", 12.4: "12 ms", 30: "30 ms"} {
		if got := MS(ms); got != want {
			t.Errorf("MS(%v) = %q, want %q", ms, got, want)
		}
	}
}
