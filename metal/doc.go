// Package metal is the Metal backend of StartLux: the kernels of the Qwen3.5
// forward pass in kernels/*.metal, the dispatch code that picks kernels,
// buffers and grids for each tensor.Backend operation, the GPU binding for
// darwin/arm64 (through purego's objc package, no cgo), and an emulator that
// compiles the same kernel sources as C++ with clang-19 and runs them on the
// CPU, so that every kernel is tested on machines without a Mac. See
// docs/metal.md.
package metal
