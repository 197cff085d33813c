package hub_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/startlux/startlux/human"

	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/hub/hubtest"
)

// partialAfterCut runs a pull whose weights transfer breaks off after n
// bytes, with retries off, and returns the target it failed to fill.
func partialAfterCut(t *testing.T, s *hubtest.Server, n int64) string {
	t.Helper()
	s.CutAfter("model.safetensors", n)
	c := newClient(t, s, hub.Options{Retries: -1})
	dest := filepath.Join(t.TempDir(), "m")
	if _, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{}); err == nil {
		t.Fatal("the cut pull succeeded")
	} else if !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("error %q does not name the file", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target exists after a failed pull")
	}
	part := filepath.Join(hub.PartialDir(dest), "model.safetensors.part")
	if fi, err := os.Stat(part); err != nil || fi.Size() != n {
		t.Fatalf("part after the cut: %v, %v; want %d bytes", fi, err, n)
	}
	return dest
}

// TestPullResume interrupts a transfer and resumes it in a second pull,
// which must ask for the rest with a Range request, get 206, and end with
// the right file; and a server that ignores the Range still gives the right
// file.
func TestPullResume(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		name := map[bool]string{false: "range", true: "range ignored"}[ignore]
		t.Run(name, func(t *testing.T) {
			repo := repoOf(t, "owner/x", "tiny-qwen35")
			s := hubtest.NewServer(t, repo)
			const cut = 100_000
			dest := partialAfterCut(t, s, cut)
			if ignore {
				s.IgnoreRange("model.safetensors")
			}
			before := len(s.Requests())
			var first, last hub.Progress
			c := newClient(t, s, hub.Options{Retries: -1})
			_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{Progress: func(p hub.Progress) {
				if first.Total == 0 {
					first = p
				}
				last = p
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors")); !bytes.Equal(got, repo.Files["model.safetensors"]) {
				t.Fatal("resumed file differs")
			}
			var storage []hubtest.Request
			for _, r := range s.Requests()[before:] {
				if r.Storage {
					storage = append(storage, r)
				}
				if !r.Storage && (strings.HasSuffix(r.Path, "/config.json") || strings.HasSuffix(r.Path, "/tokenizer.json")) {
					// config.json is read again to check the plan; the
					// tokenizer was complete and must not be fetched again.
					if strings.HasSuffix(r.Path, "/tokenizer.json") {
						t.Errorf("fetched the complete %s again", r.Path)
					}
				}
			}
			wantStatus := http.StatusPartialContent
			if ignore {
				wantStatus = http.StatusOK
			}
			if len(storage) != 1 || storage[0].Range != "bytes=100000-" || storage[0].Status != wantStatus {
				t.Fatalf("storage requests %+v, want one for bytes=100000- answered %d", storage, wantStatus)
			}
			smallBytes := int64(0)
			for _, n := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
				smallBytes += int64(len(repo.Files[n]))
			}
			if first.Resumed != cut+smallBytes || !last.Finished || last.Done != last.Total {
				t.Errorf("progress: first %+v last %+v; want %d bytes resumed", first, last, cut+smallBytes)
			}
		})
	}
}

// TestPullRetries breaks a transfer off twice within one pull: it must
// resume each time from where it stopped.
func TestPullRetries(t *testing.T) {
	repo := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	s.CutAfter("model.safetensors", 5000, 7000)
	s.FailNext("/api/models/owner/x/revision/main", http.StatusServiceUnavailable)
	c := newClient(t, s, hub.Options{})
	dest := filepath.Join(t.TempDir(), "m")
	if _, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors")); !bytes.Equal(got, repo.Files["model.safetensors"]) {
		t.Fatal("file differs")
	}
	var ranges []string
	for _, r := range s.Requests() {
		if r.Storage {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"", "bytes=5000-", "bytes=12000-"}; !slices.Equal(ranges, want) {
		t.Errorf("ranges asked %q, want %q", ranges, want)
	}
	// With retries off, the same faults end the pull.
	s.CutAfter("model.safetensors", 10)
	c = newClient(t, s, hub.Options{Retries: -1})
	if _, err := c.Pull(context.Background(), mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{}); err == nil {
		t.Error("a cut transfer without retries succeeded")
	}
}

