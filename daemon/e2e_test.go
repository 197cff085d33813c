package daemon

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/goldens"
	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/model/safetensors"
	"github.com/vmihailenco/msgpack/v5"
)

// goldenCase is one case of testdata/goldens/decide-demo.json.
type goldenCase = goldens.DecideCase

func loadGoldens(t testing.TB) []goldenCase {
	t.Helper()
	cases, err := goldens.DecideDemo(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// checkGolden compares a response with a golden case within tol.
func checkGolden(resp *api.Response, gc *goldenCase, tol float64) error {
	if len(resp.Answers) != len(gc.Answers) {
		return fmt.Errorf("%d answers, want %d", len(resp.Answers), len(gc.Answers))
	}
	for name, want := range gc.Answers {
		a := resp.Answers.Get(name)
		if a == nil || len(a.Probs) != len(want.Probs) {
			return fmt.Errorf("question %s: answer %+v, want %d probs", name, a, len(want.Probs))
		}
		for i := range want.Probs {
			if math.Abs(a.Probs[i]-want.Probs[i]) > tol {
				return fmt.Errorf("question %s: probs %v, want %v (within %g)", name, a.Probs, want.Probs, tol)
			}
		}
	}
	return nil
}

// startDemoDaemon runs a real daemon (CPU backend, embedded demo model) and
// waits until it is ready.
func startDemoDaemon(t *testing.T) string {
	t.Helper()
	path := startRun(t, RunOptions{Daemon: Options{Load: DecideLoader(LoaderOptions{}), ModelsDir: t.TempDir()},
		Server: ipc.ServerOptions{ReadTimeout: 300 * time.Millisecond}})
	c := dial(t, path)
	var st api.Status
	waitForWithin(t, time.Minute, func() bool { // warm-up's pages take seconds on a shared machine
		if err := c.Call(context.Background(), api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.State == api.StateFailed {
			t.Fatalf("the demo model failed to load: %s", st.Error)
		}
		return st.State == api.StateReady
	})
	if st.Model.Backend == "" || st.Model.Int8 || st.SnapshotLimit <= 0 {
		t.Errorf("status of the ready daemon: %+v", st)
	}
	return path
}

// TestEndToEndGoldens sends every decide-demo.json request through the
// socket, one by one and as one decide_batch, and compares the answers with
// the reference probabilities.
func TestEndToEndGoldens(t *testing.T) {
	cases := loadGoldens(t)
	path := startDemoDaemon(t)
	c := dial(t, path)
	ctx := context.Background()
	var batch []byte
	batch = append(batch, '[')
	for i := range cases {
		var resp api.Response
		if err := c.Call(ctx, api.MethodDecide, params(t, string(cases[i].Request)), &resp); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := checkGolden(&resp, &cases[i], 1e-4); err != nil {
			t.Errorf("case %d: %v", i, err)
		}
		if i > 0 {
			batch = append(batch, ',')
		}
		batch = append(batch, cases[i].Request...)
	}
	batch = append(batch, ']')
	var out api.BatchResult
	if err := c.Call(ctx, api.MethodDecideBatch, params(t, string(batch)), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Responses) != len(cases) {
		t.Fatalf("decide_batch: %d responses, want %d", len(out.Responses), len(cases))
	}
	for i, raw := range out.Responses {
		var resp api.Response
		if err := ipc.Unmarshal(raw, &resp); err != nil {
			t.Fatal(err)
		}
		if err := checkGolden(&resp, &cases[i], 1e-4); err != nil {
			t.Errorf("decide_batch item %d: %v", i, err)
		}
	}
}

// TestEndToEndBadInput sends each kind of bad input to the real daemon and
// checks after each that another client still gets the goldens' answers.
func TestEndToEndBadInput(t *testing.T) {
	cases := loadGoldens(t)
	path := startDemoDaemon(t)
	good := dial(t, path)
	stillGood := func(t *testing.T) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp api.Response
		if err := good.Call(ctx, api.MethodDecide, params(t, string(cases[0].Request)), &resp); err != nil {
			t.Fatalf("the other client: %v", err)
		}
		if err := checkGolden(&resp, &cases[0], 1e-4); err != nil {
			t.Fatalf("the other client: %v", err)
		}
	}
	frameOf := func(body []byte) []byte { f, _ := ipc.AppendFrame(nil, body); return f }
	reqFrame := func(kv ...any) []byte {
		b, err := msgpack.Marshal(orderedKV(kv))
		if err != nil {
			t.Fatal(err)
		}
		return frameOf(b)
	}
	wrongTypes := params(t, `{"evidence":{"a":1},"questions":{"q":{"type":"score","instructions":"x","criteria":[1,2]}}}`)
	tests := []struct {
		name string
		data []byte
		code api.Code // "" = the connection is closed
	}{
		{"garbage bytes", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), api.CodeFrameTooLarge},
		{"truncated frame", append(binary.BigEndian.AppendUint32(nil, 100), 0x83, 0xa2), ""},
		{"oversize length", []byte{0xff, 0xff, 0xff, 0xff}, api.CodeFrameTooLarge},
		{"wrong method", reqFrame("id", 1, "method", "decidе"), api.CodeUnknownMethod},
		{"method of wrong type", reqFrame("id", 1, "method", true), api.CodeBadRequest},
		{"params of wrong types", reqFrame("id", 1, "method", "decide", "params", wrongTypes), api.CodeInvalidParams},
		{"params not a map", reqFrame("id", 1, "method", "decide", "params", "evidence"), api.CodeInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			body, err := ipc.ReadFrame(conn, ipc.DefaultFrameLimit)
			if tc.code == "" {
				if err == nil {
					t.Fatalf("got a response, want the connection closed")
				}
			} else {
				if err != nil {
					t.Fatalf("no response: %v", err)
				}
				var resp struct {
					Error struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				if err := ipc.Unmarshal(body, &resp); err != nil || resp.Error.Code != string(tc.code) {
					t.Fatalf("response %x (%v), want error %s", body, err, tc.code)
				}
			}
			stillGood(t)
		})
	}
	t.Run("disconnect mid-request", func(t *testing.T) {
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cases {
			conn.Write(reqFrame("id", i, "method", "decide", "params", params(t, string(cases[i].Request))))
		}
		conn.Close()
		stillGood(t)
	})
}

// orderedKV encodes alternating keys and values as a map in that order.
type orderedKV []any

func (o orderedKV) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(len(o) / 2); err != nil {
		return err
	}
	for _, x := range o {
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	return nil
}

// TestEndToEndLoad: 16 clients × 100 requests at once, with a model switch
// in the middle, all answered without error and each within 1e-5 of the
// answer the same request got alone.
func TestEndToEndLoad(t *testing.T) {
	cases := loadGoldens(t)
	path := startDemoDaemon(t)
	ctl := dial(t, path)
	ctx := context.Background()
	// The serial answers, from the short cases only: the test is about the
	// daemon under load, and short requests keep its CPU time modest.
	var raws []msgpack.RawMessage
	var serial []api.Response
	for i := range cases {
		raw := params(t, string(cases[i].Request))
		var resp api.Response
		if err := ctl.Call(ctx, api.MethodDecide, raw, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Tokens+resp.CachedTokens <= 150 {
			raws = append(raws, raw)
			serial = append(serial, resp)
		}
	}
	if len(raws) < 4 {
		t.Fatalf("only %d short golden cases", len(raws))
	}
	const clients, each = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	var progress sync.WaitGroup
	progress.Add(clients)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, path)
			for i := range each {
				if i == each/4 {
					progress.Done()
				}
				k := (g*7 + i) % len(raws)
				var resp api.Response
				if err := c.Call(ctx, api.MethodDecide, raws[k], &resp); err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", g, i, err)
					continue
				}
				if err := sameAnswers(&resp, &serial[k], 1e-5); err != nil {
					errs <- fmt.Errorf("client %d request %d (case %d): %w", g, i, k, err)
				}
			}
		}()
	}
	// Switch to the same checkpoint read from disk while the load runs.
	progress.Wait()
	var st api.Status
	demoDir, err := filepath.Abs(filepath.Join("..", "testdata", "demo-decision"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Call(ctx, api.MethodLoad, api.LoadParams{Model: demoDir}, &st); err != nil {
		t.Fatalf("switch under load: %v", err)
	}
	if st.Model.Path == DemoPath {
		t.Errorf("status after the switch still names the embedded model: %+v", st.Model)
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d requests failed", n, clients*each)
	}
	if err := ctl.Call(ctx, api.MethodStatus, nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.RequestsServed < clients*each+uint64(len(cases)) {
		t.Errorf("status counts %d requests served, want at least %d", st.RequestsServed, clients*each+len(cases))
	}
	t.Logf("served %d, p50 %.2f ms, p99 %.2f ms", st.RequestsServed, st.LatencyP50MS, st.LatencyP99MS)
}

// sameAnswers compares two responses' probabilities.
func sameAnswers(got, want *api.Response, tol float64) error {
	if len(got.Answers) != len(want.Answers) {
		return fmt.Errorf("%d answers, want %d", len(got.Answers), len(want.Answers))
	}
	for i, w := range want.Answers {
		g := got.Answers[i]
		if g.Name != w.Name || len(g.Probs) != len(w.Probs) {
			return fmt.Errorf("answer %d: %s with %d probs, want %s with %d", i, g.Name, len(g.Probs), w.Name, len(w.Probs))
		}
		for k := range w.Probs {
			if math.Abs(g.Probs[k]-w.Probs[k]) > tol {
				return fmt.Errorf("%s: probs %v, want %v", w.Name, g.Probs, w.Probs)
			}
		}
	}
	return nil
}

// copyDemo copies the demo checkpoint to a new directory, letting edit
// change its config.json (as a map) and its weights file's bytes.
func copyDemo(t *testing.T, edit func(cfg map[string]any, weights []byte)) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "demo-decision")
	dst := filepath.Join(t.TempDir(), "ckpt")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		switch e.Name() {
		case "config.json":
			var cfg map[string]any
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			edit(cfg, nil)
			if data, err = json.Marshal(cfg); err != nil {
				t.Fatal(err)
			}
		case "model.safetensors":
			edit(nil, data)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestEndToEndBadCheckpoints switches the real daemon to checkpoints that
// must not load (among them configs that claimed so many layers that they
// took a daemon down with "runtime: out of memory"): each load fails with
// model_load_failed saying why, and the demo model goes on answering.
func TestEndToEndBadCheckpoints(t *testing.T) {
	cases := loadGoldens(t)
	path := startDemoDaemon(t)
	c := dial(t, path)
	ctx := context.Background()
	layers := func(n float64) func(cfg map[string]any, _ []byte) {
		return func(cfg map[string]any, _ []byte) {
			if cfg != nil {
				cfg["num_hidden_layers"] = n
				delete(cfg, "layer_types")
			}
		}
	}
	for _, bc := range []struct {
		name string
		dir  string
		want string
	}{
		{"a billion layers", copyDemo(t, layers(1e9)), "num_hidden_layers: is 1000000000, more than the 1024 this engine takes"},
		{"ten million layers", copyDemo(t, layers(1e7)), "num_hidden_layers: is 10000000, more than the 1024 this engine takes"},
		{"more layers than stored", copyDemo(t, layers(1000)), "num_hidden_layers is 1000, but the checkpoint's tensors hold 6 layers"},
		{"NaN weights", copyDemo(t, nanNorm(t)), "warm-up: warm-up request 0: question \"q\": model produces non-finite logits (NaN); the checkpoint is damaged"},
	} {
		err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: bc.dir}, nil)
		if api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), bc.want) {
			t.Errorf("%s: load: %v, want model_load_failed saying %q", bc.name, err, bc.want)
		}
		var st api.Status
		if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.State != api.StateReady || st.Model.Path != DemoPath || !strings.Contains(st.Error, bc.want) {
			t.Errorf("%s: status after the failed load: %+v", bc.name, st)
		}
		var resp api.Response
		if err := c.Call(ctx, api.MethodDecide, params(t, string(cases[0].Request)), &resp); err != nil {
			t.Fatalf("%s: decide after the failed load: %v", bc.name, err)
		}
		if err := checkGolden(&resp, &cases[0], 1e-4); err != nil {
			t.Errorf("%s: after the failed load: %v", bc.name, err)
		}
	}
}

