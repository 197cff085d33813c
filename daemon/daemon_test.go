package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// startDaemon runs a daemon on a fresh socket until the test ends.
func startDaemon(t *testing.T, opts Options) string {
	t.Helper()
	return startRun(t, RunOptions{Daemon: opts})
}

// startRun runs Run with o on a fresh socket until the test ends, and
// checks that shutdown removes the socket.
func startRun(t *testing.T, o RunOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "d.sock") // Listen makes run/ 0700
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	done := make(chan error, 1)
	o.Socket, o.Listening = path, func(string) { close(listening) }
	go func() { done <- Run(ctx, o) }()
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("socket left behind after shutdown: %v", err)
		}
	})
	return path
}

func dial(t *testing.T, path string) *ipc.Client {
	t.Helper()
	c, err := ipc.Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// request builds a decision request whose answer depends on n.
func request(n int) string {
	return fmt.Sprintf(`{"evidence":{"n":%d},"questions":{"b":{"type":"noul","instructions":"is %d even?"},`+
		`"a":{"type":"score","instructions":"how big is %d?","criteria":["small","mid","big"]}}}`, n, n, n)
}

func params(t testing.TB, js string) msgpack.RawMessage {
	t.Helper()
	raw, err := ipc.FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// duplicateKeys returns the params {"evidence":{"a":1,"a":2},"questions":
// {"q":{"type":"noul","instructions":"x"}}}, which no JSON reader of ours
// lets through: the key "b" of the same request renamed in its msgpack.
func duplicateKeys(t testing.TB) msgpack.RawMessage {
	raw := params(t, `{"evidence":{"a":1,"b":2},"questions":{"q":{"type":"noul","instructions":"x"}}}`)
	return bytes.Replace(raw, []byte{0xa1, 'b'}, []byte{0xa1, 'a'}, 1)
}

// checkAnswer compares a daemon response with the fake model's own answer.
func checkAnswer(t testing.TB, got *api.Response, tags []int, js string) error {
	r, err := decide.ParseJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if got.Tokens != tag {
			continue
		}
		want, _ := fakeAnswer(tag, r)
		return sameAnswers(got, WireResponse(want), 1e-12)
	}
	return fmt.Errorf("answered by model %d, want one of %v", got.Tokens, tags)
}

func TestDecideAndMethods(t *testing.T) {
	fl := newFakeLoader()
	models := t.TempDir()
	for _, name := range []string{"beta", "alpha"} {
		dir := filepath.Join(models, name)
		os.Mkdir(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
		os.WriteFile(filepath.Join(dir, "decision_config.json"), []byte("{}"), 0o644)
	}
	os.Mkdir(filepath.Join(models, "not-a-model"), 0o755)
	path := startDaemon(t, Options{Load: fl.load, ModelsDir: models})
	c := dial(t, path)
	ctx := context.Background()

	var pong string
	if err := c.Call(ctx, api.MethodPing, nil, &pong); err != nil || pong != "pong" {
		t.Fatalf("ping: %q %v", pong, err)
	}
	var resp api.Response
	if err := c.Call(ctx, api.MethodDecide, params(t, request(7)), &resp); err != nil {
		t.Fatal(err)
	}
	if err := checkAnswer(t, &resp, []int{1}, request(7)); err != nil {
		t.Fatal(err)
	}
	if resp.Answers[0].Name != "b" || resp.Answers[1].Name != "a" {
		t.Errorf("question order %s, %s; want the request's b, a", resp.Answers[0].Name, resp.Answers[1].Name)
	}

	var st api.Status
	if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.State != api.StateReady || st.Model.Backend != "fake" || st.Model.Name != "demo-decision" || st.Model.Int8 ||
		st.SnapshotBytes != 123 || st.SnapshotLimit != 456 || st.RequestsServed != 1 || st.LatencyP50MS <= 0 || st.UptimeS <= 0 {
		t.Errorf("status %+v", st)
	}

	var list []api.ModelEntry
	if err := c.Call(ctx, api.MethodModels, nil, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list {
		names = append(names, fmt.Sprintf("%s:%v", m.Name, m.Current))
	}
	if got := strings.Join(names, " "); got != "demo:true alpha:false beta:false" {
		t.Errorf("models %s", got)
	}

	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "alpha"}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Model.Path != filepath.Join(models, "alpha") {
		t.Errorf("after load alpha, status model %+v", st.Model)
	}
	if err := c.Call(ctx, api.MethodDecide, params(t, request(8)), &resp); err != nil {
		t.Fatal(err)
	}
	if err := checkAnswer(t, &resp, []int{2}, request(8)); err != nil {
		t.Fatalf("after the switch: %v", err)
	}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "nope"}, nil); api.ErrorCode(err) != api.CodeInvalidParams {
		t.Errorf("load of an unknown name: %v", err)
	}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: filepath.Join(models, "not-a-model")}, nil); api.ErrorCode(err) != api.CodeInvalidParams {
		t.Errorf("load of a non-checkpoint: %v", err)
	}
	if p := fl.engine("").problems(); len(p) > 0 {
		t.Errorf("the first model was misused: %v", p)
	}
	if !fl.engine("").closed {
		t.Error("the replaced model was not closed")
	}
}

