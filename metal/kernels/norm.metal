// RMS norms: one SIMD-group per row, four rows per threadgroup; the sum of
// squares is a simd_sum. Weights arrive as float32 vectors.

struct NormParams {
  uint rows, n;
  float eps, shift;
};

#define NORM_SIMDGROUPS 4

// rmsnorm: out = x / sqrt(mean(x²) + eps) · (shift + w). out may equal x.
kernel void rmsnorm(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                    device const float* w [[buffer(2)]], constant NormParams& p [[buffer(3)]],
                    uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                    uint lane [[thread_index_in_simdgroup]]) {
  uint r = tg * NORM_SIMDGROUPS + sg;
  if (r >= p.rows) return;
  device const float* xr = x + r * p.n;
  device float* orow = out + r * p.n;
  float ss = 0.0f;
  for (uint c = lane; c < p.n; c += 32) ss += xr[c] * xr[c];
  ss = simd_sum(ss);
  float inv = rsqrt(ss / float(p.n) + p.eps);
  for (uint c = lane; c < p.n; c += 32) orow[c] = xr[c] * inv * (p.shift + w[c]);
}

// gated_rmsnorm: out = w · x / sqrt(mean(x²) + eps) · silu(z). out may equal x.
kernel void gated_rmsnorm(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                          device const float* z [[buffer(2)]], device const float* w [[buffer(3)]],
                          constant NormParams& p [[buffer(4)]], uint tg [[threadgroup_position_in_grid]],
                          uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]]) {
  uint r = tg * NORM_SIMDGROUPS + sg;
  if (r >= p.rows) return;
  device const float* xr = x + r * p.n;
  device const float* zr = z + r * p.n;
  device float* orow = out + r * p.n;
  float ss = 0.0f;
  for (uint c = lane; c < p.n; c += 32) ss += xr[c] * xr[c];
  ss = simd_sum(ss);
  float inv = rsqrt(ss / float(p.n) + p.eps);
  for (uint c = lane; c < p.n; c += 32) orow[c] = w[c] * (xr[c] * inv) * silu(zr[c]);
}

struct RopeParams {
  uint tokens, heads, hd, rd;
  float theta;
};

// rope rotates the first rd dims of every head in rotate-half pairs
// (i, i + rd/2) by pos·theta^(−2i/rd), in float32 with precise cos/sin.
kernel void rope(device float* x [[buffer(0)]], device const int* pos [[buffer(1)]],
                 constant RopeParams& p [[buffer(2)]], uint3 gid [[thread_position_in_grid]]) {
  uint i = gid.x, h = gid.y, t = gid.z;
  uint half_rd = p.rd / 2;
  if (i >= half_rd || h >= p.heads || t >= p.tokens) return;
  float inv_freq = 1.0f / precise::pow(p.theta, float(2 * i) / float(p.rd));
  float a = float(pos[t]) * inv_freq;
  float c = precise::cos(a), s = precise::sin(a);
  device float* v = x + (t * p.heads + h) * p.hd;
  float x0 = v[i], x1 = v[i + half_rd];
  v[i] = x0 * c - x1 * s;
  v[i + half_rd] = x1 * c + x0 * s;
}
