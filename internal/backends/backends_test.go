package backends

import (
	"runtime"
	"strings"
	"testing"
)

func TestAuto(t *testing.T) {
	be, c, err := Auto(1)
	if err != nil {
		t.Fatal(err)
	}
	if be.Name() != c.Name || c.Why == "" {
		t.Errorf("backend %q, choice %+v", be.Name(), c)
	}
	if runtime.GOOS != "darwin" {
		if !strings.HasPrefix(c.Name, "cpu") || !strings.Contains(c.Why, "no Metal: not macOS") {
			t.Errorf("off macOS auto picked %+v", c)
		}
	}
}

func TestOpen(t *testing.T) {
	for _, name := range []string{"auto", "cpu", "cpu-go"} {
		be, err := Open(name, 1)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if name == "cpu-go" && be.Name() != "cpu-go" {
			t.Errorf("cpu-go opened %q", be.Name())
		}
	}
	if runtime.GOOS != "darwin" || runtime.GOARCH != "arm64" {
		if _, err := Open("metal", 0); err == nil || !strings.Contains(err.Error(), "no Metal") {
			t.Errorf("metal off Apple Silicon: %v", err)
		}
	}
	if _, err := Open("gpu", 0); err == nil || !strings.Contains(err.Error(), `unknown backend "gpu"`) {
		t.Errorf("unknown name: %v", err)
	}
}
