//go:build !mactest

// The emulator's own tests; with -tags mactest (the GPU under test) they
// are left out.

package metal

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// emuTestKernels exercise the emulator itself: SIMD-group functions over a
// partial group, barriers with threadgroup memory, simdgroup_matrix, and the
// detection of barrier misuse.
const emuTestKernels = `
kernel void t_simd(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  float v = float(tid + 1);
  out[tid * 5 + 0] = simd_sum(v);
  out[tid * 5 + 1] = simd_max(v);
  out[tid * 5 + 2] = simd_shuffle_xor(v, ushort(1));
  out[tid * 5 + 3] = simd_prefix_exclusive_sum(v);
  out[tid * 5 + 4] = simd_broadcast(v, ushort(2));
}

kernel void t_reverse(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                      uint tid [[thread_index_in_threadgroup]], uint n [[threads_per_threadgroup]],
                      uint g [[threadgroup_position_in_grid]]) {
  threadgroup float buf[1024];
  buf[tid] = in[g * n + tid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[g * n + tid] = buf[n - 1 - tid];
}

kernel void t_reverse_nobarrier(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                                uint tid [[thread_index_in_threadgroup]], uint n [[threads_per_threadgroup]],
                                uint g [[threadgroup_position_in_grid]]) {
  threadgroup float buf[1024];
  buf[tid] = in[g * n + tid];
  out[g * n + tid] = buf[n - 1 - tid];
}

// c = a · bᵀ + 1 for 8×8 a, b (b loaded transposed), then c stored.
kernel void t_matrix(device float* c [[buffer(0)]], device const float* a [[buffer(1)]],
                     device const float* b [[buffer(2)]]) {
  simdgroup_float8x8 ma, mb, mc;
  simdgroup_load(ma, a, 8);
  simdgroup_load(mb, b, 8, ulong2(0), true);
  mc = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
  simdgroup_multiply_accumulate(mc, ma, mb, mc);
  simdgroup_store(mc, c, 8);
}

kernel void t_diagonal(device float* c [[buffer(0)]]) {
  simdgroup_float8x8 m = simdgroup_float8x8(3.0f);
  simdgroup_store(m, c, 8);
}

kernel void t_exchanges(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  float v = float(tid);
  for (uint i = 0; i < 100; i++) v = simd_sum(v) * 1e-3f;
  out[tid] = v;
}

kernel void t_barriers(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  for (uint i = 0; i < 100; i++) threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = 1.0f;
}

kernel void t_overrun(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = 1.0f;  // dispatched with more threads than out has elements
}

kernel void t_tg_uninit(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],
                        uint g [[threadgroup_position_in_grid]]) {
  threadgroup float a[32];
  out[g * 32 + tid] = a[tid];  // never written: undefined on a GPU
  threadgroup_barrier(mem_flags::mem_threadgroup);
  a[tid] = 1.0f;
}

kernel void t_diverge(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  if (tid == 3) return;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = 1.0f;
}

kernel void t_simd_diverge(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  if (tid == 5) return;
  out[tid] = simd_sum(1.0f);
}

// The MPP subset (after the int8 library, kernels/int8/mpp.metal). t_i8_acc
// is the int8 kernels' tile with the raw int32 sums as its output.
struct I8Raw {
  device int* out;
  uint ld;
  void put(uint r, uint c, int acc) const { out[r * ld + c] = acc; }
};

kernel void t_i8_acc(device int* out [[buffer(0)]], device const int8_t* q [[buffer(1)]],
                     device const int8_t* w [[buffer(3)]], constant I8Params& p [[buffer(5)]],
                     uint2 tg [[threadgroup_position_in_grid]]) {
  I8Raw o = {out, p.out_cols};
  if (p.rows > 32)
    i8_tile<64>(o, q, w, p, tg);
  else
    i8_tile<32>(o, q, w, p, tg);
}

// t_mm2d: a 24 × 20 matmul2d (a tile that leaves slots of the destination
// unused) of a [m, k_left] by a [n, k_right] read transposed,
// multiply_accumulate; every element the threads hold is stored by its
// coordinates with the thread that held it. Modes: 0 as written, 1 thread 5
// skips run, 2 every thread writes its last slot unchecked, 3 the
// destination is not zeroed first.
struct MM2DParams {
  uint mode, m, n, k_left, k_right;
};

kernel void t_mm2d(device int* out [[buffer(0)]], device int* holder [[buffer(1)]], device const int8_t* a [[buffer(2)]],
                   device const int8_t* b [[buffer(3)]], constant MM2DParams& p [[buffer(4)]],
                   uint tid [[thread_index_in_threadgroup]]) {
  if (p.mode == 1 && tid == 5) return;
  tensor<device int8_t, dextents<int32_t, 2>, tensor_inline> ta((device int8_t*)a, dextents<int32_t, 2>(int(p.k_left), int(p.m)));
  tensor<device int8_t, dextents<int32_t, 2>, tensor_inline> tb((device int8_t*)b, dextents<int32_t, 2>(int(p.k_right), int(p.n)));
  matmul2d<matmul2d_descriptor(24, 20, static_cast<int>(dynamic_extent), false, true, false,
                               matmul2d_descriptor::mode::multiply_accumulate),
           execution_simdgroups<4>>
      mm;
  auto c = mm.get_destination_cooperative_tensor<decltype(ta), decltype(tb), int32_t>();
  for (uint16_t i = 0; i < c.get_capacity(); i++)
    if (p.mode != 3 && c.is_valid_element(i)) c[i] = 0;
  if (p.mode == 2) c[c.get_capacity() - 1] = 0;
  mm.run(ta, tb, c);
  for (uint16_t i = 0; i < c.get_capacity(); i++) {
    if (!c.is_valid_element(i)) continue;
    auto at = c.get_multidimensional_index(i);
    out[at[1] * 20 + at[0]] = c[i];
    holder[at[1] * 20 + at[0]] = int(tid);
  }
}
`

