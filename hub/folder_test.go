package hub_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/hub/hubtest"
)

// TestInstall runs Install onto each state a models folder's directory can
// be in, and checks what it fetched, what it returned and how its error
// classifies.
func TestInstall(t *testing.T) {
	x := repoOf(t, "owner/x", "tiny-qwen35")
	other := repoOf(t, "owner/other", "demo-decision")
	s := hubtest.NewServer(t, x, other)
	c := newClient(t, s, hub.Options{Retries: -1})
	ctx := context.Background()
	plan, err := c.Resolve(ctx, mustRef(t, "owner/x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// prepare makes the state of dest before Install.
		prepare func(t *testing.T, dest string)
		// opts are the download's options.
		opts    hub.PullOptions
		fetched bool
		// exists is the *ExistsError's message ("" for none), resumable
		// whether the error matches ErrResumable.
		exists    string
		resumable bool
		noSpace   bool
	}{
		{name: "new", prepare: func(*testing.T, string) {}, fetched: true},
		{name: "already pulled", prepare: func(t *testing.T, dest string) {
			if _, err := c.Pull(ctx, mustRef(t, "owner/x"), dest, hub.PullOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another repository", prepare: func(t *testing.T, dest string) {
			if _, err := c.Pull(ctx, mustRef(t, "owner/other"), dest, hub.PullOptions{}); err != nil {
				t.Fatal(err)
			}
		}, exists: "m already exists in FOLDER (owner/other at commit " + other.Commit[:12] + ")"},
		{name: "not pulled", prepare: func(t *testing.T, dest string) {
			if err := os.Mkdir(dest, 0o755); err != nil {
				t.Fatal(err)
			}
		}, exists: "m already exists in FOLDER (a model that was not pulled)"},
		{name: "cut", prepare: func(*testing.T, string) { s.CutAfter("model.safetensors", 1000) }, resumable: true},
		{name: "no space", prepare: func(*testing.T, string) {},
			opts: hub.PullOptions{FreeSpace: func(string) (int64, error) { return 0, nil }}, noSpace: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			folder := t.TempDir()
			dest := filepath.Join(folder, "m")
			tc.prepare(t, dest)
			src, fetched, err := c.Install(ctx, plan, dest, tc.opts)
			var exists *hub.ExistsError
			switch {
			case tc.exists != "":
				want := strings.Replace(tc.exists, "FOLDER", folder, 1)
				if !errors.As(err, &exists) || !errors.Is(err, hub.ErrExists) || err.Error() != want {
					t.Errorf("error %v, want an ExistsError %q", err, want)
				}
			case tc.resumable || tc.noSpace:
				if err == nil || errors.Is(err, hub.ErrResumable) != tc.resumable || errors.Is(err, hub.ErrNoSpace) != tc.noSpace {
					t.Errorf("error %v: resumable %v, no space %v wanted", err, tc.resumable, tc.noSpace)
				}
				if tc.resumable && !strings.Contains(err.Error(), "model.safetensors") {
					t.Errorf("error %q does not name the file", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if fetched != tc.fetched || src.Repo != "owner/x" || src.Commit != x.Commit {
					t.Errorf("Install = %+v, fetched %v; want owner/x at %s, fetched %v", src, fetched, x.Commit, tc.fetched)
				}
				if on, err := hub.ReadSource(dest); err != nil || on.Commit != x.Commit || on.Bytes() != src.Bytes() {
					t.Errorf("the record in %s: %+v, %v", dest, on, err)
				}
			}
			if err != nil && tc.exists == "" {
				if _, serr := os.Stat(dest); serr == nil {
					t.Errorf("%s exists after a failed install", dest)
				}
			}
		})
	}
}

// TestRemove removes each kind of thing a models folder's entry can be and
// checks what the Removal says against what was on disk.
func TestRemove(t *testing.T) {
	x := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, x)
	c := newClient(t, s, hub.Options{Retries: -1})
	ctx := context.Background()
	pull := func(t *testing.T, dest string) {
		if _, err := c.Pull(ctx, mustRef(t, "owner/x"), dest, hub.PullOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cut := func(t *testing.T, dest string) {
		s.CutAfter("model.safetensors", 1000)
		if _, err := c.Pull(ctx, mustRef(t, "owner/x"), dest, hub.PullOptions{}); err == nil {
			t.Fatal("the cut pull succeeded")
		}
	}
	write := func(t *testing.T, name, data string) {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	busy := errors.New("in use")
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dest string)
		// arg is the name given to Remove ("m" when ""), inUse whether
		// the model is in use.
		arg   string
		inUse bool
		// model, link, pulled, partial: what the Removal should say;
		// err: what its error should say ("" for none).
		model, link, pulled, partial bool
		err                          string
	}{
		{name: "nothing", prepare: func(*testing.T, string) {}, err: `no model "m" in FOLDER ("startlux models" lists them)`},
		{name: "demo", prepare: func(*testing.T, string) {}, arg: "demo", err: "embedded demo model: it is part of the binary"},
		{name: "path", prepare: func(*testing.T, string) {}, arg: "../m", err: `"../m" is a path: rm takes the name of a model in FOLDER`},
		{name: "hidden", prepare: func(*testing.T, string) {}, arg: ".m", err: "starts with '.'"},
		{name: "in use", prepare: pull, inUse: true, err: "in use"},
		{name: "pulled", prepare: pull, model: true, pulled: true},
		{name: "not pulled", prepare: func(t *testing.T, dest string) {
			write(t, filepath.Join(dest, "config.json"), "{}")
		}, model: true},
		{name: "link", prepare: func(t *testing.T, dest string) {
			target := t.TempDir()
			write(t, filepath.Join(target, "config.json"), "{}")
			if err := os.Symlink(target, dest); err != nil {
				t.Fatal(err)
			}
		}, model: true, link: true},
		{name: "interrupted", prepare: cut, partial: true},
		{name: "pulled and interrupted", prepare: func(t *testing.T, dest string) {
			cut(t, dest)
			pull(t, filepath.Join(filepath.Dir(dest), "full"))
			if err := os.Rename(filepath.Join(filepath.Dir(dest), "full"), dest); err != nil {
				t.Fatal(err)
			}
		}, model: true, pulled: true, partial: true},
		{name: "no model", prepare: func(t *testing.T, dest string) {
			write(t, filepath.Join(dest, "notes.txt"), "mine")
		}, err: "does not look like a model"},
		{name: "a file", prepare: func(t *testing.T, dest string) { write(t, dest, "{}") }, err: "does not look like a model"},
		{name: "not a pull", prepare: func(t *testing.T, dest string) {
			write(t, filepath.Join(hub.PartialDir(dest), "x"), "mine")
		}, err: "is not a pull in progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "m")
			tc.prepare(t, dest)
			var size, partial int64
			var target string
			before := map[string]bool{}
			for _, p := range []string{dest, hub.PartialDir(dest)} {
				_, err := os.Lstat(p)
				before[p] = err == nil
			}
			if fi, err := os.Lstat(dest); err == nil && fi.IsDir() {
				size = hub.TreeSize(os.DirFS(dest))
			}
			if _, err := os.Stat(hub.PartialDir(dest)); err == nil {
				partial = hub.TreeSize(os.DirFS(hub.PartialDir(dest)))
			}
			if tc.link {
				target, _ = os.Readlink(dest)
			}
			arg := tc.arg
			if arg == "" {
				arg = "m"
			}
			var asked string
			r, err := hub.Remove(filepath.Dir(dest), arg, func(dir string) error {
				if asked = dir; tc.inUse {
					return busy
				}
				return nil
			})
			if exists := before[dest]; (asked == dest) != exists || asked != "" && !exists {
				t.Errorf("inUse asked of %q, with %s there: %v", asked, dest, exists)
			}
			if tc.err != "" {
				if want := strings.Replace(tc.err, "FOLDER", filepath.Dir(dest), 1); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one saying %q", err, want)
				}
				for p, was := range before {
					if _, serr := os.Lstat(p); was && serr != nil {
						t.Errorf("%s was removed despite the error", p)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != tc.model || r.Link != tc.link || (r.Source != nil) != tc.pulled || r.Partial != tc.partial {
				t.Errorf("Removal %+v; want model %v, link %v, pulled %v, partial %v", r, tc.model, tc.link, tc.pulled, tc.partial)
			}
			if r.Target != target || (!tc.link && r.Bytes != size) || r.PartialBytes != partial {
				t.Errorf("Removal %+v; want target %q, %d bytes, %d partial", r, target, size, partial)
			}
			if tc.pulled && r.Source.Commit != x.Commit {
				t.Errorf("record of commit %s, want %s", r.Source.Commit, x.Commit)
			}
			for _, p := range []string{dest, hub.PartialDir(dest)} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s is still there", p)
				}
			}
			if tc.link {
				if _, err := os.Stat(filepath.Join(target, "config.json")); err != nil {
					t.Errorf("the link's target lost its files: %v", err)
				}
			}
		})
	}
}
