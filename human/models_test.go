package human

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
)

// TestModels writes a listing with one model of each kind and reads
// the table back by columns (at least two spaces apart).
func TestModels(t *testing.T) {
	commit := strings.Repeat("ab", 20)
	list := []api.ModelEntry{
		{Name: api.DemoName, Embedded: true, Bytes: 1_500_000, Quant: "bf16", Calibrated: true, Current: true},
		{Name: "pulled", Path: "/m/pulled", Source: "owner/x", Revision: "main", Commit: commit, Bytes: 2_020_000, Quant: "bf16"},
		{Name: "pinned", Path: "/m/pinned", Source: "owner/y", Revision: commit, Commit: commit, Quant: "MLX 4-bit (group 64)", Calibrated: true},
		{Name: "local", Path: "/m/local", Bytes: 999, Calibrated: true},
		{Name: "broken", Path: "/m/broken", Unloadable: "not a checkpoint", Calibrated: true},
	}
	want := [][]string{
		{"NAME", "SOURCE", "REVISION", "SIZE", "WEIGHTS", "STATUS"},
		{"* demo", "(embedded in the binary)", "-", "1.50 MB", "bf16", "calibrated"},
		{"pulled", "owner/x", "main (" + commit[:12] + ")", "2.02 MB", "bf16", api.UncalibratedNote},
		{"pinned", "owner/y", commit, "-", "MLX 4-bit (group 64)", "calibrated"},
		{"local", "/m/local", "-", "999 B", "-", "calibrated"},
		{"broken", "/m/broken", "-", "-", "-", "not a checkpoint"},
	}
	var b strings.Builder
	if err := Models(&b, list); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	cols := regexp.MustCompile(`\s{2,}`)
	for i, line := range lines {
		if got := cols.Split(strings.TrimSpace(line), -1); !slices.Equal(got, want[i]) {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
}

// TestCommit abbreviates long commit ids and leaves short ones.
func TestCommit(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{strings.Repeat("0123456789", 4), "012345678901"},
		{"0123456789ab", "0123456789ab"},
		{"abc", "abc"},
		{"", ""},
	} {
		if got := Commit(c.in); got != c.want {
			t.Errorf("Commit(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
