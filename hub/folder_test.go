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
