package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux status".
func runStatus(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("status: not built yet")
}
