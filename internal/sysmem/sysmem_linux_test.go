package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n, ok := memTotal(write("meminfo", "MemFree:  10 kB\nMemTotal:       24576000 kB\n")); !ok || n != 24576000<<10 {
		t.Errorf("memTotal = %d, %v", n, ok)
	}
	if _, ok := memTotal(write("bad", "MemTotal: lots\n")); ok {
		t.Error("a bad MemTotal was read")
	}
	mi := write("meminfo2", "MemTotal:       24576000 kB\nMemFree:  1000 kB\nMemAvailable:    6200000 kB\n")
	if n, ok := memField(mi, "MemAvailable:"); !ok || n != 6200000<<10 {
		t.Errorf("MemAvailable = %d, %v", n, ok)
	}
	cg := [][2]string{{write("max", "4294967296\n"), write("current", "3221225472\n")}}
	if n, ok := availableIn(mi, cg); !ok || n != 1<<30 {
		t.Errorf("available under a cgroup limit = %d, %v; want 1 GiB", n, ok)
	}
	if n, ok := availableIn(mi, [][2]string{{write("nomax", "max\n"), write("current", "3221225472\n")}}); !ok || n != 6200000<<10 {
		t.Errorf("available without a cgroup limit = %d, %v; want MemAvailable", n, ok)
	}
	if n, ok := statmResident(write("statm", "765 419 390 5 0 123 0\n"), 4096); !ok || n != 419*4096 {
		t.Errorf("statm resident = %d, %v", n, ok)
	}
	if _, ok := statmResident(write("statm2", "765\n"), 4096); ok {
		t.Error("a statm without a resident field was read")
	}
	for _, c := range []struct {
		s  string
		n  int64
		ok bool
	}{{"max\n", 0, false}, {"12884901888\n", 12884901888, true}, {"9223372036854771712\n", 0, false}} {
		if n, ok := cgroupLimit(write("limit", c.s)); n != c.n || ok != c.ok {
			t.Errorf("cgroupLimit(%q) = %d, %v; want %d, %v", c.s, n, ok, c.n, c.ok)
		}
	}
}
