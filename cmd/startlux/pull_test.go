package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/hub/hubtest"
	"github.com/startlux/startlux/human"
)

// runCmdErr runs a subcommand and returns its stdout and stderr.
func runCmdErr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	err := run(context.Background(), env, args)
	return out.String(), errOut.String(), err
}

// pullEnv points the models folder, the socket directory and the Hub at
// test places and returns the models folder.
func pullEnv(t *testing.T, s *hubtest.Server, token string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(home, "run")) // no daemon there
	t.Setenv("HF_ENDPOINT", s.Hub.URL)
	t.Setenv("HF_TOKEN", token)
	dir, err := api.ModelsDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func testRepo(t *testing.T, id, dir string) *hubtest.Repo {
	return hubtest.Dir(t, id, filepath.Join("..", "..", "testdata", dir))
}

// TestPullModelsRm pulls two checkpoints with the command, lists them and
// removes them, checking what each command says.
func TestPullModelsRm(t *testing.T) {
	const token = "hf_clitokenclitoken"
	chat := testRepo(t, "owner/tiny-qwen35", "tiny-qwen35")
	demo := testRepo(t, "owner/demo", "demo-decision")
	chat.Token, demo.Token = token, token
	moe := testRepo(t, "owner/moe", "tiny-qwen35-moe")
	s := hubtest.NewServer(t, chat, demo, moe)
	models := pullEnv(t, s, token)

	out, errOut, err := runCmdErr(t, "pull", "owner/tiny-qwen35")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	dest := filepath.Join(models, "tiny-qwen35")
	if want := "pulled owner/tiny-qwen35 at commit " + chat.Commit[:12] + " into " + dest; !strings.Contains(out, want) {
		t.Errorf("stdout %q, want %q", out, want)
	}
	for _, w := range []string{"resolving owner/tiny-qwen35@main on " + s.Hub.URL, "4 files", "model: 6 layers, hidden size 64",
		"model.safetensors: 1.75 MB, done (4 of 4 files)", "runs zero-shot", api.UncalibratedNote} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr does not say %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(out+errOut, token) {
		t.Error("the token was printed")
	}
	if out, _, err := runCmdErr(t, "pull", "owner/tiny-qwen35"); err != nil || !strings.Contains(out, "already pulled") {
		t.Errorf("second pull: %q, %v", out, err)
	}
	// Flags after the repository; a calibrated checkpoint.
	if _, errOut, err := runCmdErr(t, "pull", "owner/demo@main", "--name", "mine"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	} else if strings.Contains(errOut, "uncalibrated") {
		t.Errorf("a calibrated checkpoint called uncalibrated:\n%s", errOut)
	} else if !strings.Contains(errOut, "memory: loading it needs ") {
		t.Errorf("the pull of a calibrated checkpoint does not say what it needs:\n%s", errOut)
	}
	_, _, err = runCmdErr(t, "pull", "owner/demo", "--name", "tiny-qwen35")
	if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "startlux rm tiny-qwen35") {
		t.Errorf("pull onto another model: %v", err)
	}
	_, _, err = runCmdErr(t, "pull", "owner/moe")
	if err == nil || !strings.Contains(err.Error(), "mixture-of-experts") {
		t.Errorf("pull of a MoE checkpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(models, "moe")); err == nil {
		t.Error("the refused checkpoint has a directory")
	}
	for _, bad := range [][]string{{"pull"}, {"pull", "a/b/c"}, {"pull", "owner/demo", "--name", "demo"}, {"pull", "owner/demo", "--name", "../x"}} {
		if _, _, err := runCmdErr(t, bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}

	// The listing, as a table and as JSON.
	out, _, err = runCmdErr(t, "models")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	mineSize := human.Size(dirBytes(t, filepath.Join(models, "mine")))
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "  NAME") {
		t.Fatalf("models:\n%s", out)
	}
	for i, want := range [][]string{
		{"demo", "(embedded in the binary)", "bf16", "calibrated"},
		{"mine", "owner/demo", "main (" + demo.Commit[:12] + ")", mineSize, "bf16", "calibrated"},
		{"tiny-qwen35", "owner/tiny-qwen35", "main (" + chat.Commit[:12] + ")", "2.02 MB", "bf16", api.UncalibratedNote},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("models line %q does not say %q", lines[i+1], w)
			}
		}
	}
	out, _, err = runCmdErr(t, "models", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []api.ModelEntry
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 3 {
		t.Fatalf("models --json: %v\n%s", err, out)
	}
	src, err := hub.ReadSource(dest)
	if err != nil {
		t.Fatal(err)
	}
	if m := list[2]; m.Source != "owner/tiny-qwen35" || m.Commit != chat.Commit || m.Bytes != src.Bytes() || m.Calibrated || m.Unloadable != "" {
		t.Errorf("models --json entry %+v", m)
	}

	// rm: refusals first.
	for _, tc := range []struct {
		name, want string
	}{
		{"demo", "embedded demo model"},
		{"../tiny-qwen35", "is a path"},
		{dest, "is a path"},
		{"..", "starts with '.'"},
		{"nothing", `no model "nothing"`},
	} {
		if _, _, err := runCmdErr(t, "rm", tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rm %s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	os.Mkdir(filepath.Join(models, "notes"), 0o755)
	if _, _, err := runCmdErr(t, "rm", "notes"); err == nil || !strings.Contains(err.Error(), "does not look like a model") {
		t.Errorf("rm of a directory that is not a model: %v", err)
	}
	target := t.TempDir()
	os.WriteFile(filepath.Join(target, "config.json"), []byte("{}"), 0o644)
	os.Symlink(target, filepath.Join(models, "linked"))
	if out, _, err := runCmdErr(t, "rm", "linked"); err != nil || !strings.Contains(out, "a link to "+target+", which was left alone") {
		t.Errorf("rm of a link: %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(target, "config.json")); err != nil {
		t.Errorf("rm of a link removed its target's files: %v", err)
	}
	out, _, err = runCmdErr(t, "rm", "tiny-qwen35")
	if want := "removed tiny-qwen35 from " + models + " (owner/tiny-qwen35 at commit " + chat.Commit[:12] + ", 2.02 MB)"; err != nil || !strings.Contains(out, want) {
		t.Errorf("rm: %q, %v; want %q", out, err, want)
	}
	if _, err := os.Stat(dest); err == nil {
		t.Error("still there after rm")
	}
}

// TestPullResumeAndRm interrupts a pull (through the package, with
// retries off), then resumes it with the command; and removes an
// interrupted pull with rm.
func TestPullResumeAndRm(t *testing.T) {
	repo := testRepo(t, "owner/tiny", "tiny-qwen35")
	s := hubtest.NewServer(t, repo)
	models := pullEnv(t, s, "")
	interrupt := func(name string) {
		t.Helper()
		s.CutAfter("model.safetensors", 300_000)
		c, err := hub.NewClient(hub.Options{Endpoint: s.Hub.URL, Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Pull(context.Background(), hub.Ref{Repo: "owner/tiny", Revision: "main"}, filepath.Join(models, name), hub.PullOptions{}); err == nil {
			t.Fatal("the cut pull succeeded")
		}
	}
	interrupt("tiny")
	out, errOut, err := runCmdErr(t, "pull", "owner/tiny")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "resuming: ") || !strings.Contains(out, "pulled owner/tiny") {
		t.Errorf("resumed pull said:\n%s%s", out, errOut)
	}
	got, _ := os.ReadFile(filepath.Join(models, "tiny", "model.safetensors"))
	if !bytes.Equal(got, repo.Files["model.safetensors"]) {
		t.Error("resumed file differs")
	}

	interrupt("half")
	out, _, err = runCmdErr(t, "rm", "half")
	if err != nil || !strings.Contains(out, "removed an interrupted pull of half") {
		t.Errorf("rm of an interrupted pull: %q, %v", out, err)
	}
	if _, err := os.Stat(hub.PartialDir(filepath.Join(models, "half"))); err == nil {
		t.Error("the interrupted pull's files are still there")
	}
}

// TestRmServed refuses to delete the model the daemon serves.
func TestRmServed(t *testing.T) {
	s := hubtest.NewServer(t, testRepo(t, "owner/demo", "demo-decision"))
	models := pullEnv(t, s, "")
	// "demo" is the embedded model's name: a pull needs another.
	if _, _, err := runCmdErr(t, "pull", "owner/demo"); err == nil || !strings.Contains(err.Error(), "embedded demo model's name") {
		t.Errorf("pull under the name demo: %v", err)
	}
	if _, errOut, err := runCmdErr(t, "pull", "owner/demo", "--name", "served"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	sock, _ := startServe(t, "--model", filepath.Join(models, "served"), "--backend", "cpu-go")
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, _ := runCmdErr(t, "status", "--json", "--socket", sock)
		if strings.Contains(out, `"ready"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, err := runCmdErr(t, "rm", "served", "--socket", sock)
	if err == nil || !strings.Contains(err.Error(), "the daemon is serving served") {
		t.Errorf("rm of the served model: %v", err)
	}
	if _, err := os.Stat(filepath.Join(models, "served", "config.json")); err != nil {
		t.Errorf("the served model was touched: %v", err)
	}
}

// dirBytes adds up the sizes of the regular files under dir, the figure the
// listing shows for a model.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPullFitNote holds the pulled model's footprint to injected memory
// sizes: a machine with less free than it needs is told a load would be
// refused, one with enough is not.
func TestPullFitNote(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "demo-decision"))); err != nil {
		t.Fatal(err)
	}
	fp, err := daemon.DecideEstimator(daemon.LoaderOptions{})(context.Background(), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		avail   int64
		refused bool
	}{{fp.Total() - 1, true}, {fp.Total(), false}, {fp.Total() + 8e9, false}} {
		var b strings.Builder
		pullFitNote(context.Background(), &b, dir, daemon.Memory{Known: true, Total: 32e9, Available: tt.avail})
		out := b.String()
		if !strings.Contains(out, "memory: loading it needs "+fp.String()+" at the default limits; "+human.MB(tt.avail)+" available now") ||
			strings.Contains(out, "would be refused") != tt.refused {
			t.Errorf("%d bytes available for %d: %q", tt.avail, fp.Total(), out)
		}
	}
}
