// Prelude of the Metal kernel emulator: lets clang compile Metal Shading
// Language kernels as C++. Every standard header is included before the MSL
// keyword macros are defined. Threads, barriers and SIMD-group exchanges are
// provided by the runtime (runtime.cpp, a separate translation unit).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
void emu_threadgroup_barrier(void);
void* emu_simd_exchange(const void* v, uint32_t size);
uint32_t emu_simd_lanes(void);
uint32_t emu_lane(void);
uint32_t emu_thread_index(void);
uint32_t emu_threads(void);
__attribute__((noreturn)) void emu_abort(const char* msg);
}

// emu_abortf fails the dispatch with a formatted message (a misuse of an
// MSL facility that a GPU would leave undefined).
template <typename... A>
__attribute__((noreturn)) inline void emu_abortf(const char* format, A... args) {
  char msg[256];
  snprintf(msg, sizeof msg, format, args...);
  emu_abort(msg);
}

// ---- scalar and vector types ----
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;
typedef _Float16 half;
typedef __bf16 bfloat;

#define EMU_VEC(T, n) typedef T T##n __attribute__((ext_vector_type(n)));
#define EMU_VECS(T) EMU_VEC(T, 2) EMU_VEC(T, 3) EMU_VEC(T, 4)
EMU_VECS(float)
EMU_VECS(half)
EMU_VECS(int)
EMU_VECS(uint)
EMU_VECS(short)
EMU_VECS(ushort)
EMU_VECS(char)
EMU_VECS(uchar)
EMU_VECS(ulong)
#undef EMU_VECS
#undef EMU_VEC

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_huge_valf()
#define FLT_MAX 3.402823466e+38f

// Explicit instantiation of a kernel template (MSL adds [[host_name]] and
// [[kernel]]; the emulator finds instances by their generated entries).
#define INSTANTIATE(name, func, ...) template decltype(func<__VA_ARGS__>) func<__VA_ARGS__>;

// ---- address spaces and function qualifiers ----
// threadgroup storage becomes static storage, so threadgroups run one at a
// time; it may therefore only qualify variable declarations in a kernel body.
#define device
#define constant const
#define thread
// On ELF systems threadgroup variables are gathered in one section, which the
// runtime fills with 0xff bytes (float NaN) before every threadgroup, as a GPU
// gives a threadgroup memory of undefined contents.
#if defined(__ELF__)
#define threadgroup static __attribute__((section("emu_tg")))
#else
#define threadgroup static
#endif
#define kernel

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };

inline void threadgroup_barrier(mem_flags) { emu_threadgroup_barrier(); }
inline void simdgroup_barrier(mem_flags) { emu_simd_exchange(nullptr, 0); }

template <typename T, typename U>
inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type between types of different sizes");
  return __builtin_bit_cast(T, u);
}

// ---- math (namespace metal, with precise:: and fast:: variants) ----
namespace metal {
#define EMU_F1(name, fn)                                        \
  inline float name(float x) { return fn(x); }                  \
  inline half name(half x) { return (half)fn((float)x); }
#define EMU_MATH(NS)                                                        \
  namespace NS {                                                            \
  EMU_F1(exp, __builtin_expf)                                               \
  EMU_F1(exp2, __builtin_exp2f)                                             \
  EMU_F1(log, __builtin_logf)                                               \
  EMU_F1(log2, __builtin_log2f)                                             \
  EMU_F1(sqrt, __builtin_sqrtf)                                             \
  EMU_F1(cos, __builtin_cosf)                                               \
  EMU_F1(sin, __builtin_sinf)                                               \
  EMU_F1(tanh, __builtin_tanhf)                                             \
  EMU_F1(rint, __builtin_rintf)                                             \
  inline float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }         \
  inline float pow(float x, float y) { return __builtin_powf(x, y); }       \
  inline float powr(float x, float y) { return __builtin_powf(x, y); }      \
  inline float divide(float x, float y) { return x / y; }                   \
  }
EMU_MATH(precise)
EMU_MATH(fast)
#undef EMU_MATH
using namespace precise;
EMU_F1(floor, __builtin_floorf)
EMU_F1(ceil, __builtin_ceilf)
EMU_F1(fabs, __builtin_fabsf)
EMU_F1(abs, __builtin_fabsf)
#undef EMU_F1
inline int abs(int x) { return x < 0 ? -x : x; }
inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
inline float fmin(float a, float b) { return __builtin_fminf(a, b); }
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
template <typename T>
inline T max(T a, T b) { return a > b ? a : b; }
template <typename T>
inline T min(T a, T b) { return a < b ? a : b; }
template <typename T>
inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <typename T>
inline T select(T a, T b, bool c) { return c ? b : a; }

// array is metal::array: a fixed-size aggregate.
template <typename T, size_t N>
struct array {
  T v[N];
  T& operator[](size_t i) { return v[i]; }
  const T& operator[](size_t i) const { return v[i]; }
  static constexpr size_t size() { return N; }
};

// ---- SIMD-group functions (32 lanes; a partial last group has fewer) ----
template <typename T>
inline const T& emu_slot(void* base, uint lane) {
  return *(const T*)((char*)base + lane * 64);
}
inline uint emu_nlanes() { return emu_simd_lanes(); }

