package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux bench".
func runBench(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("bench: not built yet")
}
