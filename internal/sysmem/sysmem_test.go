package sysmem

import "testing"

func TestTotal(t *testing.T) {
	if n, ok := Total(); !ok || n < 64<<20 || n > 1<<50 {
		t.Errorf("Total() = %d, %v: not a machine's memory", n, ok)
	}
}
