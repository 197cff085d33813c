package main

import (
	"context"
	"errors"
)

// TODO: replaced by the issue that delivers "startlux tokenize".
func runTokenize(ctx context.Context, env *cmdEnv, args []string) error {
	return errors.New("tokenize: not built yet")
}