func emuTest(t *testing.T) *Backend {
	t.Helper()
	be, err := newEmulated(context.Background(), Options{}, emuTestKernels)
	if err != nil {
		t.Fatal(err)
	}
	return be
}

func readAll(t *testing.T, be *Backend, x interface{ Len() int }) ([]float32, error) {
	out := make([]float32, x.Len())
	err := be.Read(context.Background(), x.(*tens), 0, out)
	return out, err
}

func nans(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

func TestEmuSimd(t *testing.T) {
	be := emuTest(t)
	const n = 40 // a full SIMD-group and one of 8 lanes
	out := be.Alloc(5 * n)
	be.run("t_simd", [3]int{1, 1, 1}, [3]int{n, 1, 1}, arg(0, out, 0))
	got, err := readAll(t, be, out)
	if err != nil {
		t.Fatal(err)
	}
	for tid := 0; tid < n; tid++ {
		base, lanes := 0, 32
		if tid >= 32 {
			base, lanes = 32, n-32
		}
		var sum, pre float32
		for l := 0; l < lanes; l++ {
			sum += float32(base + l + 1)
			if base+l < tid {
				pre += float32(base + l + 1)
			}
		}
		want := []float32{sum, float32(base + lanes), float32((tid ^ 1) + 1), pre, float32(base + 3)}
		for k, w := range want {
			if g := got[tid*5+k]; g != w {
				t.Errorf("thread %d, function %d: got %v, want %v", tid, k, g, w)
			}
		}
	}
}

func TestEmuBarrier(t *testing.T) {
	be := emuTest(t)
	for _, c := range []struct {
		kernel string
		ok     bool
	}{{"t_reverse", true}, {"t_reverse_nobarrier", false}} {
		const n, groups = 100, 3
		in := be.Alloc(n * groups)
		v := make([]float32, n*groups)
		for i := range v {
			v[i] = float32(i)
		}
		be.Write(in, 0, v)
		out := be.Alloc(n * groups)
		be.run(c.kernel, [3]int{groups, 1, 1}, [3]int{n, 1, 1}, arg(0, out, 0), arg(1, in, 0))
		got, err := readAll(t, be, out)
		if err != nil {
			t.Fatal(err)
		}
		right := true
		for g := 0; g < groups; g++ {
			for i := 0; i < n; i++ {
				if got[g*n+i] != v[g*n+n-1-i] {
					right = false
				}
			}
		}
		if right != c.ok {
			t.Errorf("%s: result right = %v, want %v (a missing barrier must show)", c.kernel, right, c.ok)
		}
	}
}

func TestEmuSimdgroupMatrix(t *testing.T) {
	be := emuTest(t)
	a, b := make([]float32, 64), make([]float32, 64)
	for i := range a {
		a[i] = float32(i%7) - 3
		b[i] = float32(i%5) * 0.5
	}
	ta, tb := be.Alloc(64), be.Alloc(64)
	be.Write(ta, 0, a)
	be.Write(tb, 0, b)
	for _, lanes := range []int{32, 16} {
		c := be.Alloc(64)
		be.Write(c, 0, nans(64))
		be.run("t_matrix", [3]int{1, 1, 1}, [3]int{lanes, 1, 1}, arg(0, c, 0), arg(1, ta, 0), arg(2, tb, 0))
		got, err := readAll(t, be, c)
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 8; r++ {
			for k := 0; k < 8; k++ {
				want := float32(1)
				for j := 0; j < 8; j++ {
					want += a[r*8+j] * b[k*8+j]
				}
				g := got[r*8+k]
				// A SIMD-group of 16 lanes stores only elements 0..31.
				if lanes == 16 && r*8+k >= 32 {
					want = float32(math.NaN())
				}
				if g != want && !(math.IsNaN(float64(g)) && math.IsNaN(float64(want))) {
					t.Errorf("%d lanes: c[%d][%d] = %v, want %v", lanes, r, k, g, want)
				}
			}
		}
	}
	d := be.Alloc(64)
	be.run("t_diagonal", [3]int{1, 1, 1}, [3]int{32, 1, 1}, arg(0, d, 0))
	got, err := readAll(t, be, d)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		want := float32(0)
		if i/8 == i%8 {
			want = 3
		}
		if g != want {
			t.Errorf("diagonal constructor: element %d = %v, want %v", i, g, want)
		}
	}
}