func TestBadParams(t *testing.T) {
	path := startDaemon(t, Options{Load: newFakeLoader().load})
	c := dial(t, path)
	ctx := context.Background()
	cases := []struct {
		name   string
		method string
		params any
		code   api.Code
	}{
		{"no params", api.MethodDecide, nil, api.CodeInvalidParams},
		{"params not a map", api.MethodDecide, []int{1, 2}, api.CodeInvalidParams},
		{"questions wrong type", api.MethodDecide, params(t, `{"evidence":{},"questions":[1]}`), api.CodeInvalidParams},
		{"instructions wrong type", api.MethodDecide, params(t, `{"evidence":{},"questions":{"q":{"type":"noul","instructions":5}}}`), api.CodeInvalidParams},
		{"unknown question type", api.MethodDecide, params(t, `{"evidence":{},"questions":{"q":{"type":"maybe","instructions":"x"}}}`), api.CodeInvalidParams},
		{"duplicate keys", api.MethodDecide, duplicateKeys(t), api.CodeInvalidParams},
		{"engine failure", api.MethodDecide, params(t, `{"evidence":{},"questions":{"q":{"type":"noul","instructions":"explode"}}}`), api.CodeInternal},
		{"batch not a list", api.MethodDecideBatch, params(t, `{"x":1}`), api.CodeInvalidParams},
		{"load params wrong", api.MethodLoad, params(t, `{"model":5}`), api.CodeInvalidParams},
		{"unknown method", "decide2", nil, api.CodeUnknownMethod},
	}
	for _, c2 := range cases {
		err := c.Call(ctx, c2.method, c2.params, nil)
		if api.ErrorCode(err) != c2.code || err == nil {
			t.Errorf("%s: %v, want code %s", c2.name, err, c2.code)
		}
	}
	// The connection and daemon still work.
	var resp api.Response
	if err := c.Call(ctx, api.MethodDecide, params(t, request(1)), &resp); err != nil {
		t.Fatal(err)
	}
}

