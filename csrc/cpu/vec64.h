// Explicit 64-byte vectors for the CPU kernels whose loops GCC does not vectorize well by itself
// (ssim_window.h, ssim_grad.h): with the vectors written out, a block's sums stay in registers and
// each load is a base pointer plus a constant. Generic: any target compiles them (narrower targets
// split each vector).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gsw {
namespace cpu {

// Vec<T>: a GCC vector-extension value of 64 bytes of T (one AVX-512 register; any target lowers it).
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename T>
using Vec = typename VecOf<T>::type;
template <typename T>
constexpr int64_t kVecLen = sizeof(Vec<T>) / sizeof(T);
template <typename T>
inline Vec<T> vload(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void vstore(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}
// One value (V = T) or one vector (V = Vec<T>) at p.
template <typename V, typename T>
inline V load_as(const T* p) {
  if constexpr (std::is_same_v<V, T>)
    return *p;
  else
    return vload(p);
}
template <typename T, typename V>
inline void store_as(T* p, const V& v) {
  if constexpr (std::is_same_v<V, T>)
    *p = v;
  else
    vstore(p, v);
}
template <typename T>
inline T lane_total(const Vec<T>& v) {
  T s = 0;
  for (int64_t i = 0; i < kVecLen<T>; ++i) s += v[i];
  return s;
}

}  // namespace cpu
}  // namespace gsw
