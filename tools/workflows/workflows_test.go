package workflows

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const root = "../.."

// workflow is the part of a GitHub Actions workflow these tests read.
type workflow struct {
	Name string         `yaml:"name"`
	On   map[string]any `yaml:"on"`
	Jobs map[string]struct {
		RunsOn         string `yaml:"runs-on"`
		TimeoutMinutes int    `yaml:"timeout-minutes"`
		Steps          []struct {
			Name string            `yaml:"name"`
			If   string            `yaml:"if"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readWorkflow(t *testing.T, name string) workflow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return w
}

// buildTargets returns the targets build.sh's case statement handles.
func buildTargets(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*)\)$`).FindAllStringSubmatch(string(data), -1) {
		targets = append(targets, m[1])
	}
	if len(targets) == 0 {
		t.Fatal("no targets found in build.sh")
	}
	return targets
}

// TestWorkflowTargets checks every workflow: it parses (no unknown keys),
// each job runs somewhere and has steps, and every ./build.sh a step runs
// names a target build.sh has.
func TestWorkflowTargets(t *testing.T) {
	targets := buildTargets(t)
	files, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows: %v", err)
	}
	call := regexp.MustCompile(`\./build\.sh(?:\s+([^\s;&|]+))?`)
	for _, f := range files {
		w := readWorkflow(t, filepath.Base(f))
		if w.Name == "" || len(w.On) == 0 || len(w.Jobs) == 0 {
			t.Errorf("%s: name %q, %d triggers, %d jobs", f, w.Name, len(w.On), len(w.Jobs))
		}
		for id, j := range w.Jobs {
			if j.RunsOn == "" || len(j.Steps) == 0 {
				t.Errorf("%s job %s: runs-on %q, %d steps", f, id, j.RunsOn, len(j.Steps))
			}
			for _, s := range j.Steps {
				if (s.Run == "") == (s.Uses == "") {
					t.Errorf("%s job %s step %q: want exactly one of run and uses", f, id, s.Name)
				}
				for _, m := range call.FindAllStringSubmatch(s.Run, -1) {
					if !slices.Contains(targets, m[1]) {
						t.Errorf("%s job %s step %q runs ./build.sh %q; build.sh has %v", f, id, s.Name, m[1], targets)
					}
				}
			}
		}
	}
}

// TestMacWorkflow checks the macOS workflow: an Apple Silicon runner runs
// ./build.sh mac-test, and the report it keeps is the folder mac-test
// writes.
func TestMacWorkflow(t *testing.T) {
	w := readWorkflow(t, "macos.yml")
	script, err := os.ReadFile(filepath.Join(root, "tools", "mac-test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const defaultOut = "dist/mac-test"
	if !strings.Contains(string(script), "${MAC_TEST_OUT:-"+defaultOut+"}") {
		t.Errorf("tools/mac-test.sh no longer writes to $MAC_TEST_OUT (default %s)", defaultOut)
	}
	runs, kept := false, false
	for id, j := range w.Jobs {
		if !strings.HasPrefix(j.RunsOn, "macos-") || strings.HasPrefix(j.RunsOn, "macos-13") || strings.HasPrefix(j.RunsOn, "macos-12") {
			t.Errorf("job %s runs on %q: want an Apple Silicon macOS runner (macos-14 or later)", id, j.RunsOn)
		}
		out := defaultOut
		for _, s := range j.Steps {
			if strings.Contains(s.Run, "./build.sh mac-test") {
				runs = true
				if o := s.Env["MAC_TEST_OUT"]; o != "" {
					out = o
				}
			}
			if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
				if s.With["path"] != out || s.If != "always()" {
					t.Errorf("job %s keeps %q (if %q), want mac-test's report %q kept always", id, s.With["path"], s.If, out)
				} else {
					kept = true
				}
			}
		}
	}
	if !runs || !kept {
		t.Errorf("macos.yml: runs mac-test %v, keeps its report %v", runs, kept)
	}
}

// TestMacTestPackages: every package tools/mac-test.sh runs with -tags
// mactest holds a file built only with that tag (what puts the Mac's
// device or library under test; a package without one would run its
// emulator tests again and call that the Mac's run), and the daemon's -run
// pattern names a test that builds with the tag.
func TestMacTestPackages(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(root, "tools", "mac-test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^pkgs=\(([^)]*)\)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("tools/mac-test.sh: no pkgs=(...) list")
	}
	pkgs := strings.Fields(string(m[1]))
	if len(pkgs) == 0 {
		t.Fatal("tools/mac-test.sh: empty pkgs list")
	}
	runs := map[string]*regexp.Regexp{}
	for _, r := range regexp.MustCompile(`\[ "\$p" = (\w+) \] && run=\(-run '([^']+)'\)`).FindAllSubmatch(script, -1) {
		runs[string(r[1])] = regexp.MustCompile(string(r[2]))
	}
	macOnly := regexp.MustCompile(`^//go:build mactest\b`)
	notMac := regexp.MustCompile(`^//go:build !mactest\b`)
	testName := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(root, p, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("mac-test runs ./%s: no test files there (%v)", p, err)
			continue
		}
		hasMacOnly := false
		var names []string // the tests that build with -tags mactest
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			hasMacOnly = hasMacOnly || macOnly.Match(src)
			if notMac.Match(src) {
				continue
			}
			for _, n := range testName.FindAllSubmatch(src, -1) {
				names = append(names, string(n[1]))
			}
		}
		if !hasMacOnly {
			t.Errorf("mac-test runs ./%s, which has no mactest-only file", p)
		}
		if re := runs[p]; re != nil && !slices.ContainsFunc(names, re.MatchString) {
			t.Errorf("mac-test runs ./%s with -run %q, which matches none of the tests built with -tags mactest", p, re)
		}
	}
	if runs["daemon"] == nil {
		t.Error("mac-test.sh no longer narrows ./daemon to its Mac tests")
	}
}
