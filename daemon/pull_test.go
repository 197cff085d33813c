package daemon

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/hub/hubtest"
	"github.com/startlux/startlux/ipc"
)

// gate is a transport whose responses from one host stop after the first
// `first` bytes of the body until open is closed.
type gate struct {
	host  string
	first int
	open  chan struct{}
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.URL.Host == g.host && r.Method == http.MethodGet {
		resp.Body = &gatedBody{ReadCloser: resp.Body, g: g, ctx: r.Context()}
	}
	return resp, err
}

type gatedBody struct {
	io.ReadCloser
	g   *gate
	ctx context.Context
	n   int
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.n >= b.g.first {
		select {
		case <-b.g.open:
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	} else if len(p) > b.g.first-b.n {
		p = p[:b.g.first-b.n]
	}
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

// stepClock is a clock that moves a second each time it is read, so that
// a transfer rate shows after a few reads.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// TestLoadPull runs a real daemon against a fake Hub: load {"pull": repo}
// downloads tiny-qwen35 into the models folder while status reports the
// bytes, the total and the rate, then serves it (zero-shot, uncalibrated);
// pulling it again downloads no weights; failures come back as pull_failed
// saying why, and bad params as invalid_params, the old model serving on.
func TestLoadPull(t *testing.T) {
	ctx := context.Background()
	chat := hubtest.Dir(t, "owner/tiny-qwen35", filepath.Join("..", "testdata", "tiny-qwen35"))
	moe := hubtest.Dir(t, "owner/moe", filepath.Join("..", "testdata", "tiny-qwen35-moe"))
	private := hubtest.Dir(t, "owner/private", filepath.Join("..", "testdata", "tiny-qwen35"))
	private.Token = "hf_secretsecret"
	other := hubtest.Dir(t, "owner/other", filepath.Join("..", "testdata", "demo-decision"))
	s := hubtest.NewServer(t, chat, moe, private, other)
	g := &gate{host: strings.TrimPrefix(s.Storage.URL, "http://"), first: 64 << 10, open: make(chan struct{})}
	models := t.TempDir()
	clock := &stepClock{t: time.Unix(1e9, 0)}
	path := startRun(t, RunOptions{Daemon: Options{
		Load: DecideLoader(LoaderOptions{}), ModelsDir: models, NoWarmup: true,
		Hub: func() (*hub.Client, error) {
			return hub.NewClient(hub.Options{Endpoint: s.Hub.URL, HTTP: &http.Client{Transport: g}, RetryWait: time.Millisecond})
		},
		PullOptions: hub.PullOptions{Now: clock.now, FreeSpace: func(string) (int64, error) { return 1 << 40, nil }},
	}})
	c := dial(t, path)
	status := func() api.Status {
		var st api.Status
		if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitFor(t, func() bool { return status().State == api.StateReady })

	// The pull, watched from a second connection.
	loaded := make(chan error, 1)
	var after api.Status
	go func() {
		lc, err := ipc.Dial(ctx, path)
		if err != nil {
			loaded <- err
			return
		}
		defer lc.Close()
		loaded <- lc.Call(ctx, api.MethodLoad, api.LoadParams{Pull: "owner/tiny-qwen35"}, &after)
	}()
	var seen api.LoadProgress
	waitFor(t, func() bool {
		st := status()
		if p := st.Progress; p != nil && p.Phase == api.PhasePulling && p.File == "model.safetensors" && p.Done > 0 && p.Rate > 0 {
			seen = *p
			return true
		}
		return false
	})
	dest := filepath.Join(models, "tiny-qwen35")
	if seen.Repo != "owner/tiny-qwen35" || seen.Model != dest || seen.Done >= seen.Total || seen.Total != sizeOf(t, chat) {
		t.Errorf("progress while pulling: %+v; want %s into %s, part of %d bytes", seen, chat.ID, dest, sizeOf(t, chat))
	}
	if st := status(); st.State != api.StateReady || st.Model.Path != DemoPath {
		t.Errorf("while pulling, the old model must serve: %+v", st)
	}
	close(g.open)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if after.Model.Path != dest || after.Model.Calibrated || after.Progress != nil || after.State != api.StateReady {
		t.Errorf("after the pull: %+v", after)
	}
	src, err := hub.ReadSource(dest)
	if err != nil || src.Commit != chat.Commit {
		t.Errorf("provenance %+v, %v", src, err)
	}

	// Again: no weights are downloaded (the plan reads config.json again).
	before := len(s.Requests())
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Pull: "owner/tiny-qwen35"}, &after); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Requests()[before:] {
		if strings.HasSuffix(r.Path, ".safetensors") {
			t.Errorf("a second pull of the same commit fetched %s", r.Path)
		}
	}

	fails := []struct {
		name string
		p    api.LoadParams
		code api.Code
		want string
	}{
		{"mixture of experts", api.LoadParams{Pull: "owner/moe"}, api.CodePullFailed, "mixture-of-experts"},
		{"private without a token", api.LoadParams{Pull: "owner/private"}, api.CodePullFailed, "HF_TOKEN"},
		{"name taken", api.LoadParams{Pull: "owner/other", Name: "tiny-qwen35"}, api.CodePullFailed, "tiny-qwen35 already exists"},
		{"bad repository", api.LoadParams{Pull: "a/b/c"}, api.CodeInvalidParams, `pull "a/b/c"`},
		{"demo's name", api.LoadParams{Pull: "owner/moe", Name: "demo"}, api.CodeInvalidParams, "embedded demo model's name"},
		{"bad name", api.LoadParams{Pull: "owner/moe", Name: "../x"}, api.CodeInvalidParams, "load: pull owner/moe@main"},
		{"model and pull", api.LoadParams{Model: "demo", Pull: "owner/moe"}, api.CodeInvalidParams, "exclude each other"},
		{"name without pull", api.LoadParams{Model: "demo", Name: "x"}, api.CodeInvalidParams, "name is only for pull"},
	}
	for _, f := range fails {
		err := c.Call(ctx, api.MethodLoad, f.p, nil)
		if api.ErrorCode(err) != f.code || !strings.Contains(api.ErrorMessage(err), f.want) {
			t.Errorf("%s: got %v, want %s saying %q", f.name, err, f.code, f.want)
		}
	}
	st := status()
	if st.State != api.StateReady || st.Model.Path != dest || !strings.Contains(st.Error, "already exists") {
		t.Errorf("after the failed pulls: %+v; want tiny-qwen35 serving, the last error in status", st)
	}
	if _, err := os.Stat(filepath.Join(models, "moe")); err == nil {
		t.Error("a refused pull left a model directory")
	}
}

// sizeOf sums the sizes of a repository's files that a pull fetches (all
// but generation_config.json, here).
func sizeOf(t *testing.T, r *hubtest.Repo) int64 {
	var n int64
	for name, b := range r.Files {
		if name != "generation_config.json" {
			n += int64(len(b))
		}
	}
	return n
}