// TestEmuThreadgroupMemory checks that threadgroup memory starts each
// threadgroup as NaN, not as what the previous group left there.
func TestEmuThreadgroupMemory(t *testing.T) {
	be := emuTest(t)
	out := be.Alloc(64)
	be.run("t_tg_uninit", [3]int{2, 1, 1}, [3]int{32, 1, 1}, arg(0, out, 0))
	got, err := readAll(t, be, out)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !math.IsNaN(float64(g)) {
			t.Fatalf("element %d read %v from unwritten threadgroup memory, want NaN", i, g)
		}
	}
}

func TestEmuOverrun(t *testing.T) {
	be := emuTest(t)
	out := be.Alloc(60)
	be.run("t_overrun", [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg(0, out, 0))
	if err := be.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "wrote outside the buffer") {
		t.Errorf("a write past the end: error %v", err)
	}
	out = be.Alloc(64)
	be.run("t_overrun", [3]int{1, 1, 1}, [3]int{64, 1, 1}, arg(0, out, 0))
	if err := be.Sync(context.Background()); err != nil {
		t.Errorf("a write within the buffer: %v", err)
	}
}

func TestEmuDivergence(t *testing.T) {
	be := emuTest(t)
	for _, c := range []struct{ kernel, msg string }{
		{"t_diverge", "barrier divergence"},
		{"t_simd_diverge", "only some lanes"},
	} {
		out := be.Alloc(64)
		be.run(c.kernel, [3]int{2, 1, 1}, [3]int{64, 1, 1}, arg(0, out, 0))
		_, err := readAll(t, be, out)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want one saying %q", c.kernel, err, c.msg)
		}
		// The emulator recovers: the next dispatch runs normally.
		be.run("t_simd", [3]int{1, 1, 1}, [3]int{32, 1, 1}, arg(0, be.Alloc(5*32), 0))
		if err := be.Sync(context.Background()); err != nil {
			t.Errorf("after %s: %v", c.kernel, err)
		}
	}
}

// BenchmarkEmuExchange measures the emulator's cost of one SIMD-group
// exchange (simd_sum) and one threadgroup barrier, per thread.
func BenchmarkEmuExchange(b *testing.B) {
	be, err := newEmulated(context.Background(), Options{}, emuTestKernels)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []string{"t_exchanges", "t_barriers"} {
		for _, n := range []int{32, 128} {
			b.Run(fmt.Sprintf("%s/%d", k, n), func(b *testing.B) {
				out := be.Alloc(n)
				for range b.N {
					be.run(k, [3]int{1, 1, 1}, [3]int{n, 1, 1}, arg(0, out, 0))
					if err := be.Sync(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100*n), "ns/thread-sync")
			})
		}
	}
}
