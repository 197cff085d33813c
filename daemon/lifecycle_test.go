package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

// TestShutdownAnswersQueued: a graceful stop answers what is running and
// queued, refuses what comes after, and removes the socket.
func TestShutdownAnswersQueued(t *testing.T) {
	fl := newFakeLoader()
	eng := fl.engine("")
	path := filepath.Join(t.TempDir(), "run", "d.sock") // Listen makes run/ 0700
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{Socket: path, Daemon: Options{Load: fl.load, NoWarmup: true, MaxBatch: 1},
			Listening: func(string) { close(listening) }})
	}()
	<-listening
	c := dial(t, path)
	var st api.Status
	waitFor(t, func() bool {
		c.Call(context.Background(), api.MethodStatus, nil, &st)
		return st.State == api.StateReady
	})
	eng.mu.Lock()
	eng.gate = make(chan struct{})
	eng.mu.Unlock()
	results := make(chan error, 3)
	for i := range 3 {
		go func() { results <- c.Call(context.Background(), api.MethodDecide, params(t, request(i)), nil) }()
	}
	waitFor(t, func() bool { c.Call(context.Background(), api.MethodStatus, nil, &st); return st.Queued == 2 })
	cancel()
	time.Sleep(50 * time.Millisecond)
	if err := c.Call(context.Background(), api.MethodPing, nil, nil); api.ErrorCode(err) != api.CodeShuttingDown {
		t.Errorf("ping while stopping: %v", err)
	}
	close(eng.gate)
	for range 3 {
		if err := <-results; err != nil {
			t.Errorf("in-flight request during shutdown: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket still there: %v", err)
	}
	if !eng.closed {
		t.Error("model not closed at shutdown")
	}
}

// TestBatchesGather: with 16 clients each waiting for its answer before
// sending again, the batches hold most of the clients instead of splitting
// them over many passes.
func TestBatchesGather(t *testing.T) {
	fl := newFakeLoader()
	fl.delay = 3 * time.Millisecond
	path := startDaemon(t, Options{Load: fl.load, NoWarmup: true})
	ctx := context.Background()
	const clients, each = 16, 20
	conns := make([]*ipc.Client, clients)
	for i := range conns {
		conns[i] = dial(t, path)
	}
	var st api.Status
	waitFor(t, func() bool { conns[0].Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateReady })
	raw := params(t, request(1))
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := c.Call(ctx, api.MethodDecide, raw, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	e := fl.engine("")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.requests != clients*each {
		t.Fatalf("%d requests reached the engine, want %d", e.requests, clients*each)
	}
	if mean := float64(e.requests) / float64(len(e.batches)); mean < clients/2 {
		t.Errorf("mean batch %.1f requests over %d batches, want at least %d (sizes %v)", mean, len(e.batches), clients/2, e.batches)
	}
}

// TestLoadParams: load needs a model named, and a directory given as an
// absolute path (the daemon's working directory is not the client's).
func TestLoadParams(t *testing.T) {
	fl := newFakeLoader()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	os.Mkdir(ckpt, 0o755)
	for _, f := range []string{"config.json", "decision_config.json"} {
		os.WriteFile(filepath.Join(ckpt, f), []byte("{}"), 0o644)
	}
	path := startDaemon(t, Options{Load: fl.load, NoWarmup: true, ModelsDir: dir})
	c := dial(t, path)
	ctx := context.Background()
	var st api.Status
	waitFor(t, func() bool { c.Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateReady })
	t.Chdir(dir)
	for _, tc := range []struct {
		name   string
		params any
		want   string // "" = loads
	}{
		{"no params", nil, "none given"},
		{"no model", map[string]any{}, "none given"},
		{"a relative directory", map[string]any{"model": "./ckpt"}, `"./ckpt" is a relative path`},
		{"the working directory", map[string]any{"model": "."}, `"." is a relative path`},
		{"an absolute directory", map[string]any{"model": ckpt}, ""},
		{"a name", map[string]any{"model": "ckpt"}, ""},
		{"the demo", map[string]any{"model": "demo"}, ""},
	} {
		err := c.Call(ctx, api.MethodLoad, tc.params, &st)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (api.ErrorCode(err) != api.CodeInvalidParams || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want invalid_params saying %q", tc.name, err, tc.want)
		}
	}
	if st.Model.Path != "" {
		t.Errorf("after loading the demo: %+v", st.Model)
	}
}
