// Gated DeltaNet pieces: the causal depthwise conv with its state, the q/k
// normalisation and gates, and the gated delta rule itself in the chunked
// form of qwen35.md §5.5 with a float32 state.

struct ConvParams {
  uint T, D, K, row, has_state, len;
};

// causal_conv: out[t, d] = silu(Σ_j w[d, j] · X[t − (K−1) + j, d]) over one
// batch row, X reaching into the row's state (or zeros) before position 0.
kernel void causal_conv(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                        device const float* w [[buffer(2)]], device const float* state [[buffer(3)]],
                        constant ConvParams& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]]) {
  uint d = gid.x, t = gid.y;
  if (d >= p.D || t >= p.T) return;
  float acc = 0.0f;
  for (uint j = 0; j < p.K; j++) {
    int s = int(t) - int(p.K - 1) + int(j);
    float xv;
    if (s >= 0)
      xv = x[(p.row * p.T + uint(s)) * p.D + d];
    else
      xv = p.has_state != 0 ? state[uint(int(p.K - 1) + s) * p.D + d] : 0.0f;
    acc += w[d * p.K + j] * xv;
  }
  out[(p.row * p.T + t) * p.D + d] = silu(acc);
}

// conv_state writes the K−1 inputs ending at position len−1 of the row,
// oldest first, reaching into the old state when len < K−1.
kernel void conv_state(device float* ns [[buffer(0)]], device const float* x [[buffer(1)]],
                       device const float* state [[buffer(2)]], constant ConvParams& p [[buffer(3)]],
                       uint2 gid [[thread_position_in_grid]]) {
  uint d = gid.x, i = gid.y;
  if (d >= p.D || i + 1 >= p.K) return;
  int s = int(p.len) - int(p.K - 1) + int(i);
  float v;
  if (s >= 0)
    v = x[(p.row * p.T + uint(s)) * p.D + d];
  else
    v = p.has_state != 0 ? state[uint(int(p.K - 1) + s) * p.D + d] : 0.0f;
  ns[i * p.D + d] = v;
}

struct DeltaParams {
  uint T, NK, NV, DK, DV, row, tokens;
};

