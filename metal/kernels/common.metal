// Shared definitions for every StartLux kernel. The library is compiled from
// this file followed by the other kernels/*.metal files, in name order.
#include <metal_stdlib>
using namespace metal;

// INSTANTIATE names one specialisation of a kernel template. (The emulator's
// prelude supplies its own, without the Metal attributes.)
#ifndef INSTANTIATE
#define INSTANTIATE(name, func, ...) \
  template [[host_name(name)]] [[kernel]] decltype(func<__VA_ARGS__>) func<__VA_ARGS__>;
#endif

// Weight formats: how element i of stored weight data reads as float.
struct WF32 {
  typedef float T;
  static float at(device const float* p, uint i) { return p[i]; }
};
struct WF16 {
  typedef half T;
  static float at(device const half* p, uint i) { return float(p[i]); }
};
// bfloat16 is read as its bit pattern, so the kernels need no bfloat type.
struct WBF16 {
  typedef ushort T;
  static float at(device const ushort* p, uint i) { return as_type<float>(uint(p[i]) << 16); }
};

// Row loaders: element (o, c) of a logical [O, I] weight matrix as float.
// Every kernel that reads a weight matrix is a template on its loader and
// takes the weight data, scales and biases buffers (a plain weight ignores the
// last two).
template <typename W>
struct PlainRows {
  typedef typename W::T WT;
  typedef typename W::T ST;
  device const WT* w;
  uint cols;
  static PlainRows make(device const WT* w, device const ST*, device const ST*, uint cols, uint, uint, uint) {
    PlainRows r;
    r.w = w;
    r.cols = cols;
    return r;
  }
  float at(uint o, uint c) const { return W::at(w, o * cols + c); }
};

// MLX affine quantisation: bits-wide unsigned integers packed LSB first in a
// little-endian bit stream per row; element (o, c) = scale·q + bias of its
// group. S is the format of the scales and biases.
template <typename S>
struct QuantRows {
  typedef uchar WT;
  typedef typename S::T ST;
  device const uchar* q;
  device const ST* scales;
  device const ST* biases;
  uint cols, bits, group, row_bytes;
  static QuantRows make(device const uchar* q, device const ST* scales, device const ST* biases, uint cols,
                        uint bits, uint group, uint row_bytes) {
    QuantRows r;
    r.q = q;
    r.scales = scales;
    r.biases = biases;
    r.cols = cols;
    r.bits = bits;
    r.group = group;
    r.row_bytes = row_bytes;
    return r;
  }
  float at(uint o, uint c) const {
    uint off = c * bits;
    device const uchar* p = q + o * row_bytes + (off >> 3);
    uint sh = off & 7;
    uint v = uint(p[0]);
    if (sh + bits > 8) v |= uint(p[1]) << 8;
    v = (v >> sh) & ((1u << bits) - 1u);
    uint gi = o * (cols / group) + c / group;
    return S::at(scales, gi) * float(v) + S::at(biases, gi);
  }
};

// INSTANTIATE_ROWS instantiates a loader-templated kernel for every weight
// form, with host names <base>_f32, _f16, _bf16, _q_f32, _q_f16, _q_bf16.
#define INSTANTIATE_ROWS(base, func)                       \
  INSTANTIATE(base "_f32", func, PlainRows<WF32>)          \
  INSTANTIATE(base "_f16", func, PlainRows<WF16>)          \
  INSTANTIATE(base "_bf16", func, PlainRows<WBF16>)        \
  INSTANTIATE(base "_q_f32", func, QuantRows<WF32>)        \
  INSTANTIATE(base "_q_f16", func, QuantRows<WF16>)        \
  INSTANTIATE(base "_q_bf16", func, QuantRows<WBF16>)

// INSTANTIATE_ROWS_T is INSTANTIATE_ROWS for templates with further
// template arguments after the loader.
#define INSTANTIATE_ROWS_T(base, func, ...)                            \
  INSTANTIATE(base "_f32", func, PlainRows<WF32>, __VA_ARGS__)         \
  INSTANTIATE(base "_f16", func, PlainRows<WF16>, __VA_ARGS__)         \
  INSTANTIATE(base "_bf16", func, PlainRows<WBF16>, __VA_ARGS__)       \
  INSTANTIATE(base "_q_f32", func, QuantRows<WF32>, __VA_ARGS__)       \
  INSTANTIATE(base "_q_f16", func, QuantRows<WF16>, __VA_ARGS__)       \
  INSTANTIATE(base "_q_bf16", func, QuantRows<WBF16>, __VA_ARGS__)

inline float silu(float x) { return x / (1.0f + exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
