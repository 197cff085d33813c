package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

func TestSocketCheck(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return d
	}
	private := mk("private", 0o700)
	open := mk("open", 0o755)
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	loose := mk("loose", 0o700)
	if err := os.WriteFile(filepath.Join(loose, "startlux.sock"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(loose, "startlux.sock"), 0o666); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		dir    string
		status Status
		reason string
		exists bool
	}{
		{"not made yet", filepath.Join(base, "missing"), OK, "", false},
		{"private", private, OK, "", true},
		// A chosen directory is used as it is; the 0600 socket keeps
		// others out.
		{"chosen, open to others", open, OK, "", true},
		{"a file", file, Failed, "not a directory", true},
		{"a socket others may use", loose, Failed, "socket has mode 0666", true},
	}
	for _, c := range cases {
		s := checkSocket(filepath.Join(c.dir, "startlux.sock"))
		if s.Status != c.status || !strings.Contains(s.Reason, c.reason) || s.DirExists != c.exists || s.Dir != c.dir || s.Kind != "chosen" {
			t.Errorf("%s: %+v; want %s with %q", c.name, s, c.status, c.reason)
		}
	}
	if s := checkSocket(filepath.Join(private, "startlux.sock")); s.DirMode != "0700" || s.DirOwnerUID != os.Getuid() {
		t.Errorf("private directory: mode %s, owner %d", s.DirMode, s.DirOwnerUID)
	}
}

