package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/tensor"
)

// status returns the daemon's status, decoded into a fresh value.
func status(t *testing.T, c *ipc.Client) api.Status {
	t.Helper()
	var st api.Status
	if err := c.Call(context.Background(), api.MethodStatus, nil, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitReady waits until the daemon serves a model and returns its status.
func waitReady(t *testing.T, c *ipc.Client) api.Status {
	t.Helper()
	var st api.Status
	waitForWithin(t, time.Minute, func() bool { // warm-up's pages take seconds on a shared machine
		st = status(t, c)
		if st.State == api.StateFailed {
			t.Fatalf("the model failed to load: %s", st.Error)
		}
		return st.State == api.StateReady
	})
	return st
}

// TestLoadInt8 checks the int8 setting through the load method: Options.Int8
// loads the first model with int8, a load that does not say keeps the
// setting, "int8": false and true change it, and a load the backend must
// refuse fails with its reason, leaving the model in service and its
// setting as they were.
func TestLoadInt8(t *testing.T) {
	fl := newFakeLoader()
	models := t.TempDir()
	dir := filepath.Join(models, "alpha")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "decision_config.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := startDaemon(t, Options{Load: fl.load, ModelsDir: models, Int8: true, NoWarmup: true})
	c := dial(t, path)
	ctx := context.Background()
	st := waitReady(t, c)
	if !st.Model.Int8 || st.Model.Int8Kernel != "fake-int8" || st.Model.Int8Summary() != "on (fake-int8)" {
		t.Fatalf("started with Int8: model %+v", st.Model)
	}
	off, on := false, true
	for _, step := range []struct {
		p    api.LoadParams
		want bool
	}{
		{api.LoadParams{Model: "alpha"}, true},              // kept across a switch
		{api.LoadParams{Model: "alpha", Int8: &off}, false}, // turned off
		{api.LoadParams{Model: "demo"}, false},              // kept off
		{api.LoadParams{Model: "demo", Int8: &on}, true},
	} {
		st = api.Status{} // a reply leaves out empty fields: decode into a fresh value
		if err := c.Call(ctx, api.MethodLoad, step.p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Model.Int8 != step.want || (st.Model.Int8Kernel != "") != step.want {
			t.Errorf("load %s (int8 %v): model %+v, want int8 %v", step.p.Model, step.p.Int8, st.Model, step.want)
		}
	}

	// A backend without int8: the refusal, with its reason.
	fl.noInt8 = "backend fake has no int8 matrix products"
	st = api.Status{}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "alpha", Int8: &off}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Model.Int8Summary() != "unavailable — backend fake has no int8 matrix products" {
		t.Errorf("float load on a backend without int8: %q", st.Model.Int8Summary())
	}
	err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "demo", Int8: &on}, nil)
	if api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), "has no int8 matrix products") {
		t.Fatalf("int8 load on a backend without int8: %v", err)
	}
	st = status(t, c)
	if st.State != api.StateReady || st.Model.Path != filepath.Join(models, "alpha") || st.Model.Int8 {
		t.Errorf("after the refused load the old model should serve, in float: %+v", st.Model)
	}
	st = api.Status{}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "demo"}, &st); err != nil || st.Model.Int8 {
		t.Errorf("a load that does not say after the refusal: %v, model %+v (want the float setting kept)", err, st.Model)
	}
}

// TestInt8EndToEnd serves the demo model with int8 projections on the CPU
// backend: status names the kernel and fewer weight bytes than the float
// model's, the golden requests are answered within the int8 gate of their
// reference probabilities, and "int8": false reloads it in float, exactly.
func TestInt8EndToEnd(t *testing.T) {
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kernel, _ := be.Int8Kernel()
	path := startRun(t, RunOptions{Daemon: Options{Load: DecideLoader(LoaderOptions{}), ModelsDir: t.TempDir(), Int8: true}})
	c := dial(t, path)
	ctx := context.Background()
	st := waitReady(t, c)
	if !st.Model.Int8 || st.Model.Int8Kernel != kernel || st.Model.Int8Unavailable != "" || st.Memory.Weights <= 0 {
		t.Fatalf("status model %+v, want int8 on with kernel %s", st.Model, kernel)
	}
	int8Bytes := st.Memory.Weights
	cases := loadGoldens(t)
	for i := range cases {
		var resp api.Response
		if err := c.Call(ctx, api.MethodDecide, params(t, string(cases[i].Request)), &resp); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := checkGolden(&resp, &cases[i], 0.08); err != nil {
			t.Errorf("case %d with int8: %v", i, err)
		}
	}
	off := false
	st = api.Status{}
	if err := c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "demo", Int8: &off}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Model.Int8 || st.Memory.Weights <= int8Bytes || st.Model.Int8Summary() != "off" {
		t.Errorf("after int8 false: model %+v, weights %d bytes (int8 weights were %d bytes)", st.Model, st.Memory.Weights, int8Bytes)
	}
	var resp api.Response
	if err := c.Call(ctx, api.MethodDecide, params(t, string(cases[0].Request)), &resp); err != nil {
		t.Fatal(err)
	}
	if err := checkGolden(&resp, &cases[0], 1e-4); err != nil {
		t.Errorf("in float again: %v", err)
	}
}