// delta_qk L2-normalises the queries (then scales them by DK^−½) and keys of
// every (token, key head): one SIMD-group each.
kernel void delta_qk(device float* qn [[buffer(0)]], device float* kn [[buffer(1)]],
                     device const float* qkv [[buffer(2)]], constant DeltaParams& p [[buffer(3)]],
                     uint2 tg [[threadgroup_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  uint h = tg.x, tok = tg.y;
  uint C = 2 * p.NK * p.DK + p.NV * p.DV;
  device const float* qr = qkv + tok * C + h * p.DK;
  device const float* kr = qkv + tok * C + p.NK * p.DK + h * p.DK;
  float sq = 0.0f, sk = 0.0f;
  for (uint d = lane; d < p.DK; d += 32) {
    sq += qr[d] * qr[d];
    sk += kr[d] * kr[d];
  }
  sq = simd_sum(sq);
  sk = simd_sum(sk);
  float iq = rsqrt(sq + 1e-6f) * rsqrt(float(p.DK));
  float ik = rsqrt(sk + 1e-6f);
  for (uint d = lane; d < p.DK; d += 32) {
    qn[(tok * p.NK + h) * p.DK + d] = qr[d] * iq;
    kn[(tok * p.NK + h) * p.DK + d] = kr[d] * ik;
  }
}

// delta_gates: beta = sigmoid(b), g = −exp(A_log)·softplus(a + dt_bias).
kernel void delta_gates(device float* beta [[buffer(0)]], device float* g [[buffer(1)]],
                        device const float* a [[buffer(2)]], device const float* b [[buffer(3)]],
                        device const float* a_log [[buffer(4)]], device const float* dt_bias [[buffer(5)]],
                        constant DeltaParams& p [[buffer(6)]], uint2 gid [[thread_position_in_grid]]) {
  uint j = gid.x, tok = gid.y;
  if (j >= p.NV || tok >= p.tokens) return;
  uint i = tok * p.NV + j;
  beta[i] = sigmoid(b[i]);
  float y = a[i] + dt_bias[j];
  float sp;
  if (y > 20.0f) {
    sp = y;
  } else {
    float e = exp(y);
    sp = e < 1e-4f ? e * (1.0f - 0.5f * e) : log(1.0f + e);
  }
  g[i] = -exp(a_log[j]) * sp;
}

#define DELTA_MAX_DK 128
#define DELTA_MAX_C 64

struct DeltaChunkParams {
  uint T, NK, NV, DK, DV, row, C, NC;
};

// Padded sizes of the per-chunk scratch: chunk rows and key dims to whole
// 8×8 tiles, value dims to whole blocks of 32.
inline uint pad8(uint n) { return (n + 7) & ~7u; }
inline uint pad32(uint n) { return (n + 31) & ~31u; }

// The gated delta rule in the chunked form of qwen35.md §5.5, in two kernels.
// Chunks of C positions start at each row's first position; the last chunk of
// a row may be shorter (L < C positions), which equals padding it with zeros.
// With C8 = pad8(C), K8 = pad8(DK), V32 = pad32(DV):
//
// delta_chunk_prep does everything that does not depend on the state, for
// every (chunk, value head, row) at once: one threadgroup of 128 threads each.
// It writes per chunk, at block index ((row·NV + head)·NC + chunk), zero
// wherever a row ≥ L or a column ≥ DK (DV) pads a tile:
//   e:  [2C]       exp(γ_i), then exp(γ_{L−1} − γ_i)
//   w:  [C8, K8]   −W, W = (I + A)⁻¹ diag(exp γ) Kβ (negated so that V' = U + (−W) S
//                  is one multiply-accumulate onto U)
//   u:  [C8, V32]  U = (I + A)⁻¹ Vβ
//   pm: [C8, C8]   P = (Q Kᵀ) ⊙ D, lower triangle with the diagonal, zero above
//   qe: [C8, K8]   diag(exp γ) Q
//   kd: [C8, K8]   diag(exp(γ_{L−1} − γ)) K
// with γ the cumulative log-decay inside the chunk, D_ij = exp(γ_i − γ_j) for
// j ≤ i (masked before exp) and A = strictly_lower(Kβ Kᵀ ⊙ D). The triangular
// solves run one column of [W | U] per thread by forward substitution, so
// they need no barrier.
kernel void delta_chunk_prep(device float* e [[buffer(0)]], device float* w [[buffer(1)]],
                             device float* u [[buffer(2)]], device float* pm [[buffer(3)]],
                             device float* qe [[buffer(4)]], device float* kd [[buffer(5)]],
                             device const float* qn [[buffer(6)]], device const float* kn [[buffer(7)]],
                             device const float* qkv [[buffer(8)]], device const float* beta [[buffer(9)]],
                             device const float* g [[buffer(10)]], constant DeltaChunkParams& p [[buffer(11)]],
                             uint3 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float gam[DELTA_MAX_C];
  threadgroup float bt[DELTA_MAX_C];
  threadgroup float A[DELTA_MAX_C * DELTA_MAX_C];
  const uint nth = 128;
  uint C8 = pad8(p.C), K8 = pad8(p.DK), V32 = pad32(p.DV);
  uint ch = tg.x, j = tg.y, row = tg.z;
  uint c0 = ch * p.C;
  uint L = min(p.C, p.T - c0);
  uint kh = j / (p.NV / p.NK);
  uint W = 2 * p.NK * p.DK + p.NV * p.DV;
  uint tok0 = row * p.T + c0;
  uint blk = (row * p.NV + j) * p.NC + ch;
  device float* eb = e + blk * 2 * p.C;
  device float* wb = w + blk * C8 * K8;
  device float* ub = u + blk * C8 * V32;
  device float* pb = pm + blk * C8 * C8;
  device float* qb = qe + blk * C8 * K8;
  device float* kb = kd + blk * C8 * K8;

  if (tid < L) {
    gam[tid] = g[(tok0 + tid) * p.NV + j];
    bt[tid] = beta[(tok0 + tid) * p.NV + j];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid == 0) {
    // γ_i = Σ_{s ≤ i} g_s, summed in order.
    float acc = 0.0f;
    for (uint i = 0; i < L; i++) {
      acc += gam[i];
      gam[i] = acc;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float gl = gam[L - 1];
  for (uint i = tid; i < L; i += nth) {
    eb[i] = exp(gam[i]);
    eb[p.C + i] = exp(gl - gam[i]);
  }
  // Scaled copies of Q and K, padded.
  for (uint x = tid; x < C8 * K8; x += nth) {
    uint r = x / K8, d = x % K8;
    float qv = 0.0f, kv = 0.0f;
    if (r < L && d < p.DK) {
      qv = exp(gam[r]) * qn[((tok0 + r) * p.NK + kh) * p.DK + d];
      kv = exp(gl - gam[r]) * kn[((tok0 + r) * p.NK + kh) * p.DK + d];
    }
    qb[x] = qv;
    kb[x] = kv;
  }
  // A (strictly lower) into threadgroup memory, P (lower with diagonal, zero
  // elsewhere) to device memory: one dot product over DK per entry.
  for (uint x = tid; x < C8 * C8; x += nth) {
    uint r = x / C8, c = x % C8;
    if (c > r || r >= L) {
      pb[x] = 0.0f;
      continue;
    }
    device const float* kr = kn + ((tok0 + r) * p.NK + kh) * p.DK;
    device const float* qr = qn + ((tok0 + r) * p.NK + kh) * p.DK;
    device const float* kc = kn + ((tok0 + c) * p.NK + kh) * p.DK;
    float dkk = 0.0f, dqk = 0.0f;
    for (uint d = 0; d < p.DK; d++) {
      dkk += kr[d] * kc[d];
      dqk += qr[d] * kc[d];
    }
    float dec = exp(gam[r] - gam[c]);
    pb[x] = dqk * dec;
    if (c < r) A[r * DELTA_MAX_C + c] = bt[r] * dkk * dec;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Forward substitution, one column of [W | U] per thread at a time:
  // x_i = rhs_i − Σ_{m<i} A_im x_m; padding columns and rows get zeros.
  for (uint col = tid; col < K8 + V32; col += nth) {
    bool isw = col < K8;
    uint cc = isw ? col : col - K8;
    bool real = cc < (isw ? p.DK : p.DV);
    float xs[DELTA_MAX_C];
    for (uint i = 0; i < C8; i++) {
      float x = 0.0f;
      if (real && i < L) {
        uint tok = tok0 + i;
        if (isw)
          x = exp(gam[i]) * bt[i] * kn[(tok * p.NK + kh) * p.DK + cc];
        else
          x = bt[i] * qkv[tok * W + 2 * p.NK * p.DK + j * p.DV + cc];
        for (uint m = 0; m < i; m++) x -= A[i * DELTA_MAX_C + m] * xs[m];
        xs[i] = x;
      }
      if (isw)
        wb[i * K8 + cc] = -x;
      else
        ub[i * V32 + cc] = x;
    }
  }
}

// delta_chunk_scan carries the state of one batch row through its chunks in
// order. One threadgroup of four SIMD-groups per (block of 32 value dims,
// value head); SIMD-group s owns the 8 value columns 8s..8s+7 of the block.
// Every product of the chunk, for those columns, needs only those columns of
// the state and of V', so the SIMD-groups never exchange data: each keeps its
// part of S [K8, 32] and V' [C8, 32] in threadgroup memory (up to 24 KiB in
// all) and needs only SIMD-group barriers. Per chunk, with 8×8
// simdgroup_float8x8 tiles (the chunk-side operands read from the scratch of
// delta_chunk_prep):
//   V' = U + (−W) S
//   O  = diag(exp γ) Q S + P V'            (P lower triangular: tiles m ≤ i)
//   S ← exp(γ_{L−1}) S + (diag(exp(γ_{L−1} − γ)) K)ᵀ V'
kernel void delta_chunk_scan(device float* out [[buffer(0)]], device float* state [[buffer(1)]],
                             device const float* e [[buffer(2)]], device const float* w [[buffer(3)]],
                             device const float* u [[buffer(4)]], device const float* pm [[buffer(5)]],
                             device const float* qe [[buffer(6)]], device const float* kd [[buffer(7)]],
                             constant DeltaChunkParams& p [[buffer(8)]], uint2 tg [[threadgroup_position_in_grid]],
                             uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float S[DELTA_MAX_DK * 32];
  threadgroup float V[DELTA_MAX_C * 32];
  threadgroup float Ostage[4 * 64];
  uint C8 = pad8(p.C), K8 = pad8(p.DK), V32 = pad32(p.DV);
  uint j = tg.y;
  uint col0 = tg.x * 32 + sg * 8;  // first value column of this SIMD-group
  uint lc = lane % 8, lr = lane / 8;
  device float* st = state + j * p.DK * p.DV;
  // This SIMD-group's columns of S and V (row stride 32) start at S + so and
  // V + so; its output staging tile at Ostage + 64·sg. (No threadgroup
  // pointer variables: the emulator maps threadgroup to static.)
  uint so = sg * 8;
  for (uint k = lr; k < K8; k += 4)
    S[so + k * 32 + lc] = (k < p.DK && col0 + lc < p.DV) ? st[k * p.DV + col0 + lc] : 0.0f;
  simdgroup_barrier(mem_flags::mem_threadgroup);
  for (uint ch = 0; ch < p.NC; ch++) {
    uint c0 = ch * p.C;
    uint L = min(p.C, p.T - c0);
    uint nt = (L + 7) / 8;  // row tiles of the chunk
    uint tok0 = p.row * p.T + c0;
    uint blk = (p.row * p.NV + j) * p.NC + ch;
    device const float* eb = e + blk * 2 * p.C;
    device const float* wb = w + blk * C8 * K8;
    device const float* ub = u + blk * C8 * V32 + col0;
    device const float* pb = pm + blk * C8 * C8;
    device const float* qb = qe + blk * C8 * K8;
    device const float* kb = kd + blk * C8 * K8;
    simdgroup_float8x8 v[DELTA_MAX_C / 8], o[DELTA_MAX_C / 8];
    for (uint i = 0; i < nt; i++) {
      simdgroup_load(v[i], ub + i * 8 * V32, V32);
      o[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    for (uint kk = 0; kk < K8; kk += 8) {
      simdgroup_float8x8 s;
      simdgroup_load(s, S + so + kk * 32, 32);
      for (uint i = 0; i < nt; i++) {
        simdgroup_float8x8 a;
        simdgroup_load(a, wb + i * 8 * K8 + kk, K8);
        simdgroup_multiply_accumulate(v[i], a, s, v[i]);
        simdgroup_load(a, qb + i * 8 * K8 + kk, K8);
        simdgroup_multiply_accumulate(o[i], a, s, o[i]);
      }
    }
    for (uint i = 0; i < nt; i++) simdgroup_store(v[i], V + so + i * 8 * 32, 32);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = 0; i < nt; i++) {
      for (uint m = 0; m <= i; m++) {
        simdgroup_float8x8 a, b;
        simdgroup_load(a, pb + i * 8 * C8 + m * 8, C8);
        simdgroup_load(b, V + so + m * 8 * 32, 32);
        simdgroup_multiply_accumulate(o[i], a, b, o[i]);
      }
      device float* od = out + (tok0 + i * 8) * p.NV * p.DV + j * p.DV + col0;
      if (i * 8 + 8 <= L && col0 + 8 <= p.DV) {
        simdgroup_store(o[i], od, p.NV * p.DV);
      } else {
        simdgroup_store(o[i], Ostage + sg * 64, 8);
        simdgroup_barrier(mem_flags::mem_threadgroup);
        for (uint x = lane; x < 64; x += 32)
          if (i * 8 + x / 8 < L && col0 + x % 8 < p.DV) od[(x / 8) * p.NV * p.DV + x % 8] = Ostage[sg * 64 + x];
        simdgroup_barrier(mem_flags::mem_threadgroup);
      }
    }
    // New state tiles in registers first: every lane must have read the old
    // ones before any lane stores.
    simdgroup_float8x8 decay = simdgroup_float8x8(eb[L - 1]);
    simdgroup_float8x8 ns[DELTA_MAX_DK / 8];
    for (uint t = 0; t < K8 / 8; t++) {
      simdgroup_float8x8 s;
      simdgroup_load(s, S + so + t * 8 * 32, 32);
      simdgroup_multiply(ns[t], decay, s);
      for (uint m = 0; m < nt; m++) {
        simdgroup_float8x8 a, b;
        simdgroup_load(a, kb + m * 8 * K8 + t * 8, K8, ulong2(0), true);
        simdgroup_load(b, V + so + m * 8 * 32, 32);
        simdgroup_multiply_accumulate(ns[t], a, b, ns[t]);
      }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (uint t = 0; t < K8 / 8; t++) simdgroup_store(ns[t], S + so + t * 8 * 32, 32);
    simdgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (uint k = lr; k < p.DK; k += 4)
    if (col0 + lc < p.DV) st[k * p.DV + col0 + lc] = S[so + k * 32 + lc];
}
