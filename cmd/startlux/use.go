package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux use".
func runUse(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("use: not built yet")
}
