// Lane helpers of the CPU rasterizer (csrc/cpu/splat_rasterize_*.cpp): the pixels of a chunk are
// kLanes SIMD lanes. Each helper has a generic body, which any target compiles, and where it pays an
// AVX2 twin (GSW_RASTER_AVX2: the lanes 8 at a time) or an AVX-512 twin (GSW_RASTER_AVX512, 16 lanes
// with mask registers); x86 intrinsics are included only when x86 is the target.
#pragma once

// Which twin the rasterizer compiles: the AVX2 one wherever AVX2 and FMA are, AVX-512 CPUs included,
// and the AVX-512 one only when the build asks for it (setup.py: GSW_RASTER_LANES=16). On the AVX-512
// CPU measured (AMD Zen 4, which splits each 512-bit operation into two 256-bit halves) the AVX2
// rasterizer is the faster (docs/performance.md); a CPU with full-width AVX-512 units may differ.
#if defined(__AVX512F__) && defined(GSW_RASTER_LANES) && GSW_RASTER_LANES == 16
#define GSW_RASTER_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#define GSW_RASTER_AVX2 1
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include "gsw/blend.h"
#include "gsw/common.h"

namespace gsw {
namespace splat {
namespace cpu {

// Pixels are processed in chunks of kLanes consecutive pixels of a tile (row-major in the tile): the
// chunk's state (transmittance, colour sums, last contributor) stays in registers while the chunk
// walks the tile's depth-sorted list, and stops as soon as all its pixels are done. A chunk is one
// vector of float lanes on AVX2 (8) and AVX-512 (16): each Gaussian is blended only into the chunks its
// support reaches, and a narrower chunk wastes fewer lanes outside the support where the support is a
// few pixels wide (most Gaussians of a trained scene), for a little more work per chunk.
#if defined(GSW_RASTER_AVX2)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 16;
#endif

// kLanes values of one chunk, aligned to their size up to 64 bytes with no padding (the unit of the
// kernels' per-tile scratch arrays, whose channel rows follow each other at kLanes values apart).
template <typename V>
struct alignas(kLanes * sizeof(V) < 64 ? kLanes * sizeof(V) : 64) LaneBlock {
  V v[kLanes];
};
static_assert(sizeof(LaneBlock<float>) == kLanes * sizeof(float), "lane blocks are contiguous rows");

// True when any of the kLanes int32 flags at m (aligned as a LaneBlock) is non-zero. GCC turns the
// plain loop into lane extracts; the intrinsics test all lanes at once.
inline bool any_lane(const int32_t* m) {
#if defined(GSW_RASTER_AVX512)
  static_assert(kLanes == 16, "any_lane (AVX-512) tests 16 int32 lanes");
  const __m512i v = _mm512_load_si512(reinterpret_cast<const void*>(m));
  return _mm512_test_epi32_mask(v, v) != 0;
#elif defined(__AVX2__)
  __m256i o = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  for (int j = 8; j < kLanes; j += 8)
    o = _mm256_or_si256(o, _mm256_load_si256(reinterpret_cast<const __m256i*>(m + j)));
  return !_mm256_testz_si256(o, o);
#else
  int32_t r = 0;
  for (int j = 0; j < kLanes; ++j) r |= m[j];
  return r != 0;
#endif
}

#if defined(GSW_RASTER_AVX512)
// Sum of the 16 lanes of v, added in the same tree as GCC's _mm512_reduce_add_ps (halves, then
// quarters, then pairs), so results match it bit for bit. GCC 12's plain extract intrinsic (also behind
// _mm512_castps512_ps256) takes an undefined pass-through operand, which it then reports as "may be
// used uninitialized" once inlined into OpenMP regions; the zero-masking form with a full mask
// computes the same halves and has no such operand.
inline float reduce_add(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 1));
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 0));
  const __m256 s8 = _mm256_add_ps(hi, lo);
  const __m128 s4 = _mm_add_ps(_mm256_extractf128_ps(s8, 1), _mm256_castps256_ps128(s8));
  const __m128 s2 = _mm_add_ps(s4, _mm_shuffle_ps(s4, s4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(s2) + _mm_cvtss_f32(_mm_shuffle_ps(s2, s2, _MM_SHUFFLE(1, 1, 1, 1)));
}
#endif

// Sum of the kLanes values at v (aligned as a LaneBlock).
template <typename T>
inline T lane_sum(const T* v) {
  T s = 0;
  for (int j = 0; j < kLanes; ++j) s += v[j];
  return s;
}
#if defined(GSW_RASTER_AVX512)
template <>
inline float lane_sum<float>(const float* v) {
  return reduce_add(_mm512_load_ps(v));
}

// 16 float lanes with arithmetic operators, so the shared per-pixel math (gsw/blend.h) runs on AVX-512
// registers as it is.
struct F16 {
  __m512 v;
  F16(float x) : v(_mm512_set1_ps(x)) {}  // NOLINT: implicit, like a scalar T
  explicit F16(__m512 x) : v(x) {}
};
inline F16 operator+(F16 a, F16 b) { return F16(_mm512_add_ps(a.v, b.v)); }
inline F16 operator-(F16 a, F16 b) { return F16(_mm512_sub_ps(a.v, b.v)); }
inline F16 operator*(F16 a, F16 b) { return F16(_mm512_mul_ps(a.v, b.v)); }
inline F16 operator-(F16 a) { return F16(_mm512_sub_ps(_mm512_setzero_ps(), a.v)); }
inline F16& operator+=(F16& a, F16 b) { return a = a + b; }
#endif

// exp(-s) for s >= 0 (callers pass max(s, 0)): gsw::exp_nonpos, vectorizable in masked loops.
inline float exp_neg(float s) { return exp_nonpos(-s); }
inline double exp_neg(double s) { return exp_nonpos(-s); }

// Alpha (clamped at 0.99) and vis = exp(-max(sigma, 0)) of one Gaussian at the kLanes pixel centres
// of a chunk (gsw/blend.h); alpha is 0 where sigma < 0 (such pixels are skipped, as alpha < 1/255 is).
// The forward and the backward both call this one function, so they agree on every alpha bit for bit.
template <typename T>
inline void chunk_alpha_vis(const T* px, const T* py, T mx, T my, T ca, T cb, T cc, T op, T* alpha, T* vis) {
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    const T dx = mx - px[j], dy = my - py[j];
    const T sg = blend_sigma(dx, dy, ca, cb, cc);
    const T v = exp_neg(sg > T(0) ? sg : T(0));
    T a = op * v;
    a = a < T(kAlphaMax) ? a : T(kAlphaMax);
    alpha[j] = sg >= T(0) ? a : T(0);
    vis[j] = v;
  }
}

