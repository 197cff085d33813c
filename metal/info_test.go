package metal

import (
	"slices"
	"testing"
)

func TestFamilyNames(t *testing.T) {
	cases := []struct {
		name      string
		supported []int
		want      []string
	}{
		{"M3 on macOS 15", []int{1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 5001}, []string{"Apple9", "Metal3"}},
		{"M1 on macOS 26", []int{1001, 1002, 1003, 1004, 1005, 1006, 1007, 5001, 5002}, []string{"Apple7", "Metal3", "Metal4"}},
		{"only the Metal family", []int{5001}, []string{"Metal3"}},
		{"nothing", nil, nil},
	}
	for _, c := range cases {
		got := familyNames(func(v int) bool { return slices.Contains(c.supported, v) })
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if fs := gpuFamilies(); fs[0] != (gpuFamily{"Apple10", 1010}) || fs[9] != (gpuFamily{"Apple1", 1001}) {
		t.Errorf("families %v: want Apple10 = 1010 first, Apple1 = 1001 tenth (MTLDevice.h)", fs[:10])
	}
}
