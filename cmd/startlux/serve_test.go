package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/ipc"
)

// startServe runs "startlux serve" in-process on a fresh socket and
// returns the socket path and a function that stops it and returns serve's
// error.
func startServe(t *testing.T, extra ...string) (string, func() error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "s.sock") // serve makes run/ 0700
	ctx, cancel := context.WithCancel(context.Background())
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		env := &cmdEnv{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &errOut}
		done <- run(ctx, env, append([]string{"serve", "--socket", sock}, extra...))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := ipc.Dial(context.Background(), sock); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not listen within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := false
	var stopErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-done
		}
		return stopErr
	}
	t.Cleanup(func() { stop() })
	return sock, stop
}

// runCmd runs a subcommand and returns its stdout.
func runCmd(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdin: bytes.NewReader(stdin), stdout: &out, stderr: &errOut}
	err := run(context.Background(), env, args)
	return out.String(), err
}

// TestServeAndClients runs the daemon command and its clients against it:
// decide (one request and an array) gives the goldens' probabilities, status
// reports the ready model, models lists, use switches, a second serve on the
// live socket is refused, and stopping removes the socket.
func TestServeAndClients(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	models := filepath.Join(home, "data", "startlux", "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mustAbs(t, filepath.Join("..", "..", "testdata", "demo-decision")), filepath.Join(models, "demo-copy")); err != nil {
		t.Fatal(err)
	}
	sock, stop := startServe(t)

	var st struct {
		State string `json:"state"`
		Model struct {
			Name       string  `json:"name"`
			Backend    string  `json:"backend"`
			Int8       *bool   `json:"int8"` // present and false: serve ran without --int8
			Int8Kernel *string `json:"int8_kernel"`
		} `json:"model"`
	}
	for deadline := time.Now().Add(30 * time.Second); st.State != "ready"; time.Sleep(20 * time.Millisecond) {
		out, err := runCmd(t, nil, "status", "--json", "--socket", sock)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json printed %q: %v", out, err)
		}
		if st.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("status: %s", out)
		}
	}
	if st.Model.Backend == "" || st.Model.Int8 == nil || *st.Model.Int8 || st.Model.Int8Kernel != nil {
		t.Errorf("status model %+v, want \"int8\": false and no int8_kernel", st.Model)
	}
	if out, err := runCmd(t, nil, "status", "--socket", sock); err != nil || !strings.Contains(out, "state:     ready") {
		t.Errorf("status: %q %v", out, err)
	}

	cases := goldenCases(t)
	c := cases[0]
	out, err := runCmd(t, c.Request, "decide", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, c.Answers)
	// The same through --local prints the same document.
	local, err := runCmd(t, c.Request, "decide", "--local")
	if err != nil {
		t.Fatal(err)
	}
	if stripElapsed(t, local) != stripElapsed(t, out) {
		t.Errorf("through the daemon:\n%s\nin-process:\n%s", out, local)
	}
	// --model takes what serve --model takes: a name in the models folder.
	for _, m := range []string{"demo-copy", "demo"} {
		named, err := runCmd(t, c.Request, "decide", "--model", m)
		if err != nil {
			t.Fatalf("decide --model %s: %v", m, err)
		}
		if stripElapsed(t, named) != stripElapsed(t, out) {
			t.Errorf("decide --model %s:\n%s\nthrough the daemon:\n%s", m, named, out)
		}
	}
	// Bad JSON is reported as --local reports it, naming where.
	for _, args := range [][]string{{"decide", "--socket", sock}, {"decide", "--local"}} {
		_, err := runCmd(t, []byte(`{"evidence": 1, "questions": {`), args...)
		if err == nil || !strings.Contains(err.Error(), "questions: invalid JSON: expected a string key (byte 30)") || strings.Contains(err.Error(), "msgpack") {
			t.Errorf("%v with bad JSON: %v", args, err)
		}
	}

	// An integer beyond 64 bits cannot go through msgpack: refused before
	// anything is sent, naming it (in-process it renders with every digit).
	big := []byte(`{"evidence": {"id": 123456789012345678901234567890}, "questions": {"q": {"type": "noul", "instructions": "Is there an id?"}}}`)
	if out, err := runCmd(t, big, "decide", "--socket", sock); err == nil || !strings.Contains(err.Error(), "integer 123456789012345678901234567890") {
		t.Errorf("a 30-digit integer through the daemon: %q, err %v; want an error naming it", out, err)
	}
	if _, err := runCmd(t, big, "decide", "--local"); err != nil {
		t.Errorf("the same in-process: %v", err)
	}

	batch := append(append(append([]byte("["), cases[1].Request...), []byte(`,{"evidence":1},`)...), cases[2].Request...)
	batch = append(batch, ']')
	out, err = runCmd(t, batch, "decide", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(out), &items); err != nil || len(items) != 3 {
		t.Fatalf("batch printed %s (%v)", out, err)
	}
	checkPrinted(t, string(items[0]), cases[1].Answers)
	checkPrinted(t, string(items[2]), cases[2].Answers)
	if !strings.Contains(string(items[1]), `"error"`) {
		t.Errorf("bad batch item printed %s", items[1])
	}

	out, err = runCmd(t, nil, "models", "--socket", sock)
	if err != nil || !strings.Contains(out, "* demo") || !strings.Contains(out, "demo-copy") {
		t.Errorf("models: %q %v", out, err)
	}
	out, err = runCmd(t, nil, "use", "--socket", sock, "demo-copy")
	if err != nil || !strings.Contains(out, "now serving") {
		t.Errorf("use: %q %v", out, err)
	}
	if out, err := runCmd(t, nil, "models", "--socket", sock); err != nil || !strings.Contains(out, "* demo-copy") {
		t.Errorf("models after use: %q %v", out, err)
	}
	if _, err := runCmd(t, nil, "use", "--socket", sock, "no-such-model"); err == nil {
		t.Error("use of a missing model succeeded")
	}

	if _, err := runCmd(t, nil, "serve", "--socket", sock); !errors.Is(err, ipc.ErrDaemonRunning) {
		t.Errorf("second serve on a live socket: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left after serve stopped: %v", err)
	}
	if _, err := runCmd(t, c.Request, "decide", "--socket", sock); err == nil || !strings.Contains(err.Error(), "no daemon is listening") {
		t.Errorf("decide with no daemon: %v", err)
	}
}

