// Causal grouped-query attention over one batch row, with an optional prefix
// K/V. One threadgroup (one SIMD-group) per (query position, head); the
// queries at or past the row's length (padding) write zeros. Keys go
// in blocks of 32, lane l scoring key j0 + l; the block's scores pass
// through threadgroup memory (double-buffered, one barrier per block), every
// lane keeps the online-softmax running max and sum and accumulates the
// output dims d ≡ lane (mod 32).

struct AttnParams {
  uint T, heads, kv_heads, hd, prefix, row, len;
  float scale;
};

#define ATT_MAX_HD 512
#define ATT_DPL (ATT_MAX_HD / 32)

kernel void attention(device float* out [[buffer(0)]], device const float* q [[buffer(1)]],
                      device const float* k [[buffer(2)]], device const float* v [[buffer(3)]],
                      device const float* pk [[buffer(4)]], device const float* pv [[buffer(5)]],
                      constant AttnParams& p [[buffer(6)]], uint2 tg [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float qs[ATT_MAX_HD];
  threadgroup float ss[64];
  uint t = tg.x, h = tg.y;
  uint kvh = h / (p.heads / p.kv_heads);
  uint tok = p.row * p.T + t;
  if (t >= p.len) {
    // Padding: the whole threadgroup leaves here, before any barrier.
    device float* orow = out + (tok * p.heads + h) * p.hd;
    for (uint d = lane; d < p.hd; d += 32) orow[d] = 0.0f;
    return;
  }
  uint kv_stride = p.kv_heads * p.hd;
  device const float* qr = q + (tok * p.heads + h) * p.hd;
  for (uint d = lane; d < p.hd; d += 32) qs[d] = qr[d];
  threadgroup_barrier(mem_flags::mem_threadgroup);

  float acc[ATT_DPL];
  for (uint i = 0; i < ATT_DPL; i++) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  uint n_keys = p.prefix + t + 1;
  for (uint j0 = 0, it = 0; j0 < n_keys; j0 += 32, it++) {
    uint j = j0 + lane;
    uint buf = (it & 1) * 32;
    float s = -INFINITY;
    if (j < n_keys) {
      device const float* kr = j < p.prefix ? pk + j * kv_stride + kvh * p.hd
                                            : k + (p.row * p.T + (j - p.prefix)) * kv_stride + kvh * p.hd;
      float dot = 0.0f;
      for (uint d = 0; d < p.hd; d++) dot += qs[d] * kr[d];
      s = dot * p.scale;
    }
    ss[buf + lane] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint nb = min(32u, n_keys - j0);
    float bm = -INFINITY;
    for (uint i = 0; i < nb; i++) bm = max(bm, ss[buf + i]);
    float nm = max(m, bm);
    float corr = exp(m - nm);
    l *= corr;
    for (uint i = 0; i < ATT_DPL; i++) acc[i] *= corr;
    for (uint i = 0; i < nb; i++) {
      uint jj = j0 + i;
      float pj = exp(ss[buf + i] - nm);
      l += pj;
      device const float* vr = jj < p.prefix ? pv + jj * kv_stride + kvh * p.hd
                                             : v + (p.row * p.T + (jj - p.prefix)) * kv_stride + kvh * p.hd;
      for (uint e = 0; e < ATT_DPL; e++) {
        uint d = e * 32 + lane;
        if (d < p.hd) acc[e] += pj * vr[d];
      }
    }
    m = nm;
  }
  device float* orow = out + (tok * p.heads + h) * p.hd;
  float inv = 1.0f / l;
  for (uint e = 0; e < ATT_DPL; e++) {
    uint d = e * 32 + lane;
    if (d < p.hd) orow[d] = acc[e] * inv;
  }
}