// TestSocketCheckDefault holds the default socket's own directory to what
// ipc enforces: 0700, the user's, no symbolic link.
func TestSocketCheckDefault(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	path := ipc.DefaultSocketPath()
	if !strings.HasPrefix(path, run) {
		t.Skipf("the default socket %s is not under XDG_RUNTIME_DIR on this system", path)
	}
	if s := checkSocket(""); s.Kind != "default" || s.Path != path || s.Status != OK || s.DirExists {
		t.Errorf("before the daemon ran: %+v", s)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if s := checkSocket(""); s.Status != Failed || !strings.Contains(s.Reason, "has mode 0755, want 0700") {
		t.Errorf("a loosened default directory: %+v", s)
	}
	if os.Getuid() == 0 {
		if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Dir(path), 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if s := checkSocket(""); s.Status != Failed || !strings.Contains(s.Reason, "belongs to uid 4242") {
			t.Errorf("someone else's default directory: %+v", s)
		}
	}
}

// writeCheckpoint writes a checkpoint's configuration files (no weights:
// doctor reads only configurations).
func writeCheckpoint(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTestdata(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestModelsCheck(t *testing.T) {
	dir := t.TempDir()
	demoDecision, demoConfig := readTestdata(t, "demo-decision/decision_config.json"), readTestdata(t, "demo-decision/config.json")
	writeCheckpoint(t, filepath.Join(dir, "good"), map[string]string{"decision_config.json": demoDecision, "config.json": demoConfig})
	writeCheckpoint(t, filepath.Join(dir, "pointer"), map[string]string{
		"decision_config.json": readTestdata(t, "tiny-pointer/decision_config.json"),
		"base/config.json":     readTestdata(t, "tiny-pointer/base/config.json"),
	})
	writeCheckpoint(t, filepath.Join(dir, "broken"), map[string]string{"decision_config.json": demoDecision, "config.json": `{"text_config": {"hidden_size": -3}}`})
	writeCheckpoint(t, filepath.Join(dir, "notes"), map[string]string{"README": "not a model"})
	writeCheckpoint(t, filepath.Join(dir, "chat"), map[string]string{"config.json": readTestdata(t, "tiny-qwen35/config.json"), "tokenizer.json": "{}"})
	writeCheckpoint(t, dir, map[string]string{"stray.txt": "a file beside the models"})

	ms := checkModels(dir)
	got := map[string]Model{}
	for _, m := range ms.Models {
		got[m.Name] = m
	}
	if len(ms.Models) != 6 {
		t.Fatalf("models %+v: want the demo and five folders", ms.Models)
	}
	for _, name := range []string{"demo (embedded)", "good", "pointer", "chat"} {
		if m := got[name]; m.Status != OK || m.Layers == 0 || m.Hidden == 0 {
			t.Errorf("%s: %+v, want ok with its config", name, m)
		}
	}
	if c := got["chat"]; c.Format != "jevfmt/1" || !c.Uncalibrated || got["good"].Uncalibrated {
		t.Errorf("a chat checkpoint without a decision config: %+v; want jevfmt/1, uncalibrated", c)
	}
	if got["pointer"].Format != "pointer/1" || got["good"].Format != "jevfmt/1" {
		t.Errorf("formats: pointer %q, good %q", got["pointer"].Format, got["good"].Format)
	}
	if m := got["broken"]; m.Status != Failed || !strings.Contains(m.Reason, "config.json") {
		t.Errorf("broken: %+v, want a failure naming config.json", m)
	}
	if m := got["notes"]; m.Status != Failed || !strings.Contains(m.Reason, "not a checkpoint") {
		t.Errorf("notes: %+v", m)
	}
	if ms.Status != Failed || !strings.Contains(ms.Reason, "2 of 6") {
		t.Errorf("folder: %+v, want it failed for the two bad ones", ms.Check)
	}
	if ms := checkModels(filepath.Join(dir, "missing")); ms.Status != OK || len(ms.Models) != 1 {
		t.Errorf("a models folder not made yet: %+v", ms)
	}
}

func TestDaemonCheck(t *testing.T) {
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "run", "s.sock") // Listen makes run/ private
	if d := checkDaemon(ctx, sock, time.Second); d.Status != Failed || d.Answers || d.Reported != nil || !strings.Contains(d.Reason, "no daemon answers") {
		t.Errorf("no daemon: %+v", d)
	}
	l, err := ipc.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	state := api.StateReady
	srv := ipc.NewServer(ipc.HandlerFunc(func(ctx context.Context, req *ipc.Request) (any, error) {
		if req.Method != "status" {
			return nil, errors.New("unexpected method")
		}
		return api.Status{State: state, Error: "bad weights", Model: api.ModelStatus{Name: "demo", Backend: "cpu"}, PID: 77}, nil
	}), ipc.ServerOptions{})
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	d := checkDaemon(ctx, sock, 2*time.Second)
	if d.Status != OK || !d.Answers || d.Reported == nil || d.Reported.PID != 77 || d.Reported.Model.Name != "demo" {
		t.Errorf("a ready daemon: %+v", d)
	}
	// The text report carries the backend note, what a bug report needs
	// of a GPU turned off.
	note := "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head 0 of token 8"
	d.Reported.Model.BackendNote = note
	var b strings.Builder
	if err := (Report{Daemon: d}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "\n  backend note         " + note + "\n"; !strings.Contains(b.String(), want) {
		t.Errorf("text report without the note line %q:\n%s", want, b.String())
	}
	state = api.StateFailed
	if d := checkDaemon(ctx, sock, 2*time.Second); d.Status != Failed || !d.Answers || !strings.Contains(d.Reason, "bad weights") {
		t.Errorf("a daemon whose model failed: %+v", d)
	}
}

func TestGuard(t *testing.T) {
	var c Check
	guard(&c, func() { panic("boom") })
	if c.Status != Failed || !strings.Contains(c.Reason, "boom") {
		t.Errorf("%+v", c)
	}
}

// TestRunLoginItemFailure: a check that fails leaves the rest of the report
// intact.
func TestRunLoginItemFailure(t *testing.T) {
	r := Run(context.Background(), Options{
		Socket: filepath.Join(t.TempDir(), "s.sock"), ModelsDir: t.TempDir(), NoEmulator: true, SgemmTime: time.Millisecond,
		LoginItems: func(context.Context) (LoginItem, error) { return LoginItem{}, errors.New("no session bus") },
	})
	if r.LoginItem.Status != Failed || r.LoginItem.Reason != "no session bus" || r.LoginItem.Items == nil {
		t.Errorf("login item: %+v", r.LoginItem)
	}
	if r.System.Status != OK || r.Models.Status != OK || r.BLAS.Shape == "" || r.Int8.Status != OK || r.Int8.Kernel == "" {
		t.Errorf("the other checks: system %+v, models %+v, blas %+v", r.System, r.Models, r.BLAS)
	}
	var buf strings.Builder
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"login item   failed  no session bus", "int8         ok      " + r.Int8.Kernel + " on backend " + r.Int8.Backend + "\n", "daemon       failed  no daemon answers",
		"self-check   failed  not run: no GPU here, and the emulator is not checked (--no-emulator)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, buf.String())
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}