// TestPullIntegrity serves wrong hashes: a file that does not match the
// Hub's sha256 is deleted and the pull fails; a Hub that contradicts itself
// is refused before the download.
func TestPullIntegrity(t *testing.T) {
	t.Run("content", func(t *testing.T) {
		s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
		s.WrongSHA256("model.safetensors")
		c := newClient(t, s, hub.Options{})
		dest := filepath.Join(t.TempDir(), "m")
		_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
		if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "model.safetensors: sha256 is") {
			t.Fatalf("error %v, want a sha256 mismatch of model.safetensors", err)
		}
		if _, err := os.Stat(filepath.Join(hub.PartialDir(dest), "model.safetensors.part")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the bad part was kept: %v", err)
		}
		if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("target exists")
		}
	})
	t.Run("contradiction", func(t *testing.T) {
		s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
		s.HeaderSHA256("model.safetensors", strings.Repeat("ab", 32))
		c := newClient(t, s, hub.Options{})
		_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
		if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "X-Linked-Etag") {
			t.Fatalf("error %v, want the two hashes named", err)
		}
		for _, r := range s.Requests() {
			if r.Storage {
				t.Errorf("downloaded %s anyway", r.Path)
			}
		}
	})
	t.Run("regular file", func(t *testing.T) {
		repo := repoOf(t, "owner/x", "tiny-qwen35")
		// tokenizer.json as a regular (non-LFS) file is checked by its
		// git blob id: serve one that differs from the listed id by
		// changing the content after the listing.
		s := hubtest.NewServer(t, repo)
		c := newClient(t, s, hub.Options{})
		p, err := c.Resolve(context.Background(), mustRef(t, "owner/x"))
		if err != nil {
			t.Fatal(err)
		}
		repo.Files["tokenizer.json"] = append([]byte(nil), repo.Files["tokenizer.json"]...)
		repo.Files["tokenizer.json"][10] ^= 1
		_, err = c.Download(context.Background(), p, filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
		if !errors.Is(err, hub.ErrIntegrity) || !strings.Contains(err.Error(), "tokenizer.json") {
			t.Fatalf("error %v, want a mismatch of tokenizer.json", err)
		}
	})
}

