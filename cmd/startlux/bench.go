package main

import (
	"context"

	"github.com/startlux/startlux/bench"
)

// runBench is "startlux bench": bench.Main runs the benchmarks from their
// flags and prints their reports.
func runBench(ctx context.Context, env *cmdEnv, args []string) error {
	return bench.Main(ctx, args, env.stdout, env.stderr)
}
