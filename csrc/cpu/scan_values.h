// Scans of an op's input values that its CPU kernel makes as it reads the inputs (the ops' check flags),
// so that the input check costs no second pass over memory: blocks of a few hundred Gaussians are
// scanned and then computed while they sit in the L1 cache.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace gsw {
namespace splat {
namespace cpu {

// Whether p[0..n) holds no NaN and no infinity: the largest exponent field is all ones otherwise.
template <typename T>
bool all_finite(const T* p, int64_t n) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr U kExponent = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U top = 0;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < n; ++i) top = std::max(top, static_cast<U>(std::bit_cast<U>(p[i]) & kExponent));
  return top != kExponent;
}

// The smallest of p[0..n) (+inf for none; NaNs are passed over: all_finite finds them).
template <typename T>
T min_value(const T* p, int64_t n) {
  T lo = std::numeric_limits<T>::infinity();
#pragma omp simd reduction(min : lo)
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, p[i]);
  return lo;
}

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