// A Gaussian's terms of alpha that do not depend on the pixel, computed once per Gaussian
// (gaussian_records): none in the generic form, whose paths read the conic and opacity where they lie.
template <typename T>
struct BlendTerms {
  static BlendTerms of(T, T, T, T) { return {}; }
};

#if defined(GSW_RASTER_AVX512)
// exp(-s) on 16 lanes for 0 <= s <= 200: 2^t with t = -s log2(e) = n + f, n = round(t), |f| <= 1/2;
// 2^f by gsw::kExp2Poly and 2^n by vscalefps, which also takes the result to 0
// (FTZ) for large s with no exponent-field arithmetic. f is formed with FMAs from log2(e) split into
// two floats, so the reduction adds no error of its own. About half the instructions of exp_nonpos.
inline __m512 exp_neg16(__m512 s) {
  const __m512 hi = _mm512_set1_ps(-1.44269502162933349609375f), lo = _mm512_set1_ps(-1.925963033500011079e-8f);
  // maskz forms with a full mask throughout: GCC 12's plain max/min/roundscale/scalef take an undefined
  // pass-through operand, reported as "may be used uninitialized" once inlined (see reduce_add)
  const __m512 n = _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(s, hi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_fmadd_ps(s, lo, _mm512_fmadd_ps(s, hi, _mm512_sub_ps(_mm512_setzero_ps(), n)));
  __m512 p = _mm512_set1_ps(kExp2Poly[6]);
  for (int k = 5; k >= 0; --k) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[k]));
  return _mm512_maskz_scalef_ps(0xFFFF, p, n);
}

