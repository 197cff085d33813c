// The int8 kernels (after mpp.metal):
//
// quant_i8: activations quantised per row as int8.go specifies, one
//     SIMD-group per row: amax from the bit patterns with the sign cleared
//     (exact, order-independent; a NaN or infinity shows as a pattern at or
//     above 0x7f800000), then scale = amax/127 and inv = 127/amax by precise
//     division, q = clamp(rint(x·inv), −127, 127). Rows are written ldq
//     bytes apart, zero-padded.
// mm_i8_32, mm_i8_64: one TM × 64 tile per threadgroup of 128 threads
//     (i8_tile), the epilogue fused (I8Scaled).

// Bit patterns of 2⁻¹⁰⁰ (the quantisation floor) and of +infinity.
#define I8_FLOOR_BITS 0x0d800000u
#define I8_INF_BITS 0x7f800000u

kernel void quant_i8(device int8_t* q [[buffer(0)]], device float* rs [[buffer(1)]], device const float* x [[buffer(2)]],
                     constant I8Params& p [[buffer(3)]], uint tg [[threadgroup_position_in_grid]],
                     uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]]) {
  uint r = tg * 4 + sg;
  if (r >= p.rows) return;  // the whole SIMD-group leaves together
  device const float* xr = x + r * p.in_cols;
  device int8_t* qr = q + r * p.ldq;
  uint m = 0;
  for (uint i = lane; i < p.in_cols; i += 32) m = max(m, as_type<uint>(xr[i]) & 0x7fffffffu);
  m = simd_max(m);
  if (m >= I8_INF_BITS || m < I8_FLOOR_BITS) {
    for (uint i = lane; i < p.ldq; i += 32) qr[i] = 0;
    if (lane == 0) rs[r] = m >= I8_INF_BITS ? as_type<float>(0x7fc00000u) : 0.0f;
    return;
  }
  float amax = as_type<float>(m);
  float inv = precise::divide(127.0f, amax);
  for (uint i = lane; i < p.ldq; i += 32)
    qr[i] = i < p.in_cols ? int8_t(clamp(rint(xr[i] * inv), -127.0f, 127.0f)) : int8_t(0);
  if (lane == 0) rs[r] = precise::divide(amax, 127.0f);
}

template <int TM>
kernel void mm_i8(device float* out [[buffer(0)]], device const int8_t* q [[buffer(1)]],
                  device const float* rs [[buffer(2)]], device const int8_t* w [[buffer(3)]],
                  device const float* cs [[buffer(4)]], constant I8Params& p [[buffer(5)]],
                  uint2 tg [[threadgroup_position_in_grid]]) {
  I8Scaled o = {out, rs, cs, p.out_cols};
  i8_tile<TM>(o, q, w, p, tg);
}

INSTANTIATE("mm_i8_32", mm_i8, 32)
INSTANTIATE("mm_i8_64", mm_i8, 64)
