package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux serve".
func runServe(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("serve: not built yet")
}
