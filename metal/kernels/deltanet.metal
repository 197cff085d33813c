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

// The gated delta rule in the chunked form of qwen35.md §5.5, in two kernels.
// Chunks of C positions start at each row's first position; the last chunk of
// a row may be shorter (L < C positions), which equals padding it with zeros.
//
// delta_chunk_prep does everything that does not depend on the state, for
// every (chunk, value head, row) at once: one threadgroup of 128 threads each.
// It writes per chunk, at block index ((row·NV + head)·NC + chunk):
//   e: [2C]    exp(γ_i), then exp(γ_{L−1} − γ_i)
//   w: [C, DK] W = (I + A)⁻¹ diag(exp γ) Kβ
//   u: [C, DV] U = (I + A)⁻¹ Vβ
//   pm: [C, C] P = (Q Kᵀ) ⊙ D, lower triangle with the diagonal (the rest unwritten)
// with γ the cumulative log-decay inside the chunk, D_ij = exp(γ_i − γ_j) for
// j ≤ i (masked before exp) and A = strictly_lower(Kβ Kᵀ ⊙ D). The triangular
// solves run one column of [W | U] per thread by forward substitution, so
// they need no barrier.
kernel void delta_chunk_prep(device float* e [[buffer(0)]], device float* w [[buffer(1)]],
                             device float* u [[buffer(2)]], device float* pm [[buffer(3)]],
                             device const float* qn [[buffer(4)]], device const float* kn [[buffer(5)]],
                             device const float* qkv [[buffer(6)]], device const float* beta [[buffer(7)]],
                             device const float* g [[buffer(8)]], constant DeltaChunkParams& p [[buffer(9)]],
                             uint3 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float gam[DELTA_MAX_C];
  threadgroup float bt[DELTA_MAX_C];
  threadgroup float A[DELTA_MAX_C * DELTA_MAX_C];
  const uint nth = 128;
  uint ch = tg.x, j = tg.y, row = tg.z;
  uint c0 = ch * p.C;
  uint L = min(p.C, p.T - c0);
  uint kh = j / (p.NV / p.NK);
  uint W = 2 * p.NK * p.DK + p.NV * p.DV;
  uint tok0 = row * p.T + c0;
  uint blk = (row * p.NV + j) * p.NC + ch;
  device float* eb = e + blk * 2 * p.C;
  device float* wb = w + blk * p.C * p.DK;
  device float* ub = u + blk * p.C * p.DV;
  device float* pb = pm + blk * p.C * p.C;

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
  // A (strictly lower) into threadgroup memory, P (lower with diagonal) to
  // device memory: one dot product over DK per entry.
  for (uint x = tid; x < L * L; x += nth) {
    uint r = x / L, c = x % L;
    if (c > r) continue;
    device const float* kr = kn + ((tok0 + r) * p.NK + kh) * p.DK;
    device const float* qr = qn + ((tok0 + r) * p.NK + kh) * p.DK;
    device const float* kc = kn + ((tok0 + c) * p.NK + kh) * p.DK;
    float dkk = 0.0f, dqk = 0.0f;
    for (uint d = 0; d < p.DK; d++) {
      dkk += kr[d] * kc[d];
      dqk += qr[d] * kc[d];
    }
    float dec = exp(gam[r] - gam[c]);
    pb[r * p.C + c] = dqk * dec;
    if (c < r) A[r * DELTA_MAX_C + c] = bt[r] * dkk * dec;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Forward substitution, one column of [W | U] per thread at a time:
  // x_i = rhs_i − Σ_{m<i} A_im x_m.
  for (uint col = tid; col < p.DK + p.DV; col += nth) {
    float xs[DELTA_MAX_C];
    for (uint i = 0; i < L; i++) {
      uint tok = tok0 + i;
      float rhs;
      if (col < p.DK)
        rhs = exp(gam[i]) * bt[i] * kn[(tok * p.NK + kh) * p.DK + col];
      else
        rhs = bt[i] * qkv[tok * W + 2 * p.NK * p.DK + j * p.DV + (col - p.DK)];
      for (uint m = 0; m < i; m++) rhs -= A[i * DELTA_MAX_C + m] * xs[m];
      xs[i] = rhs;
      if (col < p.DK)
        wb[i * p.DK + col] = rhs;
      else
        ub[i * p.DV + (col - p.DK)] = rhs;
    }
  }
}

// delta_chunk_scan carries the state of one batch row through its chunks in
// order. One threadgroup of 128 threads per (block of 32 value dims, value
// head): thread (lane c, group r) owns state column c of the block and the
// chunk rows (and state rows) ≡ r mod 4. The block of the state, S [DK, 32],
// and V' [C, 32] live in threadgroup memory (24 KiB). Per chunk:
//   V' = U − W S,  O = diag(exp γ) Q S + P V',
//   S ← exp(γ_{L−1}) S + (diag(exp(γ_{L−1} − γ)) K)ᵀ V'
// with two barriers: V' complete before it is used, and the new S complete
// before the next chunk reads it.
kernel void delta_chunk_scan(device float* out [[buffer(0)]], device float* state [[buffer(1)]],
                             device const float* e [[buffer(2)]], device const float* w [[buffer(3)]],
                             device const float* u [[buffer(4)]], device const float* pm [[buffer(5)]],
                             device const float* qn [[buffer(6)]], device const float* kn [[buffer(7)]],
                             constant DeltaChunkParams& p [[buffer(8)]], uint2 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float S[DELTA_MAX_DK * 32];
  threadgroup float V[DELTA_MAX_C * 32];
  uint c = tid % 32, r = tid / 32;
  uint j = tg.y;
  uint col = tg.x * 32 + c;
  bool active = col < p.DV;
  uint kh = j / (p.NV / p.NK);
  device float* st = state + j * p.DK * p.DV;
  for (uint k = r; k < p.DK; k += 4) S[k * 32 + c] = active ? st[k * p.DV + col] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint ch = 0; ch < p.NC; ch++) {
    uint c0 = ch * p.C;
    uint L = min(p.C, p.T - c0);
    uint tok0 = p.row * p.T + c0;
    uint blk = (p.row * p.NV + j) * p.NC + ch;
    device const float* eb = e + blk * 2 * p.C;
    device const float* wb = w + blk * p.C * p.DK;
    device const float* ub = u + blk * p.C * p.DV;
    device const float* pb = pm + blk * p.C * p.C;
    float qs[DELTA_MAX_C / 4];
    for (uint i = r; i < L; i += 4) {
      device const float* qr = qn + ((tok0 + i) * p.NK + kh) * p.DK;
      float ws = 0.0f, q = 0.0f;
      for (uint k = 0; k < p.DK; k++) {
        float s = S[k * 32 + c];
        ws += wb[i * p.DK + k] * s;
        q += qr[k] * s;
      }
      V[i * 32 + c] = (active ? ub[i * p.DV + col] : 0.0f) - ws;
      qs[i / 4] = eb[i] * q;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = r; i < L; i += 4) {
      float o = qs[i / 4];
      for (uint m = 0; m <= i; m++) o += pb[i * p.C + m] * V[m * 32 + c];
      if (active) out[(tok0 + i) * p.NV * p.DV + j * p.DV + col] = o;
    }
    float el = eb[L - 1];
    for (uint k = r; k < p.DK; k += 4) {
      float s = el * S[k * 32 + c];
      for (uint i = 0; i < L; i++) s += eb[p.C + i] * kn[((tok0 + i) * p.NK + kh) * p.DK + k] * V[i * 32 + c];
      S[k * 32 + c] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (active)
    for (uint k = r; k < p.DK; k += 4) st[k * p.DV + col] = S[k * 32 + c];
}
