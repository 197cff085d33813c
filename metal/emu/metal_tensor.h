// Emulator model of <metal_tensor> (Metal 4), installed under that name: the
// subset the int8 kernels use. Written from the declarations the SDK's
// MetalPerformancePrimitives headers rely on (docs/metal.md lists them):
// dextents, tensor over memory with strides (tensor_inline, and the
// tensor_offset a slice gives), the execution scope execution_simdgroups<N>,
// and cooperative_tensor, whose storage and element distribution a layout
// type (here the matmul2d destination's) defines. It is compiled with the
// prelude's MSL macros in force, so it includes no standard header.
#pragma once

namespace metal {

template <typename T>
struct emu_remove_cv {
  typedef T type;
};
template <typename T>
struct emu_remove_cv<const T> {
  typedef T type;
};
template <typename A, typename B>
struct emu_is_same {
  static constexpr bool value = false;
};
template <typename A>
struct emu_is_same<A, A> {
  static constexpr bool value = true;
};

// dynamic_extent marks an extent known only at run time (a matmul2d
// descriptor's k takes static_cast<int>(dynamic_extent)).
constexpr size_t dynamic_extent = size_t(-1);

// dextents holds the extents of a tensor of rank R, all dynamic; extent(0)
// is the innermost (contiguous by default) dimension.
template <typename I, size_t R>
struct dextents {
  static_assert(R == 1 || R == 2, "the emulator models tensors of rank 1 and 2");
  typedef I index_type;
  I e[R];
  template <typename... J>
  constexpr dextents(J... v) : e{I(v)...} {
    static_assert(sizeof...(J) == R, "dextents: one extent per dimension");
  }
  static constexpr size_t rank() { return R; }
  constexpr I extent(size_t i) const { return e[i]; }
};

// Tensor descriptor tags: a tensor holding its pointer, extents and strides
// inline, and the tensor a slice returns (the same, origin shifted).
struct tensor_inline {};
struct tensor_offset {};

// tensor is a view of memory: element (i0, i1) is at p[i0·stride(0) +
// i1·stride(1)]. Without strides it is contiguous: stride(0) = 1,
// stride(1) = extent(0).
template <typename E, typename X, typename D = tensor_inline>
struct tensor {
  typedef E element_type;
  typedef typename emu_remove_cv<E>::type value_type;
  typedef X extents_type;
  typedef typename X::index_type index_type;
  typedef E* data_handle_type;
  static constexpr size_t R = X::rank();

  E* p;
  X ext;
  array<index_type, R> str;

  tensor(E* data, X e) : p(data), ext(e) {
    str[0] = 1;
    for (size_t i = 1; i < R; i++) str[i] = str[i - 1] * e.extent(i - 1);
  }
  tensor(E* data, X e, array<index_type, R> s) : p(data), ext(e), str(s) {}

  X extents() const { return ext; }
  index_type stride(size_t i) const { return str[i]; }
  data_handle_type data() const { return p; }

  // slice shifts the origin: the result's element (i0, i1) is this one's
  // (o0 + i0, o1 + i1), and its extents end where this one's do.
  template <typename... J>
  tensor<E, X, tensor_offset> slice(J... origin) const {
    static_assert(sizeof...(J) == R, "slice: one origin coordinate per dimension");
    index_type o[R] = {index_type(origin)...};
    E* q = p;
    for (size_t i = 0; i < R; i++) q += o[i] * str[i];
    if constexpr (R == 1) {
      return tensor<E, X, tensor_offset>(q, X(ext.extent(0) - o[0]), str);
    } else {
      return tensor<E, X, tensor_offset>(q, X(ext.extent(0) - o[0], ext.extent(1) - o[1]), str);
    }
  }
};

template <typename E, typename X>
tensor(E*, X) -> tensor<E, X, tensor_inline>;
template <typename E, typename X, typename A>
tensor(E*, X, A) -> tensor<E, X, tensor_inline>;

// execution_simdgroups<N> is the execution scope of an operation run
// cooperatively by N SIMD-groups: the whole threadgroup, which must have
// exactly N SIMD-groups of 32 threads.
template <int N>
struct execution_simdgroups {
  static_assert(N > 0, "execution_simdgroups needs at least one SIMD-group");
  static constexpr int simdgroups = N;
  static constexpr int threads = 32 * N;
};

// emu_poison is what a cooperative tensor's elements hold before they are
// written (a GPU gives undefined contents): a NaN with a payload no
// arithmetic makes for floats, a large odd pattern for integers.
template <typename E>
inline E emu_poison() {
  if constexpr (emu_is_same<E, float>::value)
    return as_type<float>(0x7fa5a5a5u);
  else
    return E(0xa5a5a5a5u);
}

// cooperative_tensor owns elements of a tensor divided among the threads of
// an operation's execution scope as L says: capacity slots per thread, of
// which is_valid_element tells the ones this thread holds, each with its
// coordinates (get_multidimensional_index). Touching a slot that is not
// valid, or past the capacity, fails the dispatch.
template <typename E, typename X, typename L>
struct cooperative_tensor {
  typedef E element_type;
  E v[L::capacity];

  cooperative_tensor() {
    for (int i = 0; i < L::capacity; i++) v[i] = emu_poison<E>();
  }
  uint16_t get_capacity() const { return uint16_t(L::capacity); }
  bool is_valid_element(uint16_t i) const { return i < L::capacity && L::valid(emu_thread_index(), i); }
  array<typename X::index_type, 2> get_multidimensional_index(uint16_t i) const {
    held(i);
    return L::template coord<typename X::index_type>(emu_thread_index(), i);
  }
  E& operator[](uint16_t i) {
    held(i);
    return v[i];
  }
  const E& operator[](uint16_t i) const {
    held(i);
    return v[i];
  }
  void held(uint16_t i) const {
    if (!is_valid_element(i))
      emu_abortf("cooperative_tensor: element %u used by thread %u, which does not hold it (capacity %d; guard with is_valid_element)",
                 unsigned(i), emu_thread_index(), L::capacity);
  }
};

}  // namespace metal
