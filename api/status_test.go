package api

import "testing"

func TestModelsDir(t *testing.T) {
	cases := []struct{ goos, home, xdg, want string }{
		{"darwin", "/Users/a", "", "/Users/a/Library/Application Support/StartLux/Models"},
		{"linux", "/home/a", "", "/home/a/.local/share/startlux/models"},
		{"linux", "/home/a", "/data", "/data/startlux/models"},
		{"linux", "/home/a", "rel", "/home/a/.local/share/startlux/models"},
	}
	for _, c := range cases {
		if got := modelsDir(c.goos, c.home, c.xdg); got != c.want {
			t.Errorf("modelsDir(%s, %s, %s) = %s, want %s", c.goos, c.home, c.xdg, got, c.want)
		}
	}
}

func TestInt8Summary(t *testing.T) {
	for _, tc := range []struct {
		m    ModelStatus
		want string
	}{
		{ModelStatus{Int8: true, Int8Kernel: "avx2"}, "on (avx2)"},
		{ModelStatus{}, "off"},
		{ModelStatus{Int8Unavailable: "backend metal has no int8 matrix products"}, "unavailable — backend metal has no int8 matrix products"},
	} {
		if got := tc.m.Int8Summary(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.m, got, tc.want)
		}
	}
}
