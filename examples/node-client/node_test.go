// Package nodeclient checks the Node.js client example (an independent
// msgpack implementation) against a live daemon.
package nodeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/daemon"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/internal/testenv"
)

// TestNodeClient starts a daemon on the embedded demo model and has the
// Node.js client send every decide-demo.json request, pipelined on one
// connection; the answers must match the goldens.
func TestNodeClient(t *testing.T) {
	node := testenv.LookPath(t, "node", "Debian: apt-get install nodejs npm; ./build.sh test does")
	if _, err := os.Stat(filepath.Join("node_modules", "@msgpack", "msgpack", "package.json")); err != nil {
		testenv.Missing(t, "the Node.js client's dependencies are not installed: run \"npm ci --prefix examples/node-client\" (./build.sh test does): %v", err)
	}

	sock := filepath.Join(t.TempDir(), "run", "d.sock") // the daemon makes run/ 0700
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.RunOptions{Socket: sock,
			Daemon:    daemon.Options{Load: daemon.DecideLoader(daemon.LoaderOptions{}), ModelsDir: t.TempDir()},
			Listening: func(string) { close(listening) }})
	}()
	select {
	case <-listening:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// Wait for the model, asking through the Node client.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := runNode(t, node, nil, "--socket", sock, "status")
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		var st api.Status
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("status printed %s: %v", out, err)
		}
		if st.State == api.StateReady {
			break
		}
		if st.State == api.StateFailed || time.Now().After(deadline) {
			t.Fatalf("daemon not ready: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}

	cases, err := goldens.DecideDemo(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	var lines bytes.Buffer
	for _, c := range cases {
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.Request); err != nil {
			t.Fatal(err)
		}
		lines.Write(compact.Bytes())
		lines.WriteByte('\n')
	}
	out, err := runNode(t, node, lines.Bytes(), "--socket", sock, "decide-lines")
	if err != nil {
		t.Fatalf("decide-lines: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(cases) {
		t.Fatalf("%d answers printed, want %d", len(got), len(cases))
	}
	for i, line := range got {
		var item struct {
			Result *struct {
				Answers map[string]struct {
					Probs []float64 `json:"probs"`
				} `json:"answers"`
			} `json:"result"`
			Error *api.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &item); err != nil || item.Result == nil {
			t.Errorf("case %d: printed %s (%v)", i, line, err)
			continue
		}
		want := cases[i].Answers
		if len(item.Result.Answers) != len(want) {
			t.Errorf("case %d: %d answers, want %d", i, len(item.Result.Answers), len(want))
		}
		for name, w := range want {
			g := item.Result.Answers[name].Probs
			if len(g) != len(w.Probs) {
				t.Errorf("case %d %s: probs %v, want %v", i, name, g, w.Probs)
				continue
			}
			for k := range g {
				if math.Abs(g[k]-w.Probs[k]) > 1e-4 {
					t.Errorf("case %d %s: probs %v, want %v", i, name, g, w.Probs)
					break
				}
			}
		}
	}

	// The client's checks of the socket (Node.js cannot read the server's
	// credentials; the directory and the socket file's owner are checked).
	dir := filepath.Dir(sock)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name  string
		path  string
		setup func() (undo func())
		want  string
	}{
		{"a symbolic link", filepath.Join(link, filepath.Base(sock)), nil, "is a symbolic link"},
		{"a world-writable directory", sock, func() func() {
			os.Chmod(dir, 0o777)
			return func() { os.Chmod(dir, 0o700) }
		}, "has mode 0777, want 0700"},
	}
	if os.Getuid() == 0 {
		checks = append(checks, struct {
			name  string
			path  string
			setup func() (undo func())
			want  string
		}{"a socket file of another user", sock, func() func() {
			os.Lchown(sock, 12345, 12345)
			return func() { os.Lchown(sock, 0, 0) }
		}, "is owned by uid 12345, not by you (uid 0) or root"})
	}
	for _, c := range checks {
		undo := func() {}
		if c.setup != nil {
			undo = c.setup()
		}
		_, err := runNode(t, node, nil, "--socket", c.path, "status")
		undo()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(ee.Stderr), "refusing an unsafe socket") || !strings.Contains(string(ee.Stderr), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.want)
		}
	}
	if _, err := runNode(t, node, nil, "--socket", sock, "ping"); err != nil {
		t.Errorf("ping once the socket is safe again: %v", err)
	}

	// An unknown method: the client reports the daemon's error code.
	_, err = runNode(t, node, nil, "--socket", sock, "frobnicate")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(ee.Stderr), "unknown_method") {
		t.Errorf("unknown method through Node: %v", err)
	}
}

// runNode runs the client script and returns its stdout.
func runNode(t *testing.T, node string, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"startlux-client.mjs"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd.Output()
}
