package ipc

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
)

// fakeDaemon answers the typed calls' methods, recording what each got;
// a load waits until the status was asked for twice.
type fakeDaemon struct {
	mu       sync.Mutex
	methods  []string
	params   []msgpack.RawMessage
	statuses atomic.Int64
}

func (f *fakeDaemon) ServeIPC(ctx context.Context, req *Request) (any, error) {
	f.mu.Lock()
	if req.Method != api.MethodStatus {
		f.methods, f.params = append(f.methods, req.Method), append(f.params, req.Params)
	}
	f.mu.Unlock()
	switch req.Method {
	case api.MethodStatus:
		n := f.statuses.Add(1)
		return api.Status{State: api.StateLoading, Progress: &api.LoadProgress{Model: "m", Done: n, Total: 10}}, nil
	case api.MethodModels:
		return []api.ModelEntry{{Name: api.DemoName, Embedded: true}, {Name: "m", Path: "/m", Current: true}}, nil
	case api.MethodLoad:
		var p api.LoadParams
		if err := Unmarshal(req.Params, &p); err != nil {
			return nil, api.Errorf(api.CodeInvalidParams, "%v", err)
		}
		if p.Pull == "wait" {
			deadline := time.Now().Add(10 * time.Second)
			for f.statuses.Load() < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		return api.Status{State: api.StateReady, Model: api.ModelStatus{Name: p.Model}}, nil
	case api.MethodUnload:
		return api.Status{State: api.StateUnloaded}, nil
	case api.MethodConfigure:
		return api.Status{State: api.StateReady, IdleUnloadS: 60}, nil
	}
	return nil, api.Errorf(api.CodeUnknownMethod, "no method %q", req.Method)
}

// TestTypedCalls runs each typed call against the fake daemon and checks
// the method and params it sent and the result it decoded.
func TestTypedCalls(t *testing.T) {
	f := &fakeDaemon{}
	_, path := startServer(t, f, ServerOptions{})
	c := dial(t, path)
	ctx := context.Background()
	on, idle := true, 60.0
	for _, tc := range []struct {
		method string
		params any // what the call should have sent (nil: no params)
		call   func() (any, error)
		want   any
	}{
		{api.MethodModels, nil, func() (any, error) { return c.Models(ctx) },
			[]api.ModelEntry{{Name: api.DemoName, Embedded: true}, {Name: "m", Path: "/m", Current: true}}},
		{api.MethodLoad, api.LoadParams{Model: "m", Int8: &on}, func() (any, error) {
			return c.Load(ctx, api.LoadParams{Model: "m", Int8: &on}, nil)
		}, api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "m"}}},
		{api.MethodUnload, nil, func() (any, error) { return c.Unload(ctx) }, api.Status{State: api.StateUnloaded}},
		{api.MethodConfigure, api.ConfigureParams{IdleUnloadS: &idle}, func() (any, error) {
			return c.Configure(ctx, api.ConfigureParams{IdleUnloadS: &idle})
		}, api.Status{State: api.StateReady, IdleUnloadS: 60}},
	} {
		f.mu.Lock()
		f.methods, f.params = nil, nil
		f.mu.Unlock()
		got, err := tc.call()
		if err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %+v, want %+v", tc.method, got, tc.want)
		}
		f.mu.Lock()
		methods, params := f.methods, f.params
		f.mu.Unlock()
		if len(methods) != 1 || methods[0] != tc.method {
			t.Errorf("%s sent %q", tc.method, methods)
			continue
		}
		var want msgpack.RawMessage
		if tc.params != nil {
			var err error
			if want, err = Marshal(tc.params); err != nil {
				t.Fatal(err)
			}
		}
		if string(params[0]) != string(want) {
			t.Errorf("%s sent params %x, want %x", tc.method, params[0], want)
		}
	}
	if n := f.statuses.Load(); n != 0 {
		t.Errorf("status asked %d times by calls without progress", n)
	}
	st, err := c.Status(ctx)
	if err != nil || st.State != api.StateLoading || st.Progress == nil || st.Progress.Model != "m" {
		t.Errorf("Status = %+v, %v", st, err)
	}
}

// TestLoadProgress loads with a progress function: it gets the status's
// progress while the load runs, and no call after Load returns.
func TestLoadProgress(t *testing.T) {
	f := &fakeDaemon{}
	_, path := startServer(t, f, ServerOptions{})
	c := dial(t, path)
	var mu sync.Mutex
	var seen []int64
	returned := false
	st, err := c.Load(context.Background(), api.LoadParams{Pull: "wait"}, func(p api.LoadProgress) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Error("progress called after Load returned")
		}
		seen = append(seen, p.Done)
	})
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil || st.State != api.StateReady {
		t.Fatalf("Load = %+v, %v", st, err)
	}
	if len(seen) < 2 || seen[0] != 1 || seen[1] != 2 {
		t.Errorf("progress saw %v, want the status's 1, 2, …", seen)
	}
	time.Sleep(2 * progressEvery)
	mu.Lock()
	defer mu.Unlock()
	if n := f.statuses.Load(); n != int64(len(seen)) {
		t.Errorf("status asked %d times, progress called %d times", n, len(seen))
	}
}
