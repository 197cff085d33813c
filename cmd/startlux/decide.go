package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux decide".
func runDecide(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("decide: not built yet")
}
