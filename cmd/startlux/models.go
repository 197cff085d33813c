package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux models".
func runModels(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("models: not built yet")
}
