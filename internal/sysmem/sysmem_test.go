package sysmem

import (
	"runtime"
	"testing"
)

func TestTotal(t *testing.T) {
	if n, ok := Total(); !ok || n < 64<<20 || n > 1<<50 {
		t.Errorf("Total() = %d, %v: not a machine's memory", n, ok)
	}
}

// TestAvailable checks that what is available is some of what there is.
func TestAvailable(t *testing.T) {
	total, _ := Total()
	if n, ok := Available(); !ok || n <= 0 || n > total {
		t.Errorf("Available() = %d, %v; Total() = %d", n, ok, total)
	}
}

// TestResident checks that the process's resident memory grows by about
// what it touches: 64 MiB written page by page.
func TestResident(t *testing.T) {
	before, ok := Resident()
	if !ok || before <= 0 {
		t.Fatalf("Resident() = %d, %v", before, ok)
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, _ := Resident()
	runtime.KeepAlive(buf)
	if grew := after - before; grew < 48<<20 || grew > 256<<20 {
		t.Errorf("resident memory grew by %d MiB after touching 64 MiB (%d MiB before)", grew>>20, before>>20)
	}
}
