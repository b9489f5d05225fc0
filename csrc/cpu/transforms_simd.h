// SIMD helpers of the CPU splat transforms (csrc/cpu/transforms.cpp): the register transposes that move a
// block of 16 Gaussians' SH rest between AoS and SoA (16x16 on AVX-512, 8x8 on AVX2), and the AVX-512
// band rotation of a block. Other targets use the generic block of transforms.cpp.
//
// GCC 12's plain (unmasked) unpack/shuffle intrinsics pass an undefined pass-through operand to their
// masked builtins, which -Wall then reports as "'__Y' is used uninitialized" wherever they are
// inlined. The zero-masking forms with a full mask compute the same permutation (every lane is
// selected, so the zero source is never used) and have no undefined operand.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace gsw {
namespace transforms {

constexpr __mmask16 kAllLanes = 0xFFFF;

// 128-bit lanes of a and b picked by Imm (_mm512_shuffle_f32x4 without its undefined operand).
template <int Imm>
inline __attribute__((always_inline)) __m512 shuffle_lanes(__m512 a, __m512 b) {
  return _mm512_maskz_shuffle_f32x4(kAllLanes, a, b, Imm);
}

// In-register transpose of a 16x16 float tile: r[i] holds row i on entry, column i on exit.
inline __attribute__((always_inline)) void transpose16(__m512* r) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAllLanes, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAllLanes, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_maskz_shuffle_ps(kAllLanes, t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_maskz_shuffle_ps(kAllLanes, t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_maskz_shuffle_ps(kAllLanes, t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_maskz_shuffle_ps(kAllLanes, t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[4q + m], 128-bit lane L: column 4L + m of rows 4q..4q+3
  __m512 o[16];
  for (int m = 0; m < 4; ++m) {
    const __m512 a0 = shuffle_lanes<0x88>(r[m], r[4 + m]), a1 = shuffle_lanes<0xdd>(r[m], r[4 + m]);
    const __m512 b0 = shuffle_lanes<0x88>(r[8 + m], r[12 + m]), b1 = shuffle_lanes<0xdd>(r[8 + m], r[12 + m]);
    o[m] = shuffle_lanes<0x88>(a0, b0);
    o[8 + m] = shuffle_lanes<0xdd>(a0, b0);
    o[4 + m] = shuffle_lanes<0x88>(a1, b1);
    o[12 + m] = shuffle_lanes<0xdd>(a1, b1);
  }
  for (int i = 0; i < 16; ++i) r[i] = o[i];
}

// rotate_band<float, L, 16, 48> (csrc/include/gsw/transforms.h) for the 3 channels together, with the
// 3 (2L+1) accumulators in registers and each D entry broadcast once: out_ic = sum_j D_ij in_jc for
// 16 Gaussians at once. SoA layout: coefficient k, channel c at in[(3k + c) * 16].
template <int L>
inline void rotate_band16(const float* D, int K, const float* in, float* out) {
  constexpr int n = 2 * L + 1, o = L * L - 1;
  __m512 acc[n][3];
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int j = 0; j < n; ++j) {
    const __m512 x0 = _mm512_load_ps(in + (3 * (o + j)) * 16);
    const __m512 x1 = _mm512_load_ps(in + (3 * (o + j) + 1) * 16);
    const __m512 x2 = _mm512_load_ps(in + (3 * (o + j) + 2) * 16);
    for (int i = 0; i < n; ++i) {
      const __m512 d = _mm512_set1_ps(D[(o + i) * K + o + j]);
      acc[i][0] = _mm512_fmadd_ps(d, x0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(d, x1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(d, x2, acc[i][2]);
    }
  }
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) _mm512_store_ps(out + (3 * (o + i) + c) * 16, acc[i][c]);
}

}  // namespace transforms
}  // namespace gsw

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace gsw {
namespace transforms {

// In-register transpose of an 8x8 float tile: r[i] holds row i on entry, column i on exit.
inline __attribute__((always_inline)) void transpose8(__m256* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // u[4q + m], 128-bit half H: column 4H + m of rows 4q..4q+3
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
    r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
  }
}

}  // namespace transforms
}  // namespace gsw
#endif