template <typename T>
inline T simd_sum(T v) {
  void* b = emu_simd_exchange(&v, sizeof v);
  T s = emu_slot<T>(b, 0);
  for (uint i = 1, n = emu_nlanes(); i < n; i++) s += emu_slot<T>(b, i);
  return s;
}
template <typename T>
inline T simd_max(T v) {
  void* b = emu_simd_exchange(&v, sizeof v);
  T s = emu_slot<T>(b, 0);
  for (uint i = 1, n = emu_nlanes(); i < n; i++) s = max(s, emu_slot<T>(b, i));
  return s;
}
template <typename T>
inline T simd_min(T v) {
  void* b = emu_simd_exchange(&v, sizeof v);
  T s = emu_slot<T>(b, 0);
  for (uint i = 1, n = emu_nlanes(); i < n; i++) s = min(s, emu_slot<T>(b, i));
  return s;
}
// Reading a lane outside the group returns the caller's own value here; on
// a GPU it is undefined.
template <typename T>
inline T simd_shuffle(T v, ushort lane) {
  void* b = emu_simd_exchange(&v, sizeof v);
  return lane < emu_nlanes() ? emu_slot<T>(b, lane) : v;
}
template <typename T>
inline T simd_broadcast(T v, ushort lane) { return simd_shuffle(v, lane); }
template <typename T>
inline T simd_shuffle_xor(T v, ushort mask) { return simd_shuffle(v, ushort(emu_lane() ^ mask)); }
template <typename T>
inline T simd_shuffle_down(T v, ushort delta) {
  void* b = emu_simd_exchange(&v, sizeof v);
  uint l = emu_lane() + delta;
  return l < emu_nlanes() ? emu_slot<T>(b, l) : v;
}
template <typename T>
inline T simd_shuffle_up(T v, ushort delta) {
  void* b = emu_simd_exchange(&v, sizeof v);
  uint l = emu_lane();
  return l >= delta ? emu_slot<T>(b, l - delta) : v;
}
template <typename T>
inline T simd_prefix_exclusive_sum(T v) {
  void* b = emu_simd_exchange(&v, sizeof v);
  T s = T(0);
  for (uint i = 0, l = emu_lane(); i < l; i++) s += emu_slot<T>(b, i);
  return s;
}

// ---- simdgroup_matrix (8×8) ----
// Every lane holds the whole matrix (the operations are uniform across the
// SIMD-group, so all lanes compute the same values); a store writes only the
// two elements the lane owns, so a store by an incomplete SIMD-group leaves
// elements unwritten.
template <typename T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "the emulator models 8x8 simdgroup matrices only");
  T e[Rows][Cols];
  simdgroup_matrix() = default;
  // As in MSL: a diagonal matrix with d on the diagonal.
  explicit simdgroup_matrix(T d) {
    for (int r = 0; r < Rows; r++)
      for (int c = 0; c < Cols; c++) e[r][c] = r == c ? d : T(0);
  }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <typename T, int C, int R>
inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, C, R> m;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) m.e[r][c] = v;
  return m;
}

template <typename T, typename S, int C, int R>
inline void simdgroup_load(simdgroup_matrix<T, C, R>& d, const S* src, ulong elements_per_row = C,
                           ulong2 origin = ulong2(0), bool transpose = false) {
  src += origin.y * elements_per_row + origin.x;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) d.e[r][c] = T(transpose ? src[c * elements_per_row + r] : src[r * elements_per_row + c]);
}

template <typename T, typename S, int C, int R>
inline void simdgroup_store(const simdgroup_matrix<T, C, R>& m, S* dst, ulong elements_per_row = C,
                            ulong2 origin = ulong2(0), bool transpose = false) {
  dst += origin.y * elements_per_row + origin.x;
  uint lane = emu_lane();
  for (uint k = 2 * lane; k < 2 * lane + 2; k++) {
    uint r = k / C, c = k % C;
    if (transpose)
      dst[c * elements_per_row + r] = S(m.e[r][c]);
    else
      dst[r * elements_per_row + c] = S(m.e[r][c]);
  }
}

template <typename T, typename A, typename B, typename U>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, 8, 8>& d, const simdgroup_matrix<A, 8, 8>& a,
                                          const simdgroup_matrix<B, 8, 8>& b, const simdgroup_matrix<U, 8, 8>& c) {
  simdgroup_matrix<T, 8, 8> out;
  for (int r = 0; r < 8; r++)
    for (int k = 0; k < 8; k++) {
      float acc = float(c.e[r][k]);
      for (int j = 0; j < 8; j++) acc += float(a.e[r][j]) * float(b.e[j][k]);
      out.e[r][k] = T(acc);
    }
  d = out;
}

template <typename T, typename A, typename B>
inline void simdgroup_multiply(simdgroup_matrix<T, 8, 8>& d, const simdgroup_matrix<A, 8, 8>& a,
                               const simdgroup_matrix<B, 8, 8>& b) {
  simdgroup_multiply_accumulate(d, a, b, make_filled_simdgroup_matrix<T, 8, 8>(T(0)));
}
}  // namespace metal

// ---- entry support: arguments of the generated extern "C" entries ----
struct EmuPos {
  uint tpitg[3], tgpig[3], tptg[3], tgpg[3], tpig[3], tpg[3];
  uint tiitg, sgitg, tiisg, tpsg, sgptg;
};
struct EmuBuf {
  void* p;
  template <typename P>
  operator P*() const { return (P*)p; }
};
struct EmuRef {
  void* p;
  template <typename P>
  operator P&() const { return *(P*)p; }
};
struct EmuVec {
  const uint* v;
  operator uint() const { return v[0]; }
  operator ushort() const { return (ushort)v[0]; }
  operator uint2() const { return uint2{v[0], v[1]}; }
  operator uint3() const { return uint3{v[0], v[1], v[2]}; }
  operator ushort2() const { return ushort2{(ushort)v[0], (ushort)v[1]}; }
  operator ushort3() const { return ushort3{(ushort)v[0], (ushort)v[1], (ushort)v[2]}; }
};
struct EmuScalar {
  uint v;
  operator uint() const { return v; }
  operator ushort() const { return (ushort)v; }
};
