// Elementwise kernels: one thread per element, no threadgroup memory.

struct EltParams {
  uint n;
};

kernel void add_f32(device float* dst [[buffer(0)]], device const float* src [[buffer(1)]],
                    constant EltParams& p [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i < p.n) dst[i] += src[i];
}

kernel void swiglu_f32(device float* out [[buffer(0)]], device const float* gate [[buffer(1)]],
                       device const float* up [[buffer(2)]], constant EltParams& p [[buffer(3)]],
                       uint i [[thread_position_in_grid]]) {
  if (i < p.n) out[i] = silu(gate[i]) * up[i];
}

kernel void sigmoid_mul_f32(device float* x [[buffer(0)]], device const float* gate [[buffer(1)]],
                            constant EltParams& p [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i < p.n) x[i] *= sigmoid(gate[i]);
}

struct CopyParams {
  uint rows, cols, dst_stride, src_stride;
};

// copy_2d copies rows × cols elements between strided row layouts (offsets
// are applied through the buffer bindings).
kernel void copy_2d(device float* dst [[buffer(0)]], device const float* src [[buffer(1)]],
                    constant CopyParams& p [[buffer(2)]], uint2 gid [[thread_position_in_grid]]) {
  if (gid.x < p.cols && gid.y < p.rows) dst[gid.y * p.dst_stride + gid.x] = src[gid.y * p.src_stride + gid.x];
}

struct EmbedParams {
  uint n_ids, cols, bits, group, row_bytes;
};

// embed gathers rows ids[i] of a [V, H] weight into out[i, :].
template <typename L>
kernel void embed(device float* out [[buffer(0)]], device const int* ids [[buffer(1)]],
                  device const typename L::WT* w [[buffer(2)]], device const typename L::ST* scales [[buffer(3)]],
                  device const typename L::ST* biases [[buffer(4)]], constant EmbedParams& p [[buffer(5)]],
                  uint2 gid [[thread_position_in_grid]]) {
  if (gid.x >= p.cols || gid.y >= p.n_ids) return;
  L rows = L::make(w, scales, biases, p.cols, p.bits, p.group, p.row_bytes);
  out[gid.y * p.cols + gid.x] = rows.at(uint(ids[gid.y]), gid.x);
}

INSTANTIATE_ROWS("embed", embed)
