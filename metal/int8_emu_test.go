//go:build !mactest

// Tests of the int8 probe's refusals and of the emulator's model of Metal
// Performance Primitives; they need the emulator's test options, so with
// -tags mactest (the GPU under test) they are left out.

package metal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/startlux/startlux/tensor"
)

// TestInt8Probe shows each outcome of the probe on an emulated device: an
// M5 runs int8; a GPU without neural accelerators, an SDK without Metal
// Performance Primitives (the probe does not compile: clang's message) and
// a GPU whose int8 results are wrong (the self-check) each make int8
// unavailable with the reason, which MatMul over an int8 weight panics
// with, while WarmUp succeeds and the float kernels still run.
func TestInt8Probe(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		dev  emuDevice
		want []string // in the error, in order; none: available
	}{
		{"m5", emuDevice{}, nil},
		{"no accelerators", emuDevice{noAccelerators: true},
			[]string{"unavailable — int8 needs the neural accelerators of an M5 or later GPU"}},
		{"sdk without mpp", emuDevice{noMPP: true},
			[]string{"unavailable — int8_probe.metal:", "fatal error: 'MetalPerformancePrimitives/MetalPerformancePrimitives.h' file not found"}},
		{"wrong int8 results", emuDevice{int8Fault: true},
			[]string{"unavailable — the int8 self-check differs from the CPU int8 reference by ", " at row 0, channel 0 of 5 × 70 (integer part): "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be, err := newEmulatedDevice(ctx, Options{}, c.dev, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := be.WarmUp(ctx); err != nil {
				t.Fatalf("WarmUp: %v", err)
			}
			name, err := be.Int8Kernel()
			if c.want == nil {
				if err != nil || name != Int8KernelName {
					t.Fatalf("Int8Kernel() = %q, %v; want %q", name, err, Int8KernelName)
				}
				return
			}
			if err == nil || name != "" || !errors.Is(err, ErrInt8Unavailable) {
				t.Fatalf("Int8Kernel() = %q, %v; want an ErrInt8Unavailable", name, err)
			}
			msg, at := err.Error(), 0
			for _, w := range c.want {
				i := strings.Index(msg[at:], w)
				if i < 0 || (at == 0 && i != 0) {
					t.Fatalf("Int8Kernel error %q lacks %q", msg, w)
				}
				at += i + len(w)
			}
			checkInt8Refused(t, be, err)
			p := &pair{t: t, m: be, c: cpuRef(t), rng: rand.New(rand.NewPCG(1, 2))}
			w := p.weight(37, 93, tensor.BF16, 0, 0)
			x, out := p.upload(p.vec(70*93, 1)), p.poisoned(70*37)
			p.m.MatMul(out.m, x.m, w, 70)
			p.c.MatMul(out.c, x.c, w, 70)
			p.check("bf16 matmul beside unavailable int8", out, 37, 1e-5)
		})
	}
}

// TestInt8ProbeOnce: the probe runs at the first of WarmUp and Int8Kernel;
// MatMul over an int8 weight before it panics saying so; a WarmUp whose
// context has ended returns that error and leaves the probe to a later
// call.
func TestInt8ProbeOnce(t *testing.T) {
	ctx := context.Background()
	be, err := newEmulated(ctx, Options{}, "")
	if err != nil {
		t.Fatal(err)
	}
	w := tensor.Int8FromValues("w", 2, 3, []int8{1, 2, 3, 4, 5, 6}, []float32{1, 1})
	x, out := be.Alloc(3), be.Alloc(2)
	func() {
		defer func() {
			if r := fmt.Sprint(recover()); r != "metal: int8 weight w: int8 not probed: WarmUp or Int8Kernel has not run" {
				t.Errorf("MatMul before the probe panicked with %q", r)
			}
		}()
		be.MatMul(out, x, w, 1)
	}()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := be.WarmUp(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WarmUp with an ended context: %v", err)
	}
	if be.int8.probed || be.int8.ready {
		t.Fatalf("an interrupted probe left %+v", be.int8)
	}
	if name, err := be.Int8Kernel(); err != nil || name != Int8KernelName {
		t.Fatalf("Int8Kernel() = %q, %v", name, err)
	}
	be.Write(x, 0, []float32{1, -1, 0.5})
	be.MatMul(out, x, w, 1)
	got := make([]float32, 2)
	if err := be.Read(ctx, out, 0, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 2)
	tensor.Int8MatMul(want, []float32{1, -1, 0.5}, w, 1)
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after the probe: %v, want %v", got, want)
	}
}

