// Package backends opens StartLux's compute backends by the names a user
// gives them: auto (Metal on Apple Silicon when it opens, the CPU backend
// everywhere else), cpu, cpu-go (the CPU backend with its pure-Go GEMM, no
// BLAS), metal, and metal-emu (the Metal kernels under the emulator; slow,
// for checking the kernels off a Mac).
package backends

import (
	"fmt"
	"slices"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// Usage describes the names, for a command-line flag.
const Usage = "compute backend: auto, cpu, cpu-go (pure Go, no BLAS), metal, or metal-emu (the Metal kernels under the emulator; slow)"

// Names returns the names Open accepts.
func Names() []string { return []string{"auto", "cpu", "cpu-go", "metal", "metal-emu"} }

// Choice is what "auto" picks and why.
type Choice struct {
	// Name is the backend's name ("metal", or the CPU backend's, such as
	// "cpu (openblas)").
	Name string
	// Why explains the pick.
	Why string
}

// Auto opens the backend "auto" picks: Metal where the build has it and a
// device opens with the kernel library compiled, the CPU backend (with
// threads goroutines; 0: all cores) everywhere else. It is the one place
// that decides what auto means; startlux doctor reports its Choice.
func Auto(threads int) (tensor.Backend, Choice, error) {
	why := ""
	if err := metal.Supported(); err != nil {
		why = err.Error()
	} else if be, err := metal.New(metal.Options{}); err != nil {
		why = "Metal did not open: " + err.Error()
	} else {
		return be, Choice{Name: be.Name(), Why: "Apple Silicon: the Metal device opened and the kernel library compiled"}, nil
	}
	be, err := cpu.New(cpu.Options{Threads: threads})
	if err != nil {
		return nil, Choice{}, err
	}
	return be, Choice{Name: be.Name(), Why: why}, nil
}

// Plan is how a daemon opens the backend a name asks for: Open makes it,
// and Fallback, when not nil, makes the backend to serve on instead when
// Open's cannot (it does not open, or fails the GPU check before serving,
// or faults at run time; see daemon.LoaderOptions). Only auto on a build
// with Metal has a fallback, the CPU backend: a backend named explicitly
// either serves or fails.
type Plan struct {
	Open, Fallback func() (tensor.Backend, error)
}

// PlanFor returns the Plan of the backend called name, with the CPU
// backends' thread count (0: all cores).
func PlanFor(name string, threads int) (Plan, error) {
	cpuBackend := func() (tensor.Backend, error) { return cpu.New(cpu.Options{Threads: threads}) }
	switch {
	case name == "auto" && metal.Supported() == nil:
		return Plan{Open: func() (tensor.Backend, error) { return Open("metal", threads) }, Fallback: cpuBackend}, nil
	case name == "auto":
		return Plan{Open: cpuBackend}, nil
	case !slices.Contains(Names(), name):
		_, err := Open(name, threads)
		return Plan{}, err
	}
	return Plan{Open: func() (tensor.Backend, error) { return Open(name, threads) }}, nil
}

// Open returns the backend called name, with the CPU backends' thread count
// (0: all cores; the GPU backends ignore it).
func Open(name string, threads int) (tensor.Backend, error) {
	switch name {
	case "auto":
		be, _, err := Auto(threads)
		return be, err
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
