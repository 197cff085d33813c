// Int8 (W8A8) projections on the neural accelerators through Metal
// Performance Primitives: out[rows, O] = x[rows, I] · wᵀ by the arithmetic of
// tensor/int8.go. This file holds what the probe and the real kernels share:
// the headers, the matmul2d descriptors and operand types, and the tile
// function both run, so that the probe compiles exactly what the kernels
// use. The int8 library is kernels/int8/mpp.metal + int8.metal; the probe is
// mpp.metal + probe.metal. Neither includes the float library.
#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

#ifndef INSTANTIATE
#define INSTANTIATE(name, func, ...) \
  template [[host_name(name)]] [[kernel]] decltype(func<__VA_ARGS__>) func<__VA_ARGS__>;
#endif

// I8Params are the parameters of every int8 kernel: the activation rows,
// the weight's output channels and in-features, and the row stride of the
// quantised activations (in-features rounded up to I8_LDQ_ALIGN).
struct I8Params {
  uint rows, out_cols, in_cols, ldq;
};

// Tiles (see docs/metal.md): a threadgroup of four SIMD-groups computes
// TM activation rows × I8_TN weight channels, TM = 32 for up to 32 rows and
// 64 otherwise, over the whole of K in one matmul2d run.
#define I8_TN 64
#define I8_SIMDGROUPS 4
#define I8_THREADS 128
#define I8_LDQ_ALIGN 64

// i8_matmul is the matmul2d of a TM × I8_TN tile: the left operand is TM
// rows of quantised activations ([rows, K], K innermost), the right one
// I8_TN weight channels stored [O, K] and read transposed, K taken from the
// operands (dynamic), exact arithmetic (int8 × int8 → int32 has no relaxed
// form to choose), destination overwritten.
template <int TM>
using i8_matmul = matmul2d<matmul2d_descriptor(TM, I8_TN, static_cast<int>(dynamic_extent), false, true, false,
                                               matmul2d_descriptor::mode::multiply),
                           execution_simdgroups<I8_SIMDGROUPS>>;

// i8_operand is an int8 matrix in device memory: extents (K, rows), strides
// (1, row stride).
typedef tensor<device int8_t, dextents<int32_t, 2>, tensor_inline> i8_operand;

// I8Scaled is the epilogue of int8.go: out = (float(acc) · rowScale) ·
// chanScale, two rounded multiplies in that order.
struct I8Scaled {
  device float* out;
  device const float* rs;
  device const float* cs;
  uint ld;
  void put(uint r, uint c, int acc) const { out[r * ld + c] = (float(acc) * rs[r]) * cs[c]; }
};

// i8_tile computes the tile (tg.y, tg.x) of the product of the quantised
// activations q and the weight w, and hands every int32 sum inside the
// matrix to o.put(row, channel, sum). Every thread of the threadgroup runs
// it (matmul2d's run is uniform over its four SIMD-groups). Rows and
// channels past the matrix are outside the operands' extents, which the
// operation checks; their sums are never handed on.
template <int TM, typename Out>
inline void i8_tile(Out o, device const int8_t* q, device const int8_t* w, constant I8Params& p, uint2 tg) {
  int r0 = int(tg.y) * TM, c0 = int(tg.x) * I8_TN;
  int k = int(p.in_cols), rows = int(p.rows) - r0, cols = int(p.out_cols) - c0;
  i8_operand a((device int8_t*)q + r0 * int(p.ldq), dextents<int32_t, 2>(k, rows), array<int32_t, 2>({1, int(p.ldq)}));
  i8_operand b((device int8_t*)w + c0 * k, dextents<int32_t, 2>(k, cols), array<int32_t, 2>({1, k}));
  i8_matmul<TM> mm;
  auto acc = mm.template get_destination_cooperative_tensor<decltype(a), decltype(b), int32_t>();
  // Zeroed although mode::multiply overwrites: the sums stay right should an
  // implementation accumulate into the destination regardless.
  for (uint16_t i = 0; i < acc.get_capacity(); i++)
    if (acc.is_valid_element(i)) acc[i] = 0;
  mm.run(a, b, acc);
  for (uint16_t i = 0; i < acc.get_capacity(); i++) {
    if (!acc.is_valid_element(i)) continue;
    auto at = acc.get_multidimensional_index(i);  // (channel, row) in the tile
    if (at[1] < rows && at[0] < cols) o.put(uint(r0 + at[1]), uint(c0 + at[0]), acc[i]);
  }
}
