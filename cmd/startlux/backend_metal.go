package main

import (
	"github.com/startlux/startlux/metal"
	"github.com/startlux/startlux/tensor"
)

// openMetal opens the Metal backend on the first GPU (Apple Silicon only).
func openMetal() (tensor.Backend, error) {
	return metal.New(metal.Options{})
}

// openMetalEmulated opens the Metal kernels under the emulator (clang-19
// needed): slow, for checking the kernels off a Mac.
func openMetalEmulated() (tensor.Backend, error) {
	return metal.NewEmulated(metal.Options{})
}