// TestDecideLoaderInt8Refused runs the real loader on a backend without
// int8 products: a float load says int8 is unavailable and why, an int8
// load fails with that reason.
func TestDecideLoaderInt8Refused(t *testing.T) {
	newBackend := func() (tensor.Backend, error) {
		be, err := cpu.New(cpu.Options{})
		return plainBackend{be}, err
	}
	load := DecideLoader(LoaderOptions{Backend: newBackend})
	eng, st, err := load(context.Background(), "", false, func(int64, int64) {})
	if err != nil {
		t.Fatal(err)
	}
	weights := engineMemory(eng).Weights
	eng.Close()
	if st.Int8 || !strings.Contains(st.Int8Unavailable, "has no int8 matrix products") || weights <= 0 {
		t.Errorf("float load: %+v, weights %d bytes", st, weights)
	}
	if _, _, err := load(context.Background(), "", true, func(int64, int64) {}); err == nil || !strings.Contains(err.Error(), "has no int8 matrix products") {
		t.Errorf("int8 load: %v", err)
	}
}

// TestInt8RefusedOverSocket serves the demo model with the real loader on
// a backend without int8 products: status says int8 is unavailable and
// why, load {"int8": true} is refused with that reason and leaves the float
// model serving, and a daemon started with Int8 on such a backend fails
// its first load with the reason instead of serving in float.
func TestInt8RefusedOverSocket(t *testing.T) {
	newBackend := func() (tensor.Backend, error) {
		be, err := cpu.New(cpu.Options{})
		return plainBackend{be}, err
	}
	be, err := newBackend()
	if err != nil {
		t.Fatal(err)
	}
	reason := "backend " + be.Name() + " has no int8 matrix products"
	c := dial(t, startDaemon(t, Options{Load: DecideLoader(LoaderOptions{Backend: newBackend}), ModelsDir: t.TempDir(), NoWarmup: true}))
	st := waitReady(t, c)
	if st.Model.Int8 || st.Model.Int8Kernel != "" || st.Model.Int8Summary() != "unavailable — "+reason {
		t.Errorf("float model on a backend without int8: %+v", st.Model)
	}
	on := true
	err = c.Call(context.Background(), api.MethodLoad, api.LoadParams{Model: "demo", Int8: &on}, nil)
	if api.ErrorCode(err) != api.CodeModelLoadFailed || !strings.Contains(err.Error(), reason) {
		t.Errorf("load int8 on a backend without int8: %v, want %s naming %q", err, api.CodeModelLoadFailed, reason)
	}
	if st := status(t, c); st.State != api.StateReady || st.Model.Int8 {
		t.Errorf("after the refused load: state %s, model %+v; want the float model serving", st.State, st.Model)
	}

	c = dial(t, startDaemon(t, Options{Load: DecideLoader(LoaderOptions{Backend: newBackend}), ModelsDir: t.TempDir(), NoWarmup: true, Int8: true}))
	waitFor(t, func() bool {
		st = status(t, c)
		return st.State != api.StateLoading && st.State != api.StateWarming
	})
	if st.State != api.StateFailed || !strings.Contains(st.Error, reason) {
		t.Errorf("started with Int8 on a backend without int8: state %s, error %q; want failed naming %q", st.State, st.Error, reason)
	}
}

// plainBackend hides the optional interfaces of its backend.
type plainBackend struct{ tensor.Backend }