// TestInt8SelfCheckFamily: SelfCheck's int8 family passes on the emulator,
// fails on doubled int8 outputs with "int8 disabled", and reports a
// backend's unavailability as its error.
func TestInt8SelfCheckFamily(t *testing.T) {
	ctx := context.Background()
	i8 := []WeightForm{{DType: tensor.I8}}
	res := SelfCheck(ctx, deviceUnderTest(t), cpuRef(t), i8)
	if len(res) != 8 || res[2].Family != "matmul i8" || !res[2].OK() {
		t.Fatalf("int8 family on the emulator: %+v", res)
	}
	r := SelfCheck(ctx, doubledInt8{deviceUnderTest(t)}, cpuRef(t), i8)[2]
	if r.OK() || !strings.HasPrefix(r.Note(), "int8 disabled: matmul i8 kernel differs from the CPU by 1.0e+00 at row 0, channel 0 of 5 × 70 (integer part)") {
		t.Errorf("doubled int8: %+v, note %q", r, r.Note())
	}
	be, err := newEmulatedDevice(ctx, Options{}, emuDevice{noAccelerators: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	r = SelfCheck(ctx, be, cpuRef(t), i8)[2]
	if r.Note() != "int8 disabled: matmul i8 kernel failed: int8 unavailable — "+noAccelerators {
		t.Errorf("unavailable int8: note %q", r.Note())
	}
}

// doubledInt8 is a backend whose int8 products come out twice as large.
type doubledInt8 struct{ tensor.Backend }

func (b doubledInt8) MatMul(out, x tensor.Tensor, w *tensor.Weight, rows int) {
	b.Backend.MatMul(out, x, w, rows)
	if w.DType == tensor.I8 {
		b.Backend.Add(out, out, rows*w.Rows())
	}
}

// TestInt8Accumulators runs the int8 kernels' tile with the raw int32 sums
// as its output (t_i8_acc) on activations the GPU quantised and holds them
// to Σ q·w over tensor.QuantizeInt8Vec's q bit for bit, with sums beyond
// 2²⁴ (where float32 would round).
func TestInt8Accumulators(t *testing.T) {
	be := emuTest(t)
	if _, err := be.Int8Kernel(); err != nil {
		t.Fatal(err)
	}
	for _, sh := range []struct{ rows, o, k int }{{33, 70, 3000}, {5, 129, 1}, {64, 64, 64}} {
		t.Run(fmt.Sprintf("%dx%dx%d", sh.rows, sh.o, sh.k), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(sh.k), 5))
			x := make([]float32, sh.rows*sh.k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for i := range sh.k { // a row of equal values: every q is ±127
				x[i] = 1
			}
			w := int8UnitWeight(rng, sh.o, sh.k)
			for i := range sh.k {
				w.Data[i] = 127
			}
			xd := be.Alloc(len(x))
			defer be.Free(xd)
			be.Write(xd, 0, x)
			q, rs, ldq := be.quantizeInt8(xd, sh.rows, sh.k)
			acc, err := be.drv.alloc(4 * sh.rows * sh.o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range be.drv.host(acc) {
				be.drv.host(acc)[i] = 0xa5
			}
			tm := i8TileSmall
			if sh.rows > i8TileSmall {
				tm = i8TileLarge
			}
			h := be.handle(w)
			be.run("t_i8_acc", [3]int{ceilDiv(sh.o, i8TileN), ceilDiv(sh.rows, tm), 1}, [3]int{i8Threads, 1, 1},
				binding{index: 0, buf: acc}, binding{index: 1, buf: q}, binding{index: 3, buf: h.data, off: h.dOff},
				bytesArg(5, params(sh.rows, sh.o, sh.k, ldq)))
			if err := be.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := be.drv.host(acc)
			xq := make([]int8, sh.k)
			big := int64(0)
			for r := range sh.rows {
				tensor.QuantizeInt8Vec(xq, x[r*sh.k:(r+1)*sh.k])
				for c := range sh.o {
					var want int64
					for i, v := range w.Int8Row(c) {
						want += int64(xq[i]) * int64(v)
					}
					big = max(big, want, -want)
					if g := int32(binary.LittleEndian.Uint32(got[4*(r*sh.o+c):])); int64(g) != want {
						t.Fatalf("row %d, channel %d: sum %d, want %d", r, c, g, want)
					}
				}
			}
			if sh.k == 3000 && big <= 1<<24 {
				t.Fatalf("largest sum %d: the case does not exceed 2^24", big)
			}
			for _, b := range []buffer{q, rs, acc} {
				be.drv.free(b)
			}
		})
	}
}

// TestEmuMatmul2d holds the emulator's matmul2d to its contract: exact
// int32 sums of a 24 × 20 tile over operands smaller than the tile (rows
// past the operand undefined, i.e. poisoned), elements spread over the
// threads not one row per thread, a destination not zeroed holding
// poison, and each misuse reported: a thread skipping run, a slot a thread
// does not hold, operands whose K differs, a threadgroup of the wrong size.
func TestEmuMatmul2d(t *testing.T) {
	be := emuTest(t)
	const m, n = 24, 20
	rng := rand.New(rand.NewPCG(2, 4))
	mk := func(rows, k int) []byte {
		v := make([]byte, rows*k)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		return v
	}
	rows, k := 21, 37
	a, b := mk(rows, k), mk(n, k)
	run := func(mode, kl, kr, threads int) ([]int32, []int32, error) {
		out, holder := be.upload(make([]byte, 4*m*n)), be.upload(make([]byte, 4*m*n))
		for i := range be.drv.host(holder) {
			be.drv.host(holder)[i] = 0xff
		}
		be.run("t_mm2d", [3]int{1, 1, 1}, [3]int{threads, 1, 1}, binding{index: 0, buf: out}, binding{index: 1, buf: holder},
			binding{index: 2, buf: be.upload(a)}, binding{index: 3, buf: be.upload(b)}, bytesArg(4, params(mode, rows, n, kl, kr)))
		err := be.Sync(context.Background())
		o, h := make([]int32, m*n), make([]int32, m*n)
		for i := range o {
			o[i] = int32(binary.LittleEndian.Uint32(be.drv.host(out)[4*i:]))
			h[i] = int32(binary.LittleEndian.Uint32(be.drv.host(holder)[4*i:]))
		}
		return o, h, err
	}
	sum := func(r, c int) int32 {
		var s int32
		for i := range k {
			s += int32(int8(a[r*k+i])) * int32(int8(b[c*k+i]))
		}
		return s
	}
	poison := int32(-0x5a5a5a5b) // 0xa5a5a5a5
	for _, mode := range []int{0, 3} {
		out, holder, err := run(mode, k, k, 128)
		if err != nil {
			t.Fatalf("mode %d: %v", mode, err)
		}
		threads := map[int32]bool{}
		for r := range m {
			for c := range n {
				g, want := out[r*n+c], sum(r%rows, c)
				switch {
				case holder[r*n+c] < 0:
					t.Fatalf("mode %d: element (%d, %d) held by no thread", mode, r, c)
				case r >= rows:
					want = poison
				case mode == 3:
					want = int32(uint32(want) + uint32(poison))
				}
				if g != want {
					t.Fatalf("mode %d: element (row %d, column %d) = %d, want %d", mode, r, c, g, want)
				}
				if r == 0 {
					threads[holder[c]] = true
				}
			}
		}
		if len(threads) < 2 {
			t.Errorf("row 0 is held by one thread: the distribution would not catch a kernel assuming one")
		}
	}
	for _, c := range []struct {
		mode, kl, kr, threads int
		want                  string
	}{
		{1, k, k, 128, "barrier divergence"},
		{2, k, k, 128, "does not hold it (capacity 4; guard with is_valid_element)"},
		{0, k, k - 1, 128, "matmul2d: K is 37 in the left operand and 36 in the right one"},
		{0, k, k, 64, "matmul2d: an operation of 4 SIMD-groups run by a threadgroup of 64 threads"},
	} {
		if _, _, err := run(c.mode, c.kl, c.kr, c.threads); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mode %d, K %d/%d, %d threads: %v, want %q", c.mode, c.kl, c.kr, c.threads, err, c.want)
		}
	}
	if _, _, err := run(0, k, k, 128); err != nil {
		t.Fatalf("after the misuses: %v", err)
	}
}

func TestCompilerMessage(t *testing.T) {
	for _, c := range []struct{ report, want string }{
		{"program_source:11:10: fatal error: 'MetalPerformancePrimitives/MetalPerformancePrimitives.h' file not found\n" +
			"#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>\n         ^\n",
			"program_source:11:10: fatal error: 'MetalPerformancePrimitives/MetalPerformancePrimitives.h' file not found"},
		{"a.metal:3:1: error: unknown type name 'matmul2d'\nmatmul2d x;\n^\na.metal:9:2: error: expected ';'\n2 errors generated.\n",
			"a.metal:3:1: error: unknown type name 'matmul2d'; a.metal:9:2: error: expected ';'"},
		{"  Compiler encountered an internal error\n", "Compiler encountered an internal error"},
	} {
		if got := compilerMessage(c.report); got != c.want {
			t.Errorf("compilerMessage(%q) = %q, want %q", c.report, got, c.want)
		}
	}
}