// chunk_alpha_vis for float on AVX-512 registers: the same sigma and clamps, exp by exp_neg16. A NaN
// sigma gives vis 1 and alpha 0, as in the generic body.
template <>
inline void chunk_alpha_vis<float>(const float* px, const float* py, float mx, float my, float ca, float cb, float cc,
                                   float op, float* alpha, float* vis) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 dx = _mm512_sub_ps(_mm512_set1_ps(mx), _mm512_load_ps(px));
  const __m512 dy = _mm512_sub_ps(_mm512_set1_ps(my), _mm512_load_ps(py));
  const __m512 quad = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(ca), dx), dx,
                                     _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(cc), dy), dy));
  const __m512 sg = _mm512_fmadd_ps(_mm512_set1_ps(0.5f), quad, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(cb), dx), dy));
  const __mmask16 nonneg = _mm512_cmp_ps_mask(sg, zero, _CMP_GE_OQ);
  // max(sg, 0) is 0 for a NaN sg (the second operand is returned), then capped where exp_neg16 holds
  const __m512 v = exp_neg16(_mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, sg, zero), _mm512_set1_ps(200.0f)));
  const __m512 a = _mm512_maskz_min_ps(0xFFFF, _mm512_mul_ps(_mm512_set1_ps(op), v), _mm512_set1_ps(kAlphaMax));
  _mm512_store_ps(alpha, _mm512_maskz_mov_ps(nonneg, a));
  _mm512_store_ps(vis, v);
}
#elif defined(GSW_RASTER_AVX2)
// 2^t on 8 lanes for -126 <= t <= 0: t = n + f with n = round(t), |f| <= 1/2, 2^f by gsw::kExp2Poly
// and 2^n formed in the exponent field. The rasterizer's alpha waits on this function's result, so
// its dependency chain is kept short: the polynomial by Estrin's scheme (three levels of FMAs where
// Horner's has six; the same coefficients, rounding within an ulp of Horner's).
inline __m256 exp2_8(__m256 t) {
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, n);
  const __m256 f2 = _mm256_mul_ps(f, f);
  const __m256 p01 = _mm256_fmadd_ps(_mm256_set1_ps(kExp2Poly[1]), f, _mm256_set1_ps(kExp2Poly[0]));
  const __m256 p23 = _mm256_fmadd_ps(_mm256_set1_ps(kExp2Poly[3]), f, _mm256_set1_ps(kExp2Poly[2]));
  const __m256 p45 = _mm256_fmadd_ps(_mm256_set1_ps(kExp2Poly[5]), f, _mm256_set1_ps(kExp2Poly[4]));
  const __m256 p456 = _mm256_fmadd_ps(_mm256_set1_ps(kExp2Poly[6]), f2, p45);
  const __m256 p0123 = _mm256_fmadd_ps(p23, f2, p01);
  const __m256 p = _mm256_fmadd_ps(p456, _mm256_mul_ps(f2, f2), p0123);
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// Sum of the 8 lanes of v (halves, then pairs).
inline float reduce_add8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// float on AVX2: alpha in base 2, opacity exp(-sigma) = 2^t with
// t = log2(opacity) - log2(e) sigma = dx (A dx + B dy) + C dy^2 + L (dx = mean - pixel, likewise dy):
// the conic and log2(e) folded into A, B, C and the opacity into L, where the natural-base form takes
// a multiply for each on every pixel's chain to alpha.
// S = 2^(2 C): the ratio by which the ratio of consecutive rows' values changes from row to row
// (Alpha16::rows).
template <>
struct BlendTerms<float> {
  float A, B, C, L, S;
  static BlendTerms of(float ca, float cb, float cc, float opacity) {
    constexpr float kLog2e = 1.44269504088896340736f;
    const float C = -0.5f * kLog2e * cc;
    return {-0.5f * kLog2e * ca, -kLog2e * cb, C,
            std::log2(opacity),  // -inf for opacity 0: alpha 2^-126, under the 1/255 cut (Alpha8)
            std::exp2(2.0f * C)};
  }
};

