package daemon

import (
	"context"
	"fmt"
	"github.com/startlux/startlux/api"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/model/modeltest"
)

// writeBigDecisionModel writes a decision checkpoint of random weights
// large enough that its memory shows against the process's (about 230 MB
// of bf16 weights), with the demo model's tokenizer and decision config,
// and returns its directory and its weights' bytes.
func writeBigDecisionModel(t testing.TB) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	c := modeltest.Qwen35Small(8)
	c.Vocab, c.MaxPositions, c.Intermediate = 2510, 4096, 4096
	if _, err := modeltest.Write(dir, c, modeltest.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "decision_config.json"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "demo-decision", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, fi.Size()
}

// TestUnloadRSS measures the unload/reload cycle in a process of its own,
// on a checkpoint of 345 MB: resident memory with the model loaded and
// used, after the unload method, and after the decision that loads it
// again, against the same daemon's with no model (a load that fails). The
// bounds are generous (the figures go to the log): loaded, the process
// holds at least most of the weights above its base; unloaded, it is back
// within 100 MB of its base; reloaded, it holds them again, and answers as
// before. Warm-up is off (its pages take minutes on this model on a
// shared CPU; TestWarmUpShapes covers it): the figures are the model's and
// its passes', not warm-up's.
func TestUnloadRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 345 MB checkpoint and runs daemons of their own")
	}
	t.Setenv(daemonNoWarmupEnv, "1")
	dir, weights := writeBigDecisionModel(t)
	base := startRSSDaemonOn(t, filepath.Join(t.TempDir(), "none"), api.StateFailed)
	baseRSS, _ := base.memory(t)

	d := startRSSDaemonOn(t, dir, api.StateReady)
	c, err := ipc.Dial(context.Background(), d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ask := func(n int) *api.Response {
		t.Helper()
		var resp api.Response
		js := fmt.Sprintf(`{"evidence": {"page": "row %d: item %d, qty %d"}, "questions": {"q": {"type": "noul", "instructions": "Is the item in stock?"}, "s": {"type": "score", "instructions": "How many?", "criteria": ["none", "some", "many"]}}}`, n, n*7, n%5)
		if err := c.Call(ctx, api.MethodDecide, params(t, js), &resp); err != nil {
			t.Fatal(err)
		}
		return &resp
	}
	var first *api.Response
	for i := range 8 {
		r := ask(i)
		if i == 0 {
			first = r
		}
	}
	loaded, _ := d.memory(t)
	var st api.Status
	if err := c.Call(ctx, api.MethodUnload, nil, &st); err != nil || st.State != api.StateUnloaded {
		t.Fatalf("unload: %v, state %s", err, st.State)
	}
	unloaded := loaded
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) { // the system may take a moment
		if unloaded, _ = d.memory(t); unloaded <= baseRSS+100<<20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	again := ask(0)
	reloaded, _ := d.memory(t)
	t.Logf("weights %d MB; resident: no model %d MB, loaded and used %d MB, unloaded %d MB, reloaded %d MB",
		weights>>20, baseRSS>>20, loaded>>20, unloaded>>20, reloaded>>20)
	if loaded < baseRSS+weights*3/4 {
		t.Errorf("loaded, the daemon holds %d MB, its base %d MB: the weights (%d MB) are not resident", loaded>>20, baseRSS>>20, weights>>20)
	}
	if unloaded > baseRSS+100<<20 {
		t.Errorf("unloaded, the daemon holds %d MB, more than 100 MB over its base of %d MB", unloaded>>20, baseRSS>>20)
	}
	if reloaded < baseRSS+weights*3/4 {
		t.Errorf("reloaded, the daemon holds %d MB, its base %d MB: the weights are not resident again", reloaded>>20, baseRSS>>20)
	}
	if err := sameAnswers(again, first, 1e-9); err != nil {
		t.Errorf("answered differently after the reload: %v", err)
	}
}
