package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux forward".
func runForward(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("forward: not built yet")
}
