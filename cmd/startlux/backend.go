package main

import (
	"flag"
	"fmt"

	"github.com/startlux/startlux/internal/backends"
	"github.com/startlux/startlux/tensor"
)

// backendFlag registers --backend on fs and returns the chosen name.
func backendFlag(fs *flag.FlagSet) *string {
	return fs.String("backend", "auto", "compute backend: auto, cpu, cpu-go (pure Go, no BLAS), metal, or metal-emu (the Metal kernels under the emulator; slow)")
}

// openBackend returns the backend the --backend flag names. auto picks Metal
// on Apple Silicon when it opens, and the CPU backend everywhere else
// (backends.Auto).
func openBackend(name string) (tensor.Backend, error) { return openBackendThreads(name, 0) }

// openBackendThreads is openBackend with the CPU backends' thread count
// (0: all cores); the GPU backends ignore it.
func openBackendThreads(name string, threads int) (tensor.Backend, error) {
	return backends.Open(name, threads)
}

// backendLabel names a backend for a benchmark's report, with its thread
// count where it has one.
func backendLabel(be tensor.Backend) string {
	if t, ok := be.(interface{ Threads() int }); ok {
		return fmt.Sprintf("%s (%d threads)", be.Name(), t.Threads())
	}
	return be.Name()
}