// One Gaussian's alpha on 8 lanes (BlendTerms<float>). The forward and the backward of the AVX2
// rasterizer both use it, with terms from BlendTerms<float>::of, so they agree on every alpha bit.
struct Alpha8 {
  __m256 mx, my, A, B, C, L;
  Alpha8(float mean_x, float mean_y, const BlendTerms<float>& bt)
      : mx(_mm256_set1_ps(mean_x)), my(_mm256_set1_ps(mean_y)), A(_mm256_set1_ps(bt.A)), B(_mm256_set1_ps(bt.B)),
        C(_mm256_set1_ps(bt.C)), L(_mm256_set1_ps(bt.L)) {}
  // Alpha (clamped at kAlphaMax; 0 where sigma < 0, as in chunk_alpha_vis, and for a NaN t) at pixel
  // centres px, py; raw = opacity exp(-sigma) unclamped (the backward's derivative of alpha). t is
  // clamped to [-126, 0] for exp2_8: alpha below 2^-126 is 0 for the rasterizer's 1/255 cut, and 1 for
  // t > 0 (opacity above 1 or sigma < 0) is over kAlphaMax anyway.
  inline __m256 alpha(__m256 px, __m256 py, __m256& raw) const {
    const __m256 dx = _mm256_sub_ps(mx, px), dy = _mm256_sub_ps(my, py);
    const __m256 lin = _mm256_fmadd_ps(A, dx, _mm256_mul_ps(B, dy));
    const __m256 t = _mm256_fmadd_ps(dx, lin, _mm256_fmadd_ps(_mm256_mul_ps(C, dy), dy, L));
    const __m256 nonneg = _mm256_cmp_ps(t, L, _CMP_LE_OQ);  // sigma >= 0 (false for NaN)
    // min returns its second operand (0) for a NaN t
    raw = exp2_8(_mm256_max_ps(_mm256_min_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(-126.0f)));
    return _mm256_and_ps(nonneg, _mm256_min_ps(raw, _mm256_set1_ps(kAlphaMax)));
  }
};

