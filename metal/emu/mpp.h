// Emulator model of <MetalPerformancePrimitives/MetalPerformancePrimitives.h>,
// installed under that name: mpp::tensor_ops::matmul2d_descriptor as the SDK
// declares it (MPPTensorOpsMatMul2d.h), and matmul2d with the two members the
// int8 kernels use, get_destination_cooperative_tensor and run, for the
// integer case the SDK lists (int8_t × int8_t → int32_t). docs/metal.md says
// which SDK declarations this follows and what it checks.
#pragma once
#include <metal_tensor>

namespace mpp {
namespace tensor_ops {

// matmul2d_descriptor describes C = A·B of an m × n destination tile over k
// (dynamic: taken from the operands), with either operand transposed.
struct matmul2d_descriptor {
  enum class mode {
    multiply,             // destination = A·B
    multiply_accumulate,  // destination += A·B
  };
  int m, n, k;
  bool transpose_left, transpose_right;
  bool relaxed_precision;
  mode matmul_mode;

  constexpr matmul2d_descriptor(int m_, int n_, int k_ = static_cast<int>(metal::dynamic_extent),
                                bool transpose_left_ = false, bool transpose_right_ = false,
                                bool relaxed_precision_ = false, mode matmul_mode_ = mode::multiply)
      : m(m_),
        n(n_),
        k(k_),
        transpose_left(transpose_left_),
        transpose_right(transpose_right_),
        relaxed_precision(relaxed_precision_),
        matmul_mode(matmul_mode_) {}
};

namespace emu_detail {

// destination_layout distributes the n × m destination (element (c, r) is
// column c < n, row r < m) over T threads: slot i of thread t holds linear
// element i·T + (17·t + i) mod T, row-major, when that is below m·n. The
// distribution is the emulator's own (the SDK's is implementation-defined);
// it is deliberately not "thread t holds row t", so a kernel that assumes
// one shows.
template <matmul2d_descriptor D, int T>
struct destination_layout {
  static constexpr int elems = D.m * D.n;
  static constexpr int capacity = (elems + T - 1) / T;
  static int linear(uint t, uint i) { return int(i) * T + int((17u * t + i) % uint(T)); }
  static bool valid(uint t, uint i) { return t < uint(T) && linear(t, i) < elems; }
  template <typename I>
  static metal::array<I, 2> coord(uint t, uint i) {
    int e = linear(t, i);
    return {I(e % D.n), I(e / D.n)};
  }
};

}  // namespace emu_detail

// matmul2d is the operation of a descriptor over an execution scope.
template <matmul2d_descriptor Descriptor, typename Scope, class... Args>
class matmul2d {
  static_assert(Descriptor.m > 0 && Descriptor.n > 0, "matmul2d: a tile of no elements");
  typedef emu_detail::destination_layout<Descriptor, Scope::threads> layout;

 public:
  static constexpr matmul2d_descriptor descriptor = Descriptor;
  typedef Scope scope;

  template <typename L, typename R, typename E, typename C = int>
  using cooperative_tensor_destination_t = metal::cooperative_tensor<E, metal::dextents<C, 2>, layout>;

  // get_destination_cooperative_tensor returns a destination of element
  // type E spread over the scope's threads; its elements are undefined
  // (poisoned) until written.
  template <typename L, typename R, typename E, typename C = int>
  cooperative_tensor_destination_t<L, R, E, C> get_destination_cooperative_tensor() const {
    static_assert(metal::emu_is_same<E, int32_t>::value,
                  "the emulator models matmul2d destinations of int32_t (int8_t x int8_t) only");
    return cooperative_tensor_destination_t<L, R, E, C>();
  }

  // run computes the destination elements this thread holds, exactly in
  // wrapping int32 arithmetic (the sums of int8 products the kernels form
  // fit), then waits for every thread of the scope: all of them must call
  // run (a thread that does not is reported as barrier divergence). Each
  // thread reads the operands when it enters, before any synchronisation,
  // so operands written by other threads need a barrier before run.
  // Elements outside the operands' extents are left undefined (poisoned).
  template <typename L, typename R, typename E, typename X, typename Lay>
  void run(L& left, R& right, metal::cooperative_tensor<E, X, Lay>& dst) const {
    static_assert(metal::emu_is_same<typename L::value_type, int8_t>::value &&
                      metal::emu_is_same<typename R::value_type, int8_t>::value &&
                      metal::emu_is_same<E, int32_t>::value,
                  "the emulator models matmul2d int8_t x int8_t -> int32_t only");
    static_assert(metal::emu_is_same<Lay, layout>::value, "matmul2d: destination made by another operation");
    static_assert(L::R == 2 && R::R == 2, "matmul2d: operands of rank 2");
    constexpr matmul2d_descriptor d = Descriptor;
    if (emu_threads() != uint(Scope::threads))
      emu_abortf("matmul2d: an operation of %d SIMD-groups run by a threadgroup of %u threads", Scope::simdgroups,
                 emu_threads());
    const int lk = d.transpose_left ? 1 : 0, rk = d.transpose_right ? 0 : 1;
    const int m = left.ext.extent(1 - lk), n = right.ext.extent(1 - rk);
    const int kl = left.ext.extent(lk), kr = right.ext.extent(rk);
    if (m < 0 || n < 0 || kl < 0 || kr < 0)
      emu_abortf("matmul2d: negative extents (left %d x %d, right %d x %d)", int(left.ext.extent(0)),
                 int(left.ext.extent(1)), int(right.ext.extent(0)), int(right.ext.extent(1)));
    int k = d.k;
    if (d.k == static_cast<int>(metal::dynamic_extent)) {
      if (kl != kr) emu_abortf("matmul2d: K is %d in the left operand and %d in the right one", kl, kr);
      k = kl;
    } else if (kl < d.k || kr < d.k) {
      emu_abortf("matmul2d: a descriptor k of %d over operands of %d and %d", d.k, kl, kr);
    }
    const uint t = emu_thread_index();
    for (int i = 0; i < layout::capacity; i++) {
      if (!layout::valid(t, i)) continue;
      metal::array<int, 2> at = layout::template coord<int>(t, i);
      const int c = at[0], r = at[1];
      if (r >= m || c >= n) {
        dst.v[i] = metal::emu_poison<E>();
        continue;
      }
      const int8_t* a = left.p + r * left.str[1 - lk];
      const int8_t* b = right.p + c * right.str[1 - rk];
      const int sa = left.str[lk], sb = right.str[rk];
      uint32_t s = 0;
      for (int j = 0; j < k; j++) s += uint32_t(int32_t(a[j * sa]) * int32_t(b[j * sb]));
      if (d.matmul_mode == matmul2d_descriptor::mode::multiply_accumulate) s += uint32_t(dst.v[i]);
      dst.v[i] = int32_t(s);
    }
    emu_threadgroup_barrier();
  }
};

}  // namespace tensor_ops
}  // namespace mpp
