// Matrix products out[rows, O] = x[rows, I] · wᵀ against a stored weight
// [O, I] in any form (see the row loaders in common.metal), accumulating in
// float32.
//
// mm, mm64: 32×32 or 64×64 output tiles, four SIMD-groups of 2×2 or 4×4
//     simdgroup_float8x8 accumulators each; x and w tiles of 32 along I are
//     staged in threadgroup memory as float (w converted or dequantised on
//     the way).
// mv: for a few rows: one SIMD-group per four output columns, lanes
//     striding over I, one simd_sum of a float4 per row.

struct MMParams {
  uint rows, out_cols, in_cols, bits, group, row_bytes;
};

#define MM_BK 32
#define MM_THREADS 128

// mm computes one T×T output tile (T = 32 or 64) with four SIMD-groups in a
// 2×2 layout, each owning a (T/2)×(T/2) block of (T/16)² accumulators. x and
// w tiles of MM_BK along I share one threadgroup array; the w tile is loaded
// transposed into the simdgroup matrices. Full tiles are stored straight to
// device memory, edge tiles through the same threadgroup array.
template <typename L, uint T>
kernel void mm(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
               device const typename L::WT* w [[buffer(2)]], device const typename L::ST* scales [[buffer(3)]],
               device const typename L::ST* biases [[buffer(4)]], constant MMParams& p [[buffer(5)]],
               uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
               uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float smem[2 * T * MM_BK];  // x tile, then w tile; the output tile at the end
  L rows = L::make(w, scales, biases, p.in_cols, p.bits, p.group, p.row_bytes);
  uint r0 = tg.y * T, o0 = tg.x * T;
  uint sr = (sg / 2) * (T / 2), so = (sg % 2) * (T / 2);
  simdgroup_float8x8 acc[T / 16][T / 16];
  for (uint i = 0; i < T / 16; i++)
    for (uint j = 0; j < T / 16; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (uint k0 = 0; k0 < p.in_cols; k0 += MM_BK) {
    for (uint e = tid; e < T * MM_BK; e += MM_THREADS) {
      uint r = e / MM_BK, c = k0 + e % MM_BK;
      bool inc = c < p.in_cols;
      smem[e] = (inc && r0 + r < p.rows) ? x[(r0 + r) * p.in_cols + c] : 0.0f;
      smem[T * MM_BK + e] = (inc && o0 + r < p.out_cols) ? rows.at(o0 + r, c) : 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kk = 0; kk < MM_BK; kk += 8) {
      simdgroup_float8x8 a[T / 16], b[T / 16];
      for (uint i = 0; i < T / 16; i++) simdgroup_load(a[i], smem + (sr + 8 * i) * MM_BK + kk, MM_BK);
      for (uint j = 0; j < T / 16; j++)
        simdgroup_load(b[j], smem + T * MM_BK + (so + 8 * j) * MM_BK + kk, MM_BK, ulong2(0), true);
      for (uint i = 0; i < T / 16; i++)
        for (uint j = 0; j < T / 16; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (r0 + T <= p.rows && o0 + T <= p.out_cols) {  // uniform across the threadgroup
    for (uint i = 0; i < T / 16; i++)
      for (uint j = 0; j < T / 16; j++)
        simdgroup_store(acc[i][j], out + (r0 + sr + 8 * i) * p.out_cols + o0 + so + 8 * j, p.out_cols);
    return;
  }
  for (uint i = 0; i < T / 16; i++)
    for (uint j = 0; j < T / 16; j++) simdgroup_store(acc[i][j], smem + (sr + 8 * i) * T + so + 8 * j, T);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint e = tid; e < T * T; e += MM_THREADS) {
    uint r = r0 + e / T, o = o0 + e % T;
    if (r < p.rows && o < p.out_cols) out[r * p.out_cols + o] = smem[e];
  }
}

INSTANTIATE_ROWS_T("mm", mm, 32)
INSTANTIATE_ROWS_T("mm64", mm, 64)

#define MV_MAX_ROWS 8
#define MV_SIMDGROUPS 4
#define MV_COLS 4

template <typename L>
kernel void mv(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
               device const typename L::WT* w [[buffer(2)]], device const typename L::ST* scales [[buffer(3)]],
               device const typename L::ST* biases [[buffer(4)]], constant MMParams& p [[buffer(5)]],
               uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
               uint lane [[thread_index_in_simdgroup]]) {
  uint o0 = (tg * MV_SIMDGROUPS + sg) * MV_COLS;
  if (o0 >= p.out_cols) return;  // the whole SIMD-group leaves together
  L rows = L::make(w, scales, biases, p.in_cols, p.bits, p.group, p.row_bytes);
  float4 acc[MV_MAX_ROWS];
  for (uint r = 0; r < MV_MAX_ROWS; r++) acc[r] = float4(0.0f);
  for (uint c = lane; c < p.in_cols; c += 32) {
    float4 wv;
    for (uint j = 0; j < MV_COLS; j++) wv[j] = o0 + j < p.out_cols ? rows.at(o0 + j, c) : 0.0f;
    for (uint r = 0; r < MV_MAX_ROWS; r++)
      if (r < p.rows) acc[r] += wv * x[r * p.in_cols + c];
  }
  for (uint r = 0; r < p.rows; r++) {
    float4 s = simd_sum(acc[r]);
    if (lane == 0)
      for (uint j = 0; j < MV_COLS; j++)
        if (o0 + j < p.out_cols) out[r * p.out_cols + o0 + j] = s[j];
  }
}

INSTANTIATE_ROWS("mv", mv)