func TestDecideBatchMixed(t *testing.T) {
	path := startDaemon(t, Options{Load: newFakeLoader().load})
	c := dial(t, path)
	batch := "[" + request(1) + `,{"evidence":1,"questions":{"q":{"type":"noul"}}},` + request(2) + "]"
	var out struct {
		Responses []msgpack.RawMessage `json:"responses"`
	}
	if err := c.Call(context.Background(), api.MethodDecideBatch, params(t, batch), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Responses) != 3 {
		t.Fatalf("%d items, want 3", len(out.Responses))
	}
	for i, n := range map[int]int{0: 1, 2: 2} {
		var r api.Response
		if err := ipc.Unmarshal(out.Responses[i], &r); err != nil {
			t.Fatal(err)
		}
		if err := checkAnswer(t, &r, []int{1}, request(n)); err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	var bad struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := ipc.Unmarshal(out.Responses[1], &bad); err != nil || bad.Error.Code != string(api.CodeInvalidParams) ||
		!strings.Contains(bad.Error.Message, "instructions") {
		t.Errorf("item 1: %+v %v", bad, err)
	}
}

// TestWaitsWhileLoading: the socket answers at once, status says loading
// then warming, and a decision sent meanwhile waits and is answered.
func TestWaitsWhileLoading(t *testing.T) {
	fl := newFakeLoader()
	fl.loadGate = make(chan struct{})
	eng := fl.engine("")
	eng.gate = make(chan struct{})
	path := startDaemon(t, Options{Load: fl.load})
	c := dial(t, path)
	ctx := context.Background()
	state := func() string {
		var st api.Status
		if err := c.Call(ctx, api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		return st.State
	}
	if s := state(); s != api.StateLoading {
		t.Fatalf("state %s, want loading", s)
	}
	answered := make(chan error, 1)
	go func() {
		var resp api.Response
		err := c.Call(ctx, api.MethodDecide, params(t, request(3)), &resp)
		if err == nil {
			err = checkAnswer(t, &resp, []int{1}, request(3))
		}
		answered <- err
	}()
	close(fl.loadGate)
	waitFor(t, func() bool { return state() == api.StateWarming })
	select {
	case err := <-answered:
		t.Fatalf("answered before the model was ready: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(eng.gate)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if s := state(); s != api.StateReady {
		t.Fatalf("state %s, want ready", s)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitForWithin(t, 5*time.Second, cond)
}

// waitForWithin is waitFor with another deadline.
func waitForWithin(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached in %v", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLoadFailure(t *testing.T) {
	fl := newFakeLoader()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	fl.fail = bad
	path := startDaemon(t, Options{Load: fl.load, Model: bad, ModelsDir: dir})
	c := dial(t, path)
	ctx := context.Background()
	var st api.Status
	waitFor(t, func() bool { c.Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateFailed })
	if !strings.Contains(st.Error, "no such checkpoint") {
		t.Errorf("status error %q", st.Error)
	}
	if err := c.Call(ctx, api.MethodDecide, params(t, request(1)), nil); api.ErrorCode(err) != api.CodeModelLoadFailed {
		t.Fatalf("decide with no model: %v", err)
	}
	// Switching to a good model recovers.
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "demo"}, &st); err != nil || st.State != api.StateReady {
		t.Fatalf("load demo: %v %+v", err, st)
	}
	// A failed switch keeps the model in service.
	for _, f := range []string{"config.json", "decision_config.json"} {
		os.MkdirAll(bad, 0o755)
		os.WriteFile(filepath.Join(bad, f), []byte("{}"), 0o644)
	}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: bad}, nil); api.ErrorCode(err) != api.CodeModelLoadFailed {
		t.Fatalf("failed switch: %v", err)
	}
	var resp api.Response
	if err := c.Call(ctx, api.MethodDecide, params(t, request(2)), &resp); err != nil {
		t.Fatalf("decide after a failed switch: %v", err)
	}
	c.Call(ctx, api.MethodStatus, nil, &st)
	if st.State != api.StateReady || st.Model.Name != "demo-decision" || st.Error == "" {
		t.Errorf("status after a failed switch: %+v", st)
	}
	// So does a load that panics: the daemon survives it, and says so.
	fl.panicOn = bad
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: bad}, nil); api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), "the loader panicked: the fake loader fell over") {
		t.Fatalf("panicking switch: %v", err)
	}
	if err := c.Call(ctx, api.MethodDecide, params(t, request(3)), &resp); err != nil {
		t.Fatalf("decide after a panicking switch: %v", err)
	}
	c.Call(ctx, api.MethodStatus, nil, &st)
	if st.State != api.StateReady || st.Model.Name != "demo-decision" || !strings.Contains(st.Error, "panicked") {
		t.Errorf("status after a panicking switch: %+v", st)
	}
}

