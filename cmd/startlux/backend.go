package main

import (
	"flag"
	"fmt"
	"runtime"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tensor"
)

// backendFlag registers --backend on fs and returns the chosen name.
func backendFlag(fs *flag.FlagSet) *string {
	return fs.String("backend", "auto", "compute backend: auto, cpu, cpu-go (pure Go, no BLAS), metal, or metal-emu (the Metal kernels under the emulator; slow)")
}

// openBackend returns the backend the --backend flag names. auto picks Metal
// on Apple Silicon when it opens, and the CPU backend everywhere else.
func openBackend(name string) (tensor.Backend, error) { return openBackendThreads(name, 0) }

// openBackendThreads is openBackend with the CPU backends' thread count
// (0: all cores); the GPU backends ignore it.
func openBackendThreads(name string, threads int) (tensor.Backend, error) {
	switch name {
	case "auto":
		if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
			if be, err := openMetal(); err == nil {
				return be, nil
			}
		}
		return cpu.New(cpu.Options{Threads: threads})
	case "cpu":
		return cpu.New(cpu.Options{Threads: threads})
	case "cpu-go":
		return cpu.New(cpu.Options{Threads: threads, NoBLAS: true})
	case "metal":
		be, err := openMetal()
		if err != nil {
			return nil, fmt.Errorf("backend metal: %w", err)
		}
		return be, nil
	case "metal-emu":
		be, err := openMetalEmulated()
		if err != nil {
			return nil, fmt.Errorf("backend metal-emu: %w", err)
		}
		return be, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want auto, cpu, cpu-go, metal or metal-emu)", name)
}
