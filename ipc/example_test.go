package ipc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

// A client dials the daemon's socket and calls methods by name; a protocol
// error comes back as an *api.Error with its code. Here the daemon is a
// server of two methods in a private directory.
func ExampleClient_Call() {
	dir, err := os.MkdirTemp("", "ipc-example") // mode 0700, as Dial requires
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	l, err := ipc.Listen(filepath.Join(dir, "startlux.sock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := ipc.NewServer(ipc.HandlerFunc(func(ctx context.Context, req *ipc.Request) (any, error) {
		switch req.Method {
		case api.MethodPing:
			return "pong", nil
		case api.MethodLoad:
			var p api.LoadParams
			if err := ipc.Unmarshal(req.Params, &p); err != nil {
				return nil, api.Errorf(api.CodeInvalidParams, "load: %v", err)
			}
			return nil, api.Errorf(api.CodeInvalidParams, "load: no model %q", p.Model)
		}
		return nil, api.Errorf(api.CodeUnknownMethod, "no method %q", req.Method)
	}), ipc.ServerOptions{})
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	ctx := context.Background()
	c, err := ipc.Dial(ctx, l.Path())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	var pong string
	if err := c.Call(ctx, api.MethodPing, nil, &pong); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pong)
	err = c.Call(ctx, api.MethodLoad, api.LoadParams{Model: "nope"}, nil)
	fmt.Println(api.ErrorCode(err), api.ErrorMessage(err))
	// Output:
	// pong
	// invalid_params load: no model "nope"
}