// TestConcurrentClientsAndSwitch: 16 clients send requests at once while
// the model is switched twice; every request is answered correctly by one of
// the models, rows from many clients share batches, and no model is closed
// while a batch runs on it.
func TestConcurrentClientsAndSwitch(t *testing.T) {
	fl := newFakeLoader()
	fl.delay = 2 * time.Millisecond
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "config.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(other, "decision_config.json"), []byte("{}"), 0o644)
	path := startDaemon(t, Options{Load: fl.load, NoWarmup: true, ModelsDir: dir})
	ctl := dial(t, path)
	ctx := context.Background()
	var st api.Status
	waitFor(t, func() bool { ctl.Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateReady })

	const clients, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, path)
			for i := range each {
				n := g*each + i
				var resp api.Response
				if err := c.Call(ctx, api.MethodDecide, params(t, request(n)), &resp); err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", g, i, err)
					continue
				}
				if err := checkAnswer(t, &resp, []int{1, 2}, request(n)); err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", g, i, err)
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	for _, m := range []string{"other", "demo"} {
		if err := ctl.Call(ctx, api.MethodLoad, api.LoadParams{Model: m}, nil); err != nil {
			t.Fatalf("switch to %s: %v", m, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total, maxBatch := 0, 0
	demos, others := fl.all(""), fl.all(other)
	if len(demos) != 2 || len(others) != 1 {
		t.Fatalf("%d demo and %d other models loaded, want 2 and 1", len(demos), len(others))
	}
	engines := []*fakeEngine{demos[0], others[0], demos[1]} // in order of service
	for i, e := range engines {
		if p := e.problems(); len(p) > 0 {
			t.Errorf("model %d misused: %v", i, p)
		}
		e.mu.Lock()
		total += e.requests
		for _, b := range e.batches {
			maxBatch = max(maxBatch, b)
		}
		if i < 2 && !e.closed {
			t.Errorf("replaced model %d not closed", i)
		}
		e.mu.Unlock()
	}
	if total != clients*each {
		t.Errorf("the engines saw %d requests, want %d", total, clients*each)
	}
	if maxBatch < 2 {
		t.Errorf("largest batch %d: requests from different clients were never batched", maxBatch)
	}
}

func TestOverloaded(t *testing.T) {
	fl := newFakeLoader()
	eng := fl.engine("")
	path := startDaemon(t, Options{Load: fl.load, NoWarmup: true, QueueLimit: 2, MaxBatch: 1})
	c := dial(t, path)
	ctx := context.Background()
	var st api.Status
	waitFor(t, func() bool { c.Call(ctx, api.MethodStatus, nil, &st); return st.State == api.StateReady })
	big := "[" + request(1) + "," + request(2) + "," + request(3) + "]"
	if err := c.Call(ctx, api.MethodDecideBatch, params(t, big), nil); api.ErrorCode(err) != api.CodeInvalidParams {
		t.Fatalf("a batch larger than the queue: %v", err)
	}
	eng.mu.Lock()
	eng.gate = make(chan struct{})
	eng.mu.Unlock()
	results := make(chan error, 3)
	for i := range 3 {
		go func() { results <- c.Call(ctx, api.MethodDecide, params(t, request(i)), nil) }()
		// one runs (blocked on the gate), two wait in the queue
		if i == 0 {
			waitFor(t, func() bool { eng.mu.Lock(); defer eng.mu.Unlock(); return eng.active == 1 })
		}
	}
	waitFor(t, func() bool { c.Call(ctx, api.MethodStatus, nil, &st); return st.Queued == 2 })
	if err := c.Call(ctx, api.MethodDecide, params(t, request(9)), nil); api.ErrorCode(err) != api.CodeOverloaded {
		t.Fatalf("decide on a full queue: %v", err)
	}
	close(eng.gate)
	for range 3 {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
}
