package metal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/startlux/startlux/tensor"
)

// Int8 (W8A8) products on the GPU's neural accelerators. MatMul over an int8
// weight (tensor.I8) follows tensor/int8.go exactly: quant_i8 quantises the
// activation rows on the GPU, then mm_i8_32 or mm_i8_64 (Metal Performance
// Primitives' matmul2d, int8 × int8 → int32) computes the sums and applies
// the epilogue. The int8 kernels are a library of their own
// (kernels/int8/), so a Mac that cannot build them still runs the float
// kernels. Whether they can run is probed, never assumed (probeInt8):
//
//  1. the GPU has neural accelerators (MTLGPUFamilyApple10, the M5
//     generation, or later);
//  2. a probe kernel using exactly the kernels' matmul2d descriptors and
//     operand types compiles and gets a pipeline;
//  3. the int8 library compiles and its pipelines are made;
//  4. the int8 self-check (checkInt8) agrees with the CPU int8 reference.
//
// The first step that fails makes int8 unavailable with its reason, which
// Int8Kernel reports and MatMul over an int8 weight panics with.

// Int8KernelName is what Int8Kernel names the Metal int8 kernels by.
const Int8KernelName = "mpp-matmul2d"

// ErrInt8Unavailable is wrapped by the error of Int8Kernel when int8 cannot
// run on this backend; the error's text is "unavailable — <reason>".
var ErrInt8Unavailable = errors.New("unavailable")

// noAccelerators is the reason on a GPU without neural accelerators.
const noAccelerators = "int8 needs the neural accelerators of an M5 or later GPU"

func int8Unavailable(reason string) error { return fmt.Errorf("%w — %s", ErrInt8Unavailable, reason) }

// int8Driver is what the int8 kernels need of a driver beyond driver.
type int8Driver interface {
	// neuralAccelerators reports whether the GPU has the neural
	// accelerators matmul2d runs on.
	neuralAccelerators() bool
	// compileInt8Probe compiles src and makes the pipeline of its kernel
	// int8ProbeKernel; the error carries the compiler's message.
	compileInt8Probe(ctx context.Context, src string) error
	// compileInt8 compiles the int8 library src and makes the pipelines of
	// its kernels.
	compileInt8(ctx context.Context, src string, kernels []string) error
}

// int8State is what a backend knows of its int8 kernels.
type int8State struct {
	// probed: the probe and the self-check have run to their end.
	probed bool
	// ready: the int8 kernels are compiled, so MatMul may run them (set
	// before the self-check, which runs them).
	ready bool
	// err is why int8 is unavailable, once probed; nil when it runs.
	err error
}

// Int8Kernel reports whether MatMul runs int8 weights (tensor.I8) on this
// backend: Int8KernelName when it does, else an error wrapping
// ErrInt8Unavailable whose text is "unavailable — <reason>": the compiler's
// message when the probe or the int8 library does not compile, the
// self-check's finding when the kernels disagree with the CPU int8
// reference, "int8 needs the neural accelerators of an M5 or later GPU"
// on a GPU without them. It implements tensor.Int8Backend. The probe runs
// once, at WarmUp or at the first call of Int8Kernel, whichever comes
// first; it compiles two small libraries and runs the self-check (a Sync:
// work queued before it is waited for). A caller that must know before it
// loads a model (to convert its projections to int8 or to refuse) calls
// Int8Kernel right after making the backend.
func (b *Backend) Int8Kernel() (string, error) {
	if !b.int8.probed {
		_ = b.probeInt8(context.Background())
	}
	if b.int8.err != nil {
		return "", b.int8.err
	}
	return Int8KernelName, nil
}

var _ tensor.Int8Backend = (*Backend)(nil)

// probeInt8 runs the probe once (see the top of this file); it returns only
// ctx's error, in which case nothing is recorded and a later call probes
// again.
func (b *Backend) probeInt8(ctx context.Context) error {
	if b.int8.probed {
		return nil
	}
	err := b.setUpInt8(ctx)
	if cerr := ctx.Err(); cerr != nil {
		b.int8 = int8State{}
		return cerr
	}
	b.int8.probed, b.int8.err = true, err
	if err != nil {
		b.int8.ready = false
	}
	return nil
}

