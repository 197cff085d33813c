// Matrix products out[rows, O] = x[rows, I] · wᵀ against a stored weight
// [O, I] in any form (see the row loaders in common.metal), accumulating in
// float32.
//
// mm: 32×32 output tiles, four SIMD-groups of 2×2 simdgroup_float8x8
//     accumulators each; x and w tiles of 32 along I are staged in
//     threadgroup memory as float (w converted or dequantised on the way).
// mv: for a few rows: one SIMD-group per four output columns, lanes
//     striding over I, one simd_sum of a float4 per row.

struct MMParams {
  uint rows, out_cols, in_cols, bits, group, row_bytes;
};

#define MM_BM 32
#define MM_BN 32
#define MM_BK 32
#define MM_THREADS 128

template <typename L>
kernel void mm(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
               device const typename L::WT* w [[buffer(2)]], device const typename L::ST* scales [[buffer(3)]],
               device const typename L::ST* biases [[buffer(4)]], constant MMParams& p [[buffer(5)]],
               uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
               uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float xs[MM_BM * MM_BK];
  threadgroup float ws[MM_BN * MM_BK];
  threadgroup float cs[MM_BM * MM_BN];
  L rows = L::make(w, scales, biases, p.in_cols, p.bits, p.group, p.row_bytes);
  uint r0 = tg.y * MM_BM, o0 = tg.x * MM_BN;
  uint sr = (sg / 2) * 16, so = (sg % 2) * 16;
  simdgroup_float8x8 acc[2][2];
  for (uint i = 0; i < 2; i++)
    for (uint j = 0; j < 2; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (uint k0 = 0; k0 < p.in_cols; k0 += MM_BK) {
    for (uint e = tid; e < MM_BM * MM_BK; e += MM_THREADS) {
      uint r = e / MM_BK, c = k0 + e % MM_BK;
      bool inc = c < p.in_cols;
      xs[e] = (inc && r0 + r < p.rows) ? x[(r0 + r) * p.in_cols + c] : 0.0f;
      ws[e] = (inc && o0 + r < p.out_cols) ? rows.at(o0 + r, c) : 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kk = 0; kk < MM_BK; kk += 8) {
      simdgroup_float8x8 a[2], b[2];
      for (uint i = 0; i < 2; i++) simdgroup_load(a[i], xs + (sr + 8 * i) * MM_BK + kk, MM_BK);
      for (uint j = 0; j < 2; j++) simdgroup_load(b[j], ws + (so + 8 * j) * MM_BK + kk, MM_BK, ulong2(0), true);
      for (uint i = 0; i < 2; i++)
        for (uint j = 0; j < 2; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (uint i = 0; i < 2; i++)
    for (uint j = 0; j < 2; j++) simdgroup_store(acc[i][j], cs + (sr + 8 * i) * MM_BN + so + 8 * j, MM_BN);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint e = tid; e < MM_BM * MM_BN; e += MM_THREADS) {
    uint r = r0 + e / MM_BN, o = o0 + e % MM_BN;
    if (r < p.rows && o < p.out_cols) out[r * p.out_cols + o] = cs[e];
  }
}

INSTANTIATE_ROWS("mm", mm)

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