type goldenCase struct {
	Request json.RawMessage `json:"request"`
	Answers map[string]struct {
		Probs []float64 `json:"probs"`
	} `json:"answers"`
}

func goldenCases(t *testing.T) []goldenCase {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "goldens", "decide-demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

// checkPrinted compares a printed response with golden answers.
func checkPrinted(t *testing.T, out string, want map[string]struct {
	Probs []float64 `json:"probs"`
}) {
	t.Helper()
	var resp struct {
		Answers map[string]struct {
			Probs []float64 `json:"probs"`
		} `json:"answers"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("printed %q: %v", out, err)
	}
	if len(resp.Answers) != len(want) {
		t.Fatalf("%d answers, want %d", len(resp.Answers), len(want))
	}
	for name, w := range want {
		got := resp.Answers[name].Probs
		if len(got) != len(w.Probs) {
			t.Fatalf("%s: probs %v, want %v", name, got, w.Probs)
		}
		for i := range got {
			if math.Abs(got[i]-w.Probs[i]) > 1e-4 {
				t.Fatalf("%s: probs %v, want %v", name, got, w.Probs)
			}
		}
	}
}

// stripElapsed removes the timing field so two printed responses compare.
func stripElapsed(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, `"elapsed_ms":`)
	if i < 0 {
		t.Fatalf("no elapsed_ms in %s", out)
	}
	j := i + strings.IndexAny(out[i:], ",}")
	return out[:i] + out[j:]
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// benchServeArgs lets the bench-serve test run a full measurement:
// go test ./cmd/startlux -run BenchServe -v -args -bench-serve-args="--requests 300"
var benchServeArgs = flag.String("bench-serve-args", "--requests 12 --clients 3 --rounds 1", "arguments of the bench serve test")

// TestBenchServeRuns runs a small "bench serve" and checks it reports its
// three measurements.
func TestBenchServeRuns(t *testing.T) {
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &errOut}
	if err := run(context.Background(), env, append([]string{"bench", "serve"}, strings.Fields(*benchServeArgs)...)); err != nil {
		t.Fatalf("%v (%s)", err, errOut.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"in-process Decide", "socket, 1 client", "socket, ", " clients", "socket overhead at 1 client"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestServeInt8 runs "startlux serve --int8": status --json shows int8 on
// with the CPU backend's kernel and the model's weight bytes, status says
// "int8: on (kernel)", and "use --int8=false" reloads the model in float,
// which then holds more weight bytes and answers exactly as the goldens.
func TestServeInt8(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	sock, _ := startServe(t, "--int8", "--backend", "cpu")
	type modelStatus struct {
		Int8       bool   `json:"int8"`
		Int8Kernel string `json:"int8_kernel"`
	}
	type memoryStatus struct {
		Weights int64 `json:"weights"`
	}
	var st struct {
		State  string       `json:"state"`
		Model  modelStatus  `json:"model"`
		Memory memoryStatus `json:"memory"`
	}
	for deadline := time.Now().Add(30 * time.Second); st.State != "ready"; time.Sleep(20 * time.Millisecond) {
		out, err := runCmd(t, nil, "status", "--json", "--socket", sock)
		if err != nil {
			t.Fatal(err)
		}
		st.State = ""
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json printed %q: %v", out, err)
		}
		if st.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("status: %s", out)
		}
	}
	if !st.Model.Int8 || st.Model.Int8Kernel == "" || st.Memory.Weights <= 0 {
		t.Fatalf("status --json of serve --int8: model %+v, memory %+v", st.Model, st.Memory)
	}
	if out, err := runCmd(t, nil, "status", "--socket", sock); err != nil || !strings.Contains(out, "int8:      on ("+st.Model.Int8Kernel+")") {
		t.Errorf("status: %q %v", out, err)
	}
	out, err := runCmd(t, nil, "use", "--socket", sock, "--int8=false", "demo")
	if err != nil || !strings.Contains(out, "int8 off") {
		t.Fatalf("use --int8=false: %q %v", out, err)
	}
	raw, err := runCmd(t, nil, "status", "--json", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	var after struct {
		Model  modelStatus  `json:"model"`
		Memory memoryStatus `json:"memory"`
	}
	if err := json.Unmarshal([]byte(raw), &after); err != nil || after.Model.Int8 || after.Memory.Weights <= st.Memory.Weights {
		t.Errorf("after use --int8=false: %s (int8 weights were %d bytes)", raw, st.Memory.Weights)
	}
	c := goldenCases(t)[0]
	out, err = runCmd(t, c.Request, "decide", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, c.Answers)
}

// TestUnsafeSocketDirs checks that the commands refuse a socket whose
// directory another user could have made or could change, each time naming
// what is wrong: serve refuses to listen there (--socket included), and the
// clients refuse to connect, even when the daemon behind it is real.
func TestUnsafeSocketDirs(t *testing.T) {
	sock, _ := startServe(t)
	dir := filepath.Dir(sock)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	req := []byte(`{"evidence": {"secret": "s3cr3t"}, "questions": {"q": {"type": "noul", "instructions": "Is it secret?"}}}`)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"serve in a world-writable directory", []string{"serve", "--socket", filepath.Join(open, "s.sock")}, "has mode 0777, want 0700"},
		{"serve through a symbolic link", []string{"serve", "--socket", filepath.Join(link, "x.sock")}, "is a symbolic link"},
		{"status through a symbolic link", []string{"status", "--socket", filepath.Join(link, "s.sock")}, "is a symbolic link"},
		{"decide through a symbolic link", []string{"decide", "--socket", filepath.Join(link, "s.sock")}, "is a symbolic link"},
		{"use through a symbolic link", []string{"use", "--socket", filepath.Join(link, "s.sock"), "demo"}, "is a symbolic link"},
	} {
		_, err := runCmd(t, req, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.want)
		}
	}
	// The daemon's own directory, loosened after it started: the clients
	// refuse it too.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := runCmd(t, req, "decide", "--socket", sock)
	os.Chmod(dir, 0o700)
	if !errors.Is(err, ipc.ErrUnsafeSocket) || !strings.Contains(err.Error(), "has mode 0777, want 0700") {
		t.Errorf("decide through the loosened directory: %v", err)
	}
	if _, err := runCmd(t, req, "decide", "--socket", sock); err != nil {
		t.Errorf("decide once the directory is private again: %v", err)
	}
}

// TestStatusMemoryAndUnload checks what startlux status prints of memory
// and that startlux unload unloads: status then says so, and the next
// decision loads the model again.
func TestStatusMemoryAndUnload(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	sock, _ := startServe(t, "--backend", "cpu", "--scratch-limit", "33554432", "--idle-unload", "2h")
	var out string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out, "state:     ready"); time.Sleep(20 * time.Millisecond) {
		var err error
		if out, err = runCmd(t, nil, "status", "--socket", sock); err != nil || time.Now().After(deadline) {
			t.Fatalf("status: %q %v", out, err)
		}
	}
	for _, want := range []string{"memory:    ", " resident: weights 3.2 MB, prefix cache ", " of 536.9 MB, scratch ", " of 33.6 MB\n",
		"fit:       the model needs ", "unload:    after 2h0m0s without a decision\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status printed %q, want %q in it", out, want)
		}
	}
	if out, err := runCmd(t, nil, "unload", "--socket", sock); err != nil || !strings.HasPrefix(out, "unloaded demo-decision (embedded); ") {
		t.Fatalf("unload: %q %v", out, err)
	}
	out, err := runCmd(t, nil, "status", "--socket", sock)
	if err != nil || !strings.Contains(out, "state:     unloaded (idle since ") {
		t.Fatalf("status after unload: %q %v", out, err)
	}
	c := goldenCases(t)[0]
	if _, err := runCmd(t, c.Request, "decide", "--socket", sock); err != nil {
		t.Fatalf("decide on an unloaded daemon: %v", err)
	}
	if out, err := runCmd(t, nil, "status", "--socket", sock); err != nil || !strings.Contains(out, "state:     ready") {
		t.Errorf("status after the decision: %q %v", out, err)
	}
}
