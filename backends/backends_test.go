package backends

import (
	"runtime"
	"strings"
	"testing"
)

// TestAuto checks that auto opens what its Choice names, with a reason.
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

// TestOpen opens each backend by name that this machine can run and checks
// what it got, and that the others are refused with their cause.
func TestOpen(t *testing.T) {
	onMac := runtime.GOOS == "darwin" && runtime.GOARCH == "arm64"
	type openCase struct {
		name, want string // want: the backend's name prefix, or the error's text
		ok         bool
	}
	tests := []openCase{
		{"cpu", "cpu", true},
		{"cpu-go", "cpu-go", true},
		{"nope", `unknown backend "nope" (want auto, cpu, cpu-go, metal or metal-emu)`, false},
	}
	if !onMac {
		tests = append(tests, openCase{"auto", "cpu", true}, openCase{"metal", "backend metal: ", false})
	}
	for _, tc := range tests {
		be, err := Open(tc.name, 2)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.ok && !strings.HasPrefix(be.Name(), tc.want):
			t.Errorf("%s: opened %s, want %s", tc.name, be.Name(), tc.want)
		case tc.ok:
			if th, ok := be.(interface{ Threads() int }); !ok || th.Threads() != 2 {
				t.Errorf("%s: not the 2 threads asked for", tc.name)
			}
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// TestPlanFor: only auto on Apple Silicon has a fallback (the CPU backend);
// every plan opens the backend its name says; an unknown name is refused.
func TestPlanFor(t *testing.T) {
	onMac := runtime.GOOS == "darwin" && runtime.GOARCH == "arm64"
	for _, name := range []string{"auto", "cpu", "cpu-go", "metal", "metal-emu"} {
		p, err := PlanFor(name, 1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if hasFallback := p.Fallback != nil; hasFallback != (name == "auto" && onMac) {
			t.Errorf("%s: fallback %v", name, hasFallback)
		}
		if name == "cpu" || name == "cpu-go" || name == "auto" && !onMac {
			be, err := p.Open()
			if err != nil || !strings.HasPrefix(be.Name(), "cpu") {
				t.Errorf("%s: opened %v", name, err)
			}
		}
		if p.Fallback != nil {
			if be, err := p.Fallback(); err != nil || !strings.HasPrefix(be.Name(), "cpu") {
				t.Errorf("%s: fallback %v, %v", name, be, err)
			}
		}
	}
	if _, err := PlanFor("gpu", 1); err == nil || !strings.Contains(err.Error(), `unknown backend "gpu"`) {
		t.Errorf("an unknown name: %v", err)
	}
	if !onMac {
		if _, err := (mustPlan(t, "metal")).Open(); err == nil || !strings.Contains(err.Error(), "backend metal: ") {
			t.Errorf("metal off a Mac: %v", err)
		}
	}
}

func mustPlan(t *testing.T, name string) Plan {
	t.Helper()
	p, err := PlanFor(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