// nanNorm is a copyDemo edit that overwrites the final norm's weights with
// NaN, as flipped bytes would.
func nanNorm(t *testing.T) func(cfg map[string]any, weights []byte) {
	return func(_ map[string]any, weights []byte) {
		if weights == nil {
			return
		}
		f, err := safetensors.Parse("model.safetensors", weights) // its tensors alias weights
		if err != nil {
			t.Fatal(err)
		}
		info := f.Tensor("model.norm.weight")
		if info == nil || info.DType.Size() != 2 {
			t.Fatal("no bf16 model.norm.weight in the demo checkpoint")
		}
		for k := 0; k < len(info.Data); k += 2 {
			binary.LittleEndian.PutUint16(info.Data[k:], 0x7fc0) // a bf16 NaN
		}
	}
}

// TestEndToEndNonFiniteAnswer serves a NaN-weights checkpoint without
// warm-up: every decision must fail with internal naming the question, never
// carry NaN probabilities.
func TestEndToEndNonFiniteAnswer(t *testing.T) {
	dir := copyDemo(t, nanNorm(t))
	path := startRun(t, RunOptions{Daemon: Options{Load: DecideLoader(LoaderOptions{}), Model: dir, NoWarmup: true, ModelsDir: t.TempDir()}})
	c := dial(t, path)
	ctx := context.Background()
	var st api.Status
	waitFor(t, func() bool {
		c.Call(ctx, api.MethodStatus, nil, &st)
		return st.State == api.StateReady || st.State == api.StateFailed
	})
	req := `{"evidence": {"a": 1}, "questions": {"first": {"type": "noul", "instructions": "Is a one?"}, "second": {"type": "score", "instructions": "How big?", "criteria": ["small", "big"]}}}`
	var resp api.Response
	err := c.Call(ctx, api.MethodDecide, params(t, req), &resp)
	if api.ErrorCode(err) != api.CodeInternal || !strings.Contains(err.Error(), `question "first": model produces non-finite logits (NaN)`) {
		t.Fatalf("decide on NaN weights: %v (answers %+v), want internal naming the question", err, resp.Answers)
	}
	var out api.BatchResult
	if err := c.Call(ctx, api.MethodDecideBatch, params(t, "["+req+"]"), &out); err != nil || len(out.Responses) != 1 {
		t.Fatalf("decide_batch on NaN weights: %v", err)
	}
	js, err := ipc.ToJSON(out.Responses[0])
	if err != nil || !strings.Contains(string(js), `"code":"internal"`) || !strings.Contains(string(js), "non-finite") {
		t.Errorf("decide_batch item on NaN weights: %s (%v)", js, err)
	}
}