#if defined(__AVX512F__)
// Alpha8 on two chunks at once, one 512-bit vector of 16 lanes (chunk q0 in the low half, q1 in the
// high half), for CPUs with AVX-512 that run the AVX2 rasterizer. The alpha pass is bound by how many
// of its long dependency chains the core keeps in flight, not by its arithmetic; a core that splits
// each 512-bit operation into two 256-bit halves (AMD Zen 4) still holds it as one operation in its
// scheduler, so it keeps twice the lanes in flight (docs/performance.md). Each half is Alpha8's
// arithmetic, step for step (same operations, same order), so every alpha equals Alpha8's bit for bit
// (tests/test_alpha_lanes.py); the backward, which takes its alphas from Alpha8, agrees with the
// forward whichever way the forward paired its chunks.
inline __m512 exp2_16(__m512 t) {
  // maskz forms with a full mask: see reduce_add (GCC 12's plain forms warn once inlined)
  const __m512 n = _mm512_maskz_roundscale_ps(0xFFFF, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  const __m512 f2 = _mm512_mul_ps(f, f);
  const __m512 p01 = _mm512_fmadd_ps(_mm512_set1_ps(kExp2Poly[1]), f, _mm512_set1_ps(kExp2Poly[0]));
  const __m512 p23 = _mm512_fmadd_ps(_mm512_set1_ps(kExp2Poly[3]), f, _mm512_set1_ps(kExp2Poly[2]));
  const __m512 p45 = _mm512_fmadd_ps(_mm512_set1_ps(kExp2Poly[5]), f, _mm512_set1_ps(kExp2Poly[4]));
  const __m512 p456 = _mm512_fmadd_ps(_mm512_set1_ps(kExp2Poly[6]), f2, p45);
  const __m512 p0123 = _mm512_fmadd_ps(p23, f2, p01);
  const __m512 p = _mm512_fmadd_ps(p456, _mm512_mul_ps(f2, f2), p0123);
  const __m512i e = _mm512_maskz_slli_epi32(0xFFFF, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(0xFFFF, n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

struct Alpha16 {
  __m512 mx, my, A, B, C, L;
  explicit Alpha16(const Alpha8& g)
      : mx(both(g.mx)), my(both(g.my)), A(both(g.A)), B(both(g.B)), C(both(g.C)), L(both(g.L)) {}
  // Alpha8::alpha on 16 lanes, raw included (the backward keeps it).
  inline __m512 alpha(__m512 px, __m512 py, __m512& raw) const {
    const __m512 dx = _mm512_sub_ps(mx, px), dy = _mm512_sub_ps(my, py);
    const __m512 lin = _mm512_fmadd_ps(A, dx, _mm512_mul_ps(B, dy));
    const __m512 t = _mm512_fmadd_ps(dx, lin, _mm512_fmadd_ps(_mm512_mul_ps(C, dy), dy, L));
    const __mmask16 nonneg = _mm512_cmp_ps_mask(t, L, _CMP_LE_OQ);
    raw = exp2_16(_mm512_maskz_max_ps(0xFFFF, _mm512_maskz_min_ps(0xFFFF, t, _mm512_setzero_ps()),
                                      _mm512_set1_ps(-126.0f)));
    return _mm512_maskz_min_ps(nonneg, raw, _mm512_set1_ps(kAlphaMax));
  }
  // The same, without raw (the forward's alpha pass does not keep it; the compiler drops it).
  inline __m512 alpha(__m512 px, __m512 py) const {
    __m512 raw;
    return alpha(px, py, raw);
  }
  // The alphas (and, with Raw, the unclamped values: raw) of rows r0..r1 of a tile 16 pixels wide, row r
  // into out + 16 r (raw + 16 r): px, the row's 16 pixel centres; py(r), row r's (broadcast); bt, the
  // Gaussian's blend terms.
  // Row r0 is alpha() itself; each further row is the row above times the ratio of their values,
  // 2^(t(row + 1) - t(row)) per lane, which is itself the ratio above times S (its exponent changes by
  // 2 C from row to row): two multiplies a row where alpha() evaluates a polynomial, and one chain of
  // them down the band, whose latency the rest of the Gaussian's work hides. Each row is within a few
  // ulps times the square of its distance from row r0 of alpha() where rows_apply allows the form
  // (tests/test_alpha_lanes.py).
  template <bool Raw, typename Py>
  inline void rows(__m512 px, Py&& py, int64_t r0, int64_t r1, const BlendTerms<float>& bt, float* out,
                   float* raw) const {
    const __m512 lim = _mm512_set1_ps(126.0f), amax = _mm512_set1_ps(kAlphaMax), zero = _mm512_setzero_ps();
    const __m512 s = _mm512_set1_ps(bt.S), py0 = py(r0), dx = _mm512_sub_ps(mx, px), dy = _mm512_sub_ps(my, py0);
    // the ratio of rows r0 + 1 and r0: t(dx, dy - 1) - t(dx, dy) = -(B dx + C (2 dy - 1)), dy = my - py;
    // within +-126 where rows_apply holds, clamped for exp2_16 anyway
    const __m512 twody1 = _mm512_fmsub_ps(_mm512_set1_ps(2.0f), dy, _mm512_set1_ps(1.0f));
    const __m512 d = _mm512_sub_ps(zero, _mm512_fmadd_ps(B, dx, _mm512_mul_ps(C, twody1)));
    __m512 F = exp2_16(_mm512_maskz_max_ps(0xFFFF, _mm512_maskz_min_ps(0xFFFF, d, lim), _mm512_sub_ps(zero, lim)));
    __m512 G;  // row r's value, unclamped
    __m512 a = alpha(px, py0, G);
    for (int64_t r = r0;; ++r) {
      _mm512_storeu_ps(out + 16 * r, a);
      if (Raw) _mm512_storeu_ps(raw + 16 * r, G);
      if (r == r1) break;
      G = _mm512_mul_ps(G, F);
      F = _mm512_mul_ps(F, s);
      a = _mm512_maskz_min_ps(0xFFFF, G, amax);
    }
  }
  // The 16 lanes of chunks a (low half) and b (high half), 8 floats each.
  static __m512 pair(const float* a, const float* b) {
    const __m512d lo = _mm512_maskz_insertf64x4(0xFF, _mm512_setzero_pd(), _mm256_castps_pd(_mm256_load_ps(a)), 0);
    return _mm512_castpd_ps(_mm512_maskz_insertf64x4(0xFF, lo, _mm256_castps_pd(_mm256_load_ps(b)), 1));
  }

 private:
  static __m512 both(__m256 v) { return _mm512_castpd_ps(_mm512_maskz_broadcast_f64x4(0xFF, _mm256_castps_pd(v))); }
};
#endif
#endif

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
