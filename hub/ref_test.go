package hub

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	cases := []struct {
		in, repo, rev, err string
	}{
		{"Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-0.8B", "main", ""},
		{"mlx-community/Qwen3.5-0.8B-4bit@v1.0", "mlx-community/Qwen3.5-0.8B-4bit", "v1.0", ""},
		{"o/n@refs/pr/1", "o/n", "refs/pr/1", ""},
		{"gpt2", "gpt2", "main", ""},
		{"o/n@", "", "", "empty revision"},
		{"", "", "", "empty"},
		{"a/b/c", "", "", "more than one '/'"},
		{"o/n--x", "", "", `"--"`},
		{"o/a..n", "", "", `".."`},
		{"o/n.git", "", "", ".git"},
		{"o/-n", "", "", "starts or ends"},
		{"o/n x", "", "", "' ' is not allowed"},
		{"https://huggingface.co/o/n", "", "", "a URL"},
		{"o/" + strings.Repeat("n", 97), "", "", "longer than 96"},
		{"o/n@a b", "", "", "space"},
	}
	for _, c := range cases {
		r, err := ParseRef(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRef(%q) = %v, %v; want an error saying %q", c.in, r, err, c.err)
			}
			continue
		}
		if err != nil || r.Repo != c.repo || r.Revision != c.rev {
			t.Errorf("ParseRef(%q) = %+v, %v; want %s@%s", c.in, r, err, c.repo, c.rev)
		}
		if back, err := ParseRef(r.String()); err != nil || back != r {
			t.Errorf("ParseRef(%q.String()) = %+v, %v", c.in, back, err)
		}
	}
	if n := (Ref{Repo: "Qwen/Qwen3.5-0.8B"}).DefaultName(); n != "Qwen3.5-0.8B" {
		t.Errorf("DefaultName = %q", n)
	}
	if n := (Ref{Repo: "gpt2"}).DefaultName(); n != "gpt2" {
		t.Errorf("DefaultName = %q", n)
	}
}

func TestCheckName(t *testing.T) {
	cases := []struct {
		name, err string
	}{
		{"Qwen3.5-0.8B", ""},
		{"my model", ""},
		{"", "empty"},
		{"a/b", "separator"},
		{`a\b`, "separator"},
		{".hidden", "starts with '.'"},
		{"..", "starts with '.'"},
		{"a\nb", "control"},
		{strings.Repeat("x", 256), "255"},
		{"demo", `"demo" is the embedded demo model's name`},
		{"demo2", ""},
	}
	for _, c := range cases {
		err := CheckName(c.name)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("CheckName(%q) = %v, want %q", c.name, err, c.err)
		}
	}
}

// TestRefDir names the pull's directory from the repository or the name
// given, and refuses the names CheckName refuses.
func TestRefDir(t *testing.T) {
	folder := filepath.Join("models", "folder")
	for _, c := range []struct {
		ref        Ref
		name, want string
		err        error
	}{
		{Ref{Repo: "Qwen/Qwen3.5-0.8B", Revision: "main"}, "", filepath.Join(folder, "Qwen3.5-0.8B"), nil},
		{Ref{Repo: "gpt2", Revision: "main"}, "", filepath.Join(folder, "gpt2"), nil},
		{Ref{Repo: "owner/x", Revision: "main"}, "mine", filepath.Join(folder, "mine"), nil},
		{Ref{Repo: "owner/demo", Revision: "main"}, "", "", ErrDemoName},
		{Ref{Repo: "owner/x", Revision: "main"}, "demo", "", ErrDemoName},
		{Ref{Repo: "owner/x", Revision: "main"}, "../x", "", nil},
	} {
		got, err := c.ref.Dir(folder, c.name)
		bad := c.want == ""
		if got != c.want || bad != (err != nil) || c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("%v.Dir(%q) = %q, %v; want %q (error %v)", c.ref, c.name, got, err, c.want, c.err)
		}
	}
}