// TestEndToEndZeroShot switches a real daemon from the demo model to
// tiny-qwen35, a chat checkpoint without a decision config, by its name in
// the models folder, and checks that status says which one is calibrated,
// that the listing agrees, and that the zero-shot model answers.
func TestEndToEndZeroShot(t *testing.T) {
	ctx := context.Background()
	chat, err := filepath.Abs(filepath.Join("..", "testdata", "tiny-qwen35"))
	if err != nil {
		t.Fatal(err)
	}
	models := t.TempDir()
	if err := os.Symlink(chat, filepath.Join(models, "chat")); err != nil {
		t.Fatal(err)
	}
	path := startRun(t, RunOptions{Daemon: Options{Load: DecideLoader(LoaderOptions{}), ModelsDir: models, NoWarmup: true}})
	c := dial(t, path)
	var st api.Status
	waitFor(t, func() bool {
		if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		return st.State == api.StateReady
	})
	if !st.Model.Calibrated {
		t.Errorf("the demo model is reported uncalibrated: %+v", st.Model)
	}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "chat"}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Model.Name != "chat" || st.Model.Calibrated {
		t.Errorf("after load chat: %+v, want chat, uncalibrated", st.Model)
	}
	if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil || st.Model.Calibrated {
		t.Errorf("status of the zero-shot model: %+v, %v", st.Model, err)
	}
	var list []api.ModelEntry
	if err := c.Call(ctx, api.MethodModels, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !list[0].Calibrated || list[1].Name != "chat" || list[1].Calibrated || !list[1].Current || list[1].Unloadable != "" {
		t.Errorf("models: %+v", list)
	}
	var resp api.Response
	req := `{"evidence": {"a": 1}, "questions": {"q": {"type": "noul", "instructions": "Is a one?"}}}`
	if err := c.Call(ctx, api.MethodDecide, params(t, req), &resp); err != nil {
		t.Fatal(err)
	}
	if a := resp.Answers.Get("q"); a == nil || len(a.Probs) != 3 {
		t.Errorf("zero-shot answer: %+v", resp)
	}
}