// TestPullRevisions pulls by branch, tag and commit, follows a renamed
// repository, and refuses an unknown revision.
func TestPullRevisions(t *testing.T) {
	repo := repoOf(t, "owner/new", "tiny-qwen35")
	repo.Revisions = []string{"main", "v1.0", "refs/pr/1"}
	s := hubtest.NewServer(t, repo)
	s.Rename("owner/old", "owner/new")
	for _, ref := range []string{"owner/new", "owner/new@v1.0", "owner/new@refs/pr/1", "owner/new@" + repo.Commit, "owner/old@main"} {
		t.Run(ref, func(t *testing.T) {
			c := newClient(t, s, hub.Options{})
			r := mustRef(t, ref)
			src, err := c.Pull(context.Background(), r, filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if src.Repo != "owner/new" || src.Revision != r.Revision || src.Commit != repo.Commit {
				t.Errorf("record %+v", src)
			}
		})
	}
	// The renamed repository's file list was asked for with its query.
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Path, "/api/models/owner/new/") && r.Query != "blobs=true" {
			t.Errorf("%s asked with query %q", r.Path, r.Query)
		}
	}
	c := newClient(t, s, hub.Options{})
	_, err := c.Pull(context.Background(), mustRef(t, "owner/new@nope"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
	if !errors.Is(err, hub.ErrNotFound) || !strings.Contains(err.Error(), "no such revision") {
		t.Errorf("unknown revision: %v", err)
	}
	_, err = c.Pull(context.Background(), mustRef(t, "owner/none"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{})
	if !errors.Is(err, hub.ErrUnauthorized) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("unknown repository: %v", err)
	}
}

// TestPullDiskSpace checks the free-space refusal against injected figures:
// the pull needs what is still to fetch plus the margin.
func TestPullDiskSpace(t *testing.T) {
	repo := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	c := newClient(t, s, hub.Options{})
	p, err := c.Resolve(context.Background(), mustRef(t, "owner/x"))
	if err != nil {
		t.Fatal(err)
	}
	need := p.Bytes() + hub.SpaceMargin
	for _, tc := range []struct {
		free int64
		ok   bool
	}{{need - 1, false}, {need, true}, {0, false}, {-1, true}} {
		dest := filepath.Join(t.TempDir(), "m")
		var asked string
		before := len(s.Requests())
		_, err := c.Download(context.Background(), p, dest, hub.PullOptions{FreeSpace: func(dir string) (int64, error) {
			asked = dir
			return tc.free, nil
		}})
		if asked != filepath.Dir(dest) {
			t.Errorf("free space asked of %q, want the models folder %q", asked, filepath.Dir(dest))
		}
		if tc.ok != (err == nil) {
			t.Errorf("free %d (need %d): error %v", tc.free, need, err)
		}
		if !tc.ok {
			if !errors.Is(err, hub.ErrNoSpace) || !strings.Contains(err.Error(), human.Size(tc.free)+" are free") {
				t.Errorf("error %v", err)
			}
			if n := len(s.Requests()); n != before {
				t.Errorf("%d requests before refusing", n-before)
			}
		}
	}
	// After an interrupted pull only the rest is needed.
	dest := partialAfterCut(t, s, 200_000)
	_, err = c.Download(context.Background(), p, dest, hub.PullOptions{FreeSpace: func(string) (int64, error) {
		return need - 200_000 - int64(len(repo.Files["config.json"])+len(repo.Files["tokenizer.json"])+len(repo.Files["tokenizer_config.json"])), nil
	}})
	if err != nil {
		t.Errorf("resuming with just enough space for the rest: %v", err)
	}
}

// TestPullTargetExists refuses to overwrite a model.
func TestPullTargetExists(t *testing.T) {
	s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
	c := newClient(t, s, hub.Options{})
	dest := filepath.Join(t.TempDir(), "m")
	os.Mkdir(dest, 0o755)
	_, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
	if !errors.Is(err, hub.ErrExists) {
		t.Errorf("error %v, want ErrExists", err)
	}
}

// TestPullLeftoversOfAnotherCommit discards what an interrupted pull of an
// older commit left.
func TestPullLeftoversOfAnotherCommit(t *testing.T) {
	repo := repoOf(t, "owner/x", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	dest := partialAfterCut(t, s, 1000)
	repo.Commit = strings.Repeat("c", 40)
	repo.Files["model.safetensors"] = append(bytes.Repeat([]byte{7}, 1000), repo.Files["model.safetensors"][1000:]...)
	c := newClient(t, s, hub.Options{})
	src, err := c.Pull(context.Background(), mustRef(t, "owner/x"), dest, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors")); !bytes.Equal(got, repo.Files["model.safetensors"]) || src.Commit != repo.Commit {
		t.Error("the new commit's file was not fetched whole")
	}
}

// TestPullCancel stops a pull through its context.
func TestPullCancel(t *testing.T) {
	s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
	c := newClient(t, s, hub.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	_, err := c.Pull(ctx, mustRef(t, "owner/x"), filepath.Join(t.TempDir(), "m"), hub.PullOptions{Progress: func(p hub.Progress) {
		if p.File == "model.safetensors" {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestRemovePartial deletes an interrupted pull's files, and only those.
func TestRemovePartial(t *testing.T) {
	s := hubtest.NewServer(t, repoOf(t, "owner/x", "tiny-qwen35"))
	dest := partialAfterCut(t, s, 1234)
	n, err := hub.RemovePartial(dest)
	if err != nil || n < 1234 {
		t.Errorf("RemovePartial = %d, %v", n, err)
	}
	if _, err := os.Stat(hub.PartialDir(dest)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("partial directory still there: %v", err)
	}
	if n, err := hub.RemovePartial(dest); n != 0 || err != nil {
		t.Errorf("again: %d, %v", n, err)
	}
	other := filepath.Join(t.TempDir(), "y")
	os.Mkdir(hub.PartialDir(other), 0o755)
	if _, err := hub.RemovePartial(other); err == nil {
		t.Error("removed a directory that is not a pull's")
	}
}
