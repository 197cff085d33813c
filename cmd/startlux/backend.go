package main

import (
	"flag"

	"github.com/startlux/startlux/backends"
	"github.com/startlux/startlux/tensor"
)

// backendFlag registers --backend on fs and returns the chosen name.
func backendFlag(fs *flag.FlagSet) *string { return fs.String("backend", "auto", backends.Usage) }

// openBackend returns the backend the --backend flag names, on all cores.
// auto picks Metal on Apple Silicon when it opens, and the CPU backend
// everywhere else (backends.Auto).
func openBackend(name string) (tensor.Backend, error) { return backends.Open(name, 0) }
