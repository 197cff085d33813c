package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/startlux/startlux/value"
	"github.com/vmihailenco/msgpack/v5"
)

// decideViaDaemon sends the request (or JSON array of requests) in body to
// the daemon and prints what "startlux decide --local" would: the response
// JSON, or an array with an {"error": ...} object per failed request. Key
// order is kept: the JSON is converted to msgpack as written.
func decideViaDaemon(ctx context.Context, env *cmdEnv, socket string, body []byte) error {
	// The JSON is read once; what is wrong with it is said as --local
	// says it.
	v, err := value.ParseJSON(body)
	if err != nil {
		if isBatch(body) {
			_, _, err = decide.ReadBatch(&v, err)
		} else {
			_, err = decide.Read(&v, err)
		}
		return fmt.Errorf("decide: %w", err)
	}
	params, err := value.AppendMsgpack(nil, &v)
	if err != nil {
		return fmt.Errorf("decide: the request cannot go to the daemon: %w", err)
	}
	c, err := dialDaemon(ctx, socket)
	if err != nil {
		return fmt.Errorf("decide: %w (or use --local to run the embedded model in-process)", err)
	}
	defer c.Close()
	enc := json.NewEncoder(env.stdout)
	if !isBatch(body) {
		var resp api.Response
		if err := c.Call(ctx, api.MethodDecide, msgpack.RawMessage(params), &resp); err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		return enc.Encode(&resp)
	}
	var res api.BatchResult
	if err := c.Call(ctx, api.MethodDecideBatch, msgpack.RawMessage(params), &res); err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	out := make([]any, len(res.Responses))
	for i, raw := range res.Responses {
		var resp api.Response
		var perr *api.Error
		if err := ipc.DecodeBatchItem(raw, &resp); errors.As(err, &perr) {
			out[i] = map[string]string{"error": perr.Message}
			continue
		} else if err != nil {
			return fmt.Errorf("decide: response %d: %w", i, err)
		}
		out[i] = &resp
	}
	return enc.Encode(out)
}

// isBatch reports whether a JSON document is an array (of requests).
func isBatch(body []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("["))
}
