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
