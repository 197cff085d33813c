package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/startlux/startlux/decide"
	"github.com/vmihailenco/msgpack/v5"
)

// decideViaDaemon sends the request (or JSON array of requests) in body to
// the daemon and prints what "startlux decide --local" would: the response
// JSON, or an array with an {"error": ...} object per failed request. Key
// order is kept: the JSON is converted to msgpack as written, once, and
// what is wrong with it is said as --local says it.
func decideViaDaemon(ctx context.Context, env *cmdEnv, socket string, body []byte) error {
	params, err := decide.DocumentMsgpack(body)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	c, err := dialDaemon(ctx, socket)
	if err != nil {
		return fmt.Errorf("decide: %w (or use --local to run the embedded model in-process)", err)
	}
	defer c.Close()
	if !decide.IsBatchJSON(body) {
		resp, err := c.Decide(ctx, msgpack.RawMessage(params))
		if err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		return json.NewEncoder(env.stdout).Encode(resp)
	}
	resps, errs, err := c.DecideBatch(ctx, msgpack.RawMessage(params))
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	return printDecisions(env.stdout, true, resps, errs)
}