// setUpInt8 takes the probe's steps in order and returns why int8 is
// unavailable, or nil.
func (b *Backend) setUpInt8(ctx context.Context) error {
	d, ok := b.drv.(int8Driver)
	if !ok {
		return int8Unavailable(fmt.Sprintf("the %s driver has no int8 kernels", b.drv.name()))
	}
	if !d.neuralAccelerators() {
		return int8Unavailable(noAccelerators)
	}
	probe, err := int8ProbeSource()
	if err != nil {
		return int8Unavailable(err.Error())
	}
	if err := d.compileInt8Probe(ctx, probe); err != nil {
		return int8Unavailable(err.Error())
	}
	src, err := int8LibrarySource()
	if err != nil {
		return int8Unavailable(err.Error())
	}
	ks, err := parseKernels(src)
	if err != nil {
		return int8Unavailable(fmt.Sprintf("parse the int8 kernels: %v", err))
	}
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.name
	}
	if err := d.compileInt8(ctx, src, names); err != nil {
		return int8Unavailable(err.Error())
	}
	b.int8.ready = true
	if r := checkInt8(ctx, b); !r.OK() {
		return int8Unavailable(r.int8Reason())
	}
	return nil
}

// int8Reason says why MatMul cannot run an int8 weight now.
func (b *Backend) int8Reason() string {
	if b.int8.err != nil {
		return b.int8.err.Error()
	}
	return "not probed: WarmUp or Int8Kernel has not run"
}

// Tiles of the int8 kernels (kernels/int8/mpp.metal; docs/metal.md says
// why these): i8TileSmall or i8TileLarge activation rows (the small tile
// for up to i8TileSmall rows) × i8TileN weight channels per threadgroup of
// i8Threads threads.
const (
	i8TileSmall = 32
	i8TileLarge = 64
	i8TileN     = 64
	i8Threads   = 128
	i8LdqAlign  = 64 // row stride of the quantised activations
	i8QuantRows = 4  // rows per threadgroup of quant_i8 (one per SIMD-group)
)

// matMulInt8 is MatMul over an int8 weight: quant_i8, then mm_i8_32 or
// mm_i8_64 with the epilogue fused.
func (b *Backend) matMulInt8(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	if !b.int8.ready {
		panic(fmt.Sprintf("metal: int8 weight %s: int8 %s", w.Name, b.int8Reason()))
	}
	if w.Int8 == nil || len(w.Int8.Scales) != w.Rows() {
		panic(fmt.Sprintf("metal: int8 weight %s lacks its channel scales", w.Name))
	}
	o, in := w.Rows(), w.Cols()
	h := b.handle(w)
	q, rs, ldq := b.quantizeInt8(x, rows, in)
	tm := i8TileSmall
	if rows > i8TileSmall {
		tm = i8TileLarge
	}
	b.run(fmt.Sprintf("mm_i8_%d", tm), [3]int{ceilDiv(o, i8TileN), ceilDiv(rows, tm), 1}, [3]int{i8Threads, 1, 1},
		arg(0, out, 0), binding{index: 1, buf: q}, binding{index: 2, buf: rs},
		binding{index: 3, buf: h.data, off: h.dOff}, binding{index: 4, buf: h.scales, off: h.sOff},
		bytesArg(5, params(rows, o, in, ldq)))
	b.drv.free(q)
	b.drv.free(rs)
}

// quantizeInt8 queues quant_i8 over rows × cols activations x and returns
// the quantised rows (ldq bytes apart, zero-padded) and the row scales
// (float32), both for the caller to free.
func (b *Backend) quantizeInt8(x tensor.Tensor, rows, cols int) (q, rs buffer, ldq int) {
	ldq = ceilDiv(cols, i8LdqAlign) * i8LdqAlign
	var err error
	if q, err = b.drv.alloc(rows * ldq); err != nil {
		panic(fmt.Sprintf("metal: int8 activations of %d × %d: %v", rows, ldq, err))
	}
	if rs, err = b.drv.alloc(4 * rows); err != nil {
		panic(fmt.Sprintf("metal: int8 row scales of %d rows: %v", rows, err))
	}
	b.run("quant_i8", [3]int{ceilDiv(rows, i8QuantRows), 1, 1}, [3]int{i8Threads, 1, 1},
		binding{index: 0, buf: q}, binding{index: 1, buf: rs}, arg(2, x, 0), bytesArg(3, params(rows, 0, cols, ldq)))
	return q, rs, ldq
}

// float32Bytes returns v's memory as bytes, in place.
func float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// compilerMessage reduces a compiler's report (clang's, or the description
// of the NSError newLibraryWithSource gives, both "file:line:col: error:
// text" followed by the source line and a caret) to its error lines, joined
// by "; "; a report without one is returned whole, trimmed.
func compilerMessage(report string) string {
	var errs []string
	for _, l := range strings.Split(report, "\n") {
		if strings.Contains(l, "error:") {
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	if len(errs) == 0 {
		return strings.TrimSpace(report)
	}
	return strings.Join(errs, "; ")
}
