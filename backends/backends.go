// Package backends opens StartLux's compute backends by the names a user
// gives them: auto (Metal on Apple Silicon when it opens, the CPU backend
// everywhere else), cpu, cpu-go (the CPU backend with its pure-Go GEMM, no
// BLAS), metal, and metal-emu (the Metal kernels under the emulator; slow,
// for checking the kernels off a Mac).
package backends

import (
	"fmt"
	"runtime"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// Usage describes the names, for a command-line flag.
const Usage = "compute backend: auto, cpu, cpu-go (pure Go, no BLAS), metal, or metal-emu (the Metal kernels under the emulator; slow)"

// Open returns the backend called name, with the CPU backends' thread count
// (0: all cores; the GPU backends ignore it).
func Open(name string, threads int) (tensor.Backend, error) {
	switch name {
	case "auto":
		if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
			if be, err := metal.New(metal.Options{}); err == nil {
				return be, nil
			}
		}
		return cpu.New(cpu.Options{Threads: threads})
	case "cpu":
		return cpu.New(cpu.Options{Threads: threads})
	case "cpu-go":
		return cpu.New(cpu.Options{Threads: threads, NoBLAS: true})
	case "metal":
		be, err := metal.New(metal.Options{})
		if err != nil {
			return nil, fmt.Errorf("backend metal: %w", err)
		}
		return be, nil
	case "metal-emu":
		be, err := metal.NewEmulated(metal.Options{})
		if err != nil {
			return nil, fmt.Errorf("backend metal-emu: %w", err)
		}
		return be, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want auto, cpu, cpu-go, metal or metal-emu)", name)
}
