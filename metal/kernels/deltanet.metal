// Gated DeltaNet pieces: the causal depthwise conv with its state, the q/k
// normalisation and gates, and the gated delta rule itself, run as the
// recurrence of qwen35.md §5.4 per position with a float32 state.

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

// delta_scan runs the recurrence over the T positions of one batch row. One
// threadgroup (one SIMD-group) per (value head, block of 32 value dims); lane
// c owns column c of the head's [DK, DV] state, kept in threadgroup memory,
// so lanes never exchange data and no barrier is needed. The state is read
// from and written back to the row's state tensor.
kernel void delta_scan(device float* out [[buffer(0)]], device float* state [[buffer(1)]],
                       device const float* qn [[buffer(2)]], device const float* kn [[buffer(3)]],
                       device const float* qkv [[buffer(4)]], device const float* beta [[buffer(5)]],
                       device const float* g [[buffer(6)]], constant DeltaParams& p [[buffer(7)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float S[DELTA_MAX_DK * 32];
  uint j = tg.y;
  uint c = tg.x * 32 + lane;
  if (c >= p.DV) return;
  uint kh = j / (p.NV / p.NK);
  uint C = 2 * p.NK * p.DK + p.NV * p.DV;
  device float* st = state + j * p.DK * p.DV;
  for (uint i = 0; i < p.DK; i++) S[i * 32 + lane] = st[i * p.DV + c];
  for (uint t = 0; t < p.T; t++) {
    uint tok = p.row * p.T + t;
    float alpha = exp(g[tok * p.NV + j]);
    float bt = beta[tok * p.NV + j];
    device const float* kr = kn + (tok * p.NK + kh) * p.DK;
    device const float* qr = qn + (tok * p.NK + kh) * p.DK;
    float m = 0.0f;
    for (uint i = 0; i < p.DK; i++) {
      float s = S[i * 32 + lane] * alpha;
      S[i * 32 + lane] = s;
      m += s * kr[i];
    }
    float delta = bt * (qkv[tok * C + 2 * p.NK * p.DK + j * p.DV + c] - m);
    float o = 0.0f;
    for (uint i = 0; i < p.DK; i++) {
      float s = S[i * 32 + lane] + kr[i] * delta;
      S[i * 32 + lane] = s;
      o += s * qr[i];
    }
    out[tok * p.NV * p.DV + j * p.DV + c] = o;
  }
  for (uint i = 0; i < p.DK; i++) st[i * p.DV + c] = S[i * 32 + lane];
}
