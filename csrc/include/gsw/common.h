// Shared by the CPU (.cpp) and CUDA (.cu) kernels: qualifiers, the fast exp, denormal control.
// This header includes no ATen or CUDA runtime headers, so nvcc compile checks stay fast.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GSW_HD __host__ __device__ __forceinline__
#else
#define GSW_HD inline __attribute__((always_inline))
#endif

// Full unrolling of short fixed loops (lets the CPU compiler vectorize loops over Gaussians). The one
// definition, used by every gsw/ header.
#if defined(__CUDACC__)
#define GSW_UNROLL _Pragma("unroll")
#else
#define GSW_UNROLL _Pragma("GCC unroll 64")
#endif

#if !defined(__CUDA_ARCH__) && (defined(__x86_64__) || defined(__i386__))
#include <xmmintrin.h>
#define GSW_HAS_MXCSR 1
#endif

namespace gsw {

// exp(x) for x <= 0, float: range reduction to 2^n * exp(r), |r| <= ln2/2, and a degree-7 Taylor
// polynomial (relative error ~1e-7 after rounding). Arguments below -80 give exactly 0, so no denormal
// is ever produced. Branch-free, with the rounding done by adding 1.5 * 2^23 and bit casts (std::floor
// would block vectorization inside masked, if-converted loops), so the CPU loops that call it vectorize.
GSW_HD float exp_nonpos(float x) {
#if defined(__CUDA_ARCH__)
  return x < -80.0f ? 0.0f : __expf(x);
#else
  const float xc = x < -80.0f ? -80.0f : x;
  const float t = xc * 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: float addition rounds t to the nearest integer
  const float tb = t + kRound;
  const float fn = tb - kRound;
  int32_t tb_bits;
  std::memcpy(&tb_bits, &tb, sizeof(tb_bits));
  const int32_t n = tb_bits - 0x4B400000;  // the integer fn, read off the mantissa
  const float r = (xc - fn * 0.693145751953125f) - fn * 1.42860682030941723212e-6f;
  float p = 1.98412698412698413e-4f;  // 1/7!
  p = p * r + 1.38888888888888889e-3f;
  p = p * r + 8.33333333333333333e-3f;
  p = p * r + 4.16666666666666667e-2f;
  p = p * r + 1.66666666666666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t scale_bits = (n + 127) << 23;  // 2^n, n >= -116 here
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return x < -80.0f ? 0.0f : p * scale;
#endif
}

GSW_HD double exp_nonpos(double x) { return x < -700.0 ? 0.0 : exp(x); }

// Coefficients c0..c6 of a degree-6 polynomial for 2^f on [-1/2, 1/2], fitted to minimise the relative
// error (2e-9 in exact arithmetic, about 1e-7 once evaluated in float).
constexpr float kExp2Poly[7] = {1.000000000554169f,     6.931472057372619e-1f, 2.4022646890620264e-1f,
                                5.5503287769744364e-2f, 9.618488958593335e-3f, 1.3399931216301808e-3f,
                                1.5345811606834423e-4f};

// 2^t for t <= 0, float: t = n + f with n = round(t), |f| <= 1/2, 2^f by kExp2Poly. Cheaper than
// exp_nonpos for a caller that folds log2(e) into its argument: no multiplication by log2(e), one
// subtraction for f instead of a two-part ln 2, one polynomial term fewer. Arguments are clamped at
// -126, where 2^t leaves float's normal range; with denormals flushed (DenormalsOff) the smallest
// results are 0 or the smallest normals, never a denormal computation.
GSW_HD float exp2_nonpos(float t) {
#if defined(__CUDA_ARCH__)
  return exp2f(t < -126.0f ? -126.0f : t);
#else
  const float tc = t < -126.0f ? -126.0f : t;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: float addition rounds tc to the nearest integer
  const float tb = tc + kRound;
  const float fn = tb - kRound;
  int32_t tb_bits;
  std::memcpy(&tb_bits, &tb, sizeof(tb_bits));
  const int32_t n = tb_bits - 0x4B400000;
  const float f = tc - fn;
  float p = kExp2Poly[6];
  GSW_UNROLL
  for (int k = 5; k >= 0; --k) p = p * f + kExp2Poly[k];
  const int32_t scale_bits = (n + 127) << 23;  // 2^n, n >= -126
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  return p * scale;
#endif
}

GSW_HD double exp2_nonpos(double t) { return t < -1000.0 ? 0.0 : exp2(t); }

#if defined(GSW_HAS_MXCSR)
// Flush denormals to zero (FTZ) and treat denormal inputs as zero (DAZ) inside a scope, per thread.
// exp() of large squared distances otherwise produces denormals that slow the kernels several-fold.
struct DenormalsOff {
  unsigned int saved;
  DenormalsOff() : saved(_mm_getcsr()) { _mm_setcsr(saved | 0x8040u); }
  ~DenormalsOff() { _mm_setcsr(saved); }
};
#else
struct DenormalsOff {};
#endif

}  // namespace gsw
